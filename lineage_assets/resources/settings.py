"""The settings of the environment the pipeline runs against, as a Dagster resource."""

from __future__ import annotations

import os

import dagster as dg
from pydantic import PrivateAttr

from lineage_assets.settings import Settings
from lineage_assets.settings_environment import as_environment, settings_from_env
from lineage_assets.settings_validation import validated


class SettingsResource(dg.ConfigurableResource):
    """One :class:`Settings`: the process environment plus ``overrides``, read once per resource.

    ``overrides`` maps ``LINEAGE_ASSETS_*`` variable names to values; ``definitions.py`` chooses
    them per environment, tests point them at their own stack. The other resources hold this one,
    and an asset reads every address and name of its run from it.
    """

    overrides: dict[str, str] = {}
    _settings: Settings | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, settings: Settings) -> SettingsResource:
        """The resource holding exactly ``settings`` (every field as an override)."""
        return cls(overrides=as_environment(settings))

    @property
    def settings(self) -> Settings:
        """The settings, checked (SettingsError names each bad one before a run does anything)."""
        if self._settings is None:
            self._settings = validated(settings_from_env({**os.environ, **self.overrides}))
        return self._settings
