// Iceberg's REST catalog server (iceberg-open-api's RESTCatalogServer: the same backend catalog, adapter
// and servlet) on one interface. The fixture binds every interface and has no setting for it, so this
// launcher builds the catalog through the server's own code and serves its servlet on `rest.host`.
//
//     java -cp <iceberg-rest jars> IcebergRestOnHost.java     (catalog properties from CATALOG_* variables)

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.Map;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServer;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.compression.gzip.GzipCompression;
import org.eclipse.jetty.compression.server.CompressionHandler;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public class IcebergRestOnHost {
  public static void main(String[] args) throws Exception {
    // The server's own start-up, up to its HTTP server (package-private: reached by reflection).
    Constructor<RESTCatalogServer> create = RESTCatalogServer.class.getDeclaredConstructor();
    create.setAccessible(true);
    Method backend = RESTCatalogServer.class.getDeclaredMethod("initializeBackendCatalog");
    backend.setAccessible(true);
    Object context = backend.invoke(create.newInstance());
    Method configuration = context.getClass().getDeclaredMethod("configuration");
    configuration.setAccessible(true);
    @SuppressWarnings("unchecked")
    Map<String, String> properties = (Map<String, String>) configuration.invoke(context);
    Constructor<?> adapter =
        Class.forName("org.apache.iceberg.rest.RESTServerCatalogAdapter").getDeclaredConstructor(context.getClass());
    adapter.setAccessible(true);

    ServletContextHandler handler = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    handler.addServlet(new ServletHolder(new RESTCatalogServlet((RESTCatalogAdapter) adapter.newInstance(context))), "/*");
    CompressionHandler compression = new CompressionHandler();
    compression.putCompression(new GzipCompression());
    handler.insertHandler(compression);

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(properties.getOrDefault("rest.host", "127.0.0.1"));
    connector.setPort(Integer.parseInt(properties.getOrDefault("rest.port", "8181")));
    server.addConnector(connector);
    server.setHandler(handler);
    server.start();
    server.join();
  }
}
