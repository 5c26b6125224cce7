"""The settings as ``LINEAGE_ASSETS_*`` variables: read from an environment and the secrets file,
written back as an environment, a secrets file or the list `lineage-assets settings` prints."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lineage_assets.settings import ENV_PREFIX, PROFILE_SECRETS, SECRETS_FILE_VARIABLE, Settings, SettingsError

HIDDEN = "(hidden)"  # a secret setting's value where settings are listed


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings with every ``LINEAGE_ASSETS_*`` variable applied; a malformed value names itself."""
    variables: Mapping[str, str] = os.environ if environ is None else environ
    if secrets_file := variables.get(SECRETS_FILE_VARIABLE):
        variables = {**_read_secrets(Path(secrets_file)), **variables}
    values: dict[str, Any] = {}
    for f in dataclasses.fields(Settings):
        name = ENV_PREFIX + f.name.upper()
        if name not in variables:
            continue
        raw = variables[name]
        kind: type = type(f.default)  # every field has a default (``_setting``): its type parses the value
        try:
            values[f.name] = _parse_bool(raw) if kind is bool else kind(raw)
        except ValueError:
            raise SettingsError(f"{name}={raw!r} is not a valid {kind.__name__} ({f.metadata['help']})") from None
    return Settings(**values)


def as_environment(settings: Settings, secrets: bool = True) -> dict[str, str]:
    """``settings`` as ``LINEAGE_ASSETS_*`` variables (``settings_from_env`` of them gives them back);
    without ``secrets``, what may be written to a file or shown: neither the secrets nor where a
    process finds them (its own ``SECRETS_FILE``, which such a record must not override)."""
    return {
        ENV_PREFIX + f.name.upper(): str(getattr(settings, f.name))
        for f in dataclasses.fields(settings)
        if secrets or not (f.metadata["secret"] or f.name == "secrets_file")
    }


def secret_environment(settings: Settings) -> dict[str, str]:
    """The secret settings as variables: for a child process's environment, never its arguments."""
    return {
        ENV_PREFIX + f.name.upper(): str(getattr(settings, f.name))
        for f in dataclasses.fields(settings)
        if f.metadata["secret"]
    }


def secrets_file_text(settings: Settings) -> str:
    """The secret settings as a ``secrets_file`` holds them."""
    lines = []
    for name, value in secret_environment(settings).items():
        if "\n" in value:
            raise SettingsError(f"{name}: a secret setting is one line (a secrets file holds it as NAME=value)")
        lines.append(f"{name}={value}\n")
    return "".join(lines)


def secret_in_effect(settings: Settings, name: str) -> str:
    """A secret setting's value in effect: its own, else (in the tls profile) the one the stack
    generated for its services, from the profile's owner-only secrets file."""
    value: str = getattr(settings, name)
    if value or not settings.tls or not (profile := settings.security_dir / PROFILE_SECRETS).is_file():
        return value
    return _read_secrets(profile).get(ENV_PREFIX + name.upper(), "")


def documentation() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for each setting, for the README and `--help`."""
    return [(ENV_PREFIX + f.name.upper(), str(f.default), f.metadata["help"]) for f in dataclasses.fields(Settings)]


def in_effect(settings: Settings) -> list[tuple[str, str, str, str]]:
    """(variable, default, value in effect, meaning) for each setting; a secret's value is shown only
    while it is its default (which the code shows anyway), else as ``HIDDEN``."""
    rows = []
    for (variable, default, meaning), f in zip(documentation(), dataclasses.fields(settings), strict=True):
        value = str(getattr(settings, f.name))
        rows.append((variable, default, HIDDEN if f.metadata["secret"] and value != default else value, meaning))
    return rows


def _read_secrets(path: Path) -> dict[str, str]:
    """The variables of a ``secrets_file``: secret settings only, one ``NAME=value`` a line."""
    try:
        text = path.read_text()
    except OSError as error:
        raise SettingsError(f"{SECRETS_FILE_VARIABLE}={str(path)!r}: cannot be read ({error.strerror})") from None
    secret = {ENV_PREFIX + f.name.upper() for f in dataclasses.fields(Settings) if f.metadata["secret"]}
    found = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        name, equals, value = line.partition("=")
        if not equals or name not in secret:
            # The line is named by its number (and its setting, if it names one), never shown: it may be a secret.
            known = {ENV_PREFIX + f.name.upper() for f in dataclasses.fields(Settings)}
            what = f"{name} is not a secret setting" if name in known else "it is not NAME=value"
            raise SettingsError(
                f"{SECRETS_FILE_VARIABLE}={str(path)!r}: line {number}: {what} "
                f"(the file holds {', '.join(sorted(secret))})"
            )
        found[name] = value
    return found


def _parse_bool(raw: str) -> bool:
    words = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}
    if raw.strip().lower() not in words:
        raise ValueError(raw)
    return words[raw.strip().lower()]
