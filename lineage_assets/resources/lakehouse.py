"""The environment a deployment of the pipeline runs against, as a Dagster resource."""

from __future__ import annotations

import os

import dagster as dg

from lineage_assets.settings import Settings


class LakehouseResource(dg.ConfigurableResource):
    """Settings for one environment: the process environment plus ``overrides``.

    ``overrides`` maps ``LINEAGE_ASSETS_*`` variable names to values; ``definitions.py`` chooses
    them per environment, tests point them at their own stack.
    """

    overrides: dict[str, str] = {}

    def settings(self) -> Settings:
        return Settings.from_env({**os.environ, **self.overrides})
