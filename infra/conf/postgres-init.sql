-- Databases of the Docker Compose stack (infra/compose.yaml). The postgres image runs this once,
-- when its data volume is first initialised; `docker compose down -v` starts over.
-- Names are fixed here: the defaults of LINEAGE_ASSETS_CATALOG_DATABASE and
-- LINEAGE_ASSETS_MARQUEZ_DATABASE, as the local stack creates them.

CREATE DATABASE iceberg;   -- Iceberg REST catalog (JDBC catalog), as the local stack creates it
CREATE DATABASE registry;  -- Apicurio Registry's sql storage (schemas outlive restarts, like the local H2 file)
CREATE DATABASE marquez;   -- Marquez's API (it migrates its own schema on start), user postgres as in the local stack
