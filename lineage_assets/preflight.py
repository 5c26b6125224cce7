"""Before a run does any work: its settings are well-formed and the data services they name answer.

A run that starts against a bad address fails late and leaves lineage naming datasets that do not
exist (a topic on a host that does not resolve); this check fails it first, in one line per problem
that names the setting and its value.
"""

from __future__ import annotations

import socket
import urllib.parse

from lineage_assets.settings import ENV_PREFIX, Settings, SettingsError
from lineage_assets.stack.probes import port_open


def _addresses(settings: Settings) -> list[tuple[str, str, int]]:
    """(setting that names it, host, port) of each data service a run reads or writes."""
    found = []
    kafka = "kafka_bootstrap" if settings.kafka_bootstrap else "kafka_port"
    for server in settings.kafka_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        found.append((kafka, host, int(port)))
    for override, local, url in (
        ("registry_url", "registry_port", settings.schema_registry_url),
        ("s3_endpoint", "s3_port", settings.s3_url),
        ("catalog_url", "iceberg_rest_port", settings.iceberg_catalog_url),
    ):
        setting = override if getattr(settings, override) else local
        parts = urllib.parse.urlsplit(url)
        if parts.hostname is None:
            raise SettingsError(f"{ENV_PREFIX}{setting.upper()}: {url!r} is not a URL with a host")
        found.append((setting, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)))
    return found


def unreachable(settings: Settings, timeout: float = 2.0) -> list[str]:
    """Each data service of ``settings`` whose host does not resolve or where nothing answers."""
    found = []
    for setting, host, port in _addresses(settings):
        named = f"{ENV_PREFIX}{setting.upper()}={getattr(settings, setting)!r}"
        try:
            socket.getaddrinfo(host, port)
        except socket.gaierror:
            found.append(f"{named}: host {host} does not resolve")
            continue
        if not port_open(host, port, timeout=timeout):
            local = " (the local stack's: `lineage-assets stack up`)" if setting.endswith("_port") else ""
            found.append(f"{named}: nothing answers at {host}:{port} within {timeout:.0f} s{local}")
    return found


def require_services(settings: Settings) -> None:
    """SettingsError unless the settings are well-formed and every data service answers."""
    if problems := settings.problems() or unreachable(settings):
        raise SettingsError("\n".join(problems))
