-- Databases of the Docker Compose stack (infra/compose.yaml). The postgres image runs this once,
-- when its data volume is first initialised; `docker compose down -v` starts over.
-- Names are fixed here: Iceberg's is the default of LINEAGE_ASSETS_CATALOG_DATABASE, Marquez's
-- are the ones baked into the marquez image's marquez.dev.yml.

CREATE DATABASE iceberg;   -- Iceberg REST catalog (JDBC catalog), as the local stack creates it
CREATE DATABASE registry;  -- Apicurio Registry's sql storage (schemas outlive restarts, like the local H2 file)

-- Marquez migrates its own schema on start; PostgreSQL 15 lets only a database's owner create
-- tables in its public schema, so the marquez user owns its database.
CREATE USER marquez WITH PASSWORD 'marquez';
CREATE DATABASE marquez OWNER marquez;
