# The local stack's servers in one image, for infra/compose.yaml (each service a container running
# `lineage-assets stack serve NAME`): the project's image, whose code knows how every server is
# configured and started, with PostgreSQL 15, a JDK (the Iceberg REST catalog starts from a Java
# source file) and Node.js (Marquez's web server), and the servers' builds from the cache that
# `make setup` filled: the jars pinned in infra/pom.xml and Marquez built from source. Built by
# `lineage-assets stack image` (lineage_assets/stack/containers.py), which gathers that context.
ARG PROJECT_IMAGE=lineage-assets:latest
FROM ${PROJECT_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 openjdk-17-jdk-headless nodejs \
 && rm -rf /var/lib/apt/lists/*
ENV LINEAGE_ASSETS_CACHE_DIR=/opt/lineage-assets/cache \
    LINEAGE_ASSETS_STATE_DIR=/var/lib/lineage-assets
COPY cache/ /opt/lineage-assets/cache/
