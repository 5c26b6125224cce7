"""The catalogs: Iceberg's REST catalog of the tables, and the schema registry (Apicurio, with the
Confluent-compatible API) of the topics' value schemas."""

from __future__ import annotations

from lineage_assets.connections import jvm_trust_options
from lineage_assets.settings import Settings
from lineage_assets.stack.probes import http_ok
from lineage_assets.stack.services.base import (
    CONF_DIR,
    Service,
    backend_url,
    java,
)

# --- Iceberg REST catalog ----------------------------------------------------------------------


def _iceberg_rest_env(settings: Settings) -> dict[str, str]:
    """The server reads its catalog properties from CATALOG_* variables (`__` = `-`, `_` = `.`)."""
    return {
        "CATALOG_CATALOG__IMPL": "org.apache.iceberg.jdbc.JdbcCatalog",
        "CATALOG_URI": settings.catalog_jdbc_url,
        "CATALOG_JDBC_USER": settings.postgres_user,
        # No password: the local PostgreSQL trusts loopback, and the server logs its properties.
        "CATALOG_JDBC_SCHEMA__VERSION": "V1",
        "CATALOG_WAREHOUSE": settings.warehouse_url,
        "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
        "CATALOG_S3_ENDPOINT": settings.s3_url,
        "CATALOG_S3_PATH__STYLE__ACCESS": "true",
        # The S3 client's own credential chain, not catalog properties: the server logs those at start.
        "AWS_ACCESS_KEY_ID": settings.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": settings.s3_secret_key,
        "CATALOG_CLIENT_REGION": settings.s3_region,
        "CATALOG_REST_HOST": settings.host,
        "CATALOG_REST_PORT": str(settings.behind_proxy(settings.iceberg_rest_port)),
        # s3proxy rejects the SDK's default flexible-checksum headers.
        "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED",
        "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
    }


ICEBERG_REST: Service = Service(
    name="iceberg-rest",
    jars="iceberg-rest",
    replaced_by=("catalog_url",),
    ports=lambda s: [s.behind_proxy(s.iceberg_rest_port)],
    command=lambda s: [
        java(),
        "-Xmx512m",
        *jvm_trust_options(s),  # its S3 client's (HTTPS in the tls profile)
        f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
        "-cp",
        ICEBERG_REST.jar_classpath(s),
        str(CONF_DIR / "IcebergRestOnHost.java"),  # on the settings' host
    ],
    healthy=lambda s: http_ok(f"{backend_url(s, s.iceberg_rest_port)}/v1/config"),
    address=lambda s: s.iceberg_catalog_url,
    prepare=lambda s: ICEBERG_REST.data_dir(s).mkdir(parents=True, exist_ok=True),
    requires=("postgres", "s3"),
    env=_iceberg_rest_env,
)


# --- schema registry (Apicurio, Confluent-compatible API) ----------------------------------------

REGISTRY: Service = Service(
    name="registry",
    jars="registry",
    replaced_by=("registry_url",),
    ports=lambda s: [s.behind_proxy(s.registry_port)],
    command=lambda s: [
        java(),
        "-Xmx512m",
        f"-Dquarkus.http.host={s.host}",
        f"-Dquarkus.http.port={s.behind_proxy(s.registry_port)}",
        # Schemas survive restarts in an H2 file (the 2.6 archive bundles no PostgreSQL driver).
        f"-Dquarkus.datasource.jdbc.url=jdbc:h2:file:{s.state_dir / 'registry' / 'h2' / 'registry'}",
        "-jar",
        REGISTRY.single_jar(s),  # Quarkus's runner; its libraries are in lib/
    ],
    healthy=lambda s: http_ok(f"{backend_url(s, s.registry_port)}/health/ready"),
    address=lambda s: s.schema_registry_url,
    prepare=lambda s: REGISTRY.data_dir(s).mkdir(parents=True, exist_ok=True),
)
