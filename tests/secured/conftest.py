"""The tls profile of the local stack (``LINEAGE_ASSETS_SECURITY=tls``), a whole stack of its own for
the tests of this folder: started once, stopped once they are done."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lineage_assets.kafka_properties import parse_properties, read_kafka_properties
from lineage_assets.settings import PROFILE_SECRETS, Settings
from lineage_assets.stack import security
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.testing import isolated_settings

# Clear of every other stack of the suite (10400 is the restart test's), its proxied servers 1000 higher too.
SECURED_PORT_OFFSET = 10800


@pytest.fixture(scope="package")
def secured_profile(tmp_path_factory) -> Iterator[tuple[Settings, Supervisor]]:
    """The profile's settings and supervisor, every service of it up."""
    settings = isolated_settings(
        "secured", offset=SECURED_PORT_OFFSET, security="tls", state_dir=tmp_path_factory.mktemp("secured")
    )
    supervisor = Supervisor(settings, progress=print)
    try:
        supervisor.up()
        yield settings, supervisor
    finally:
        supervisor.down()


@pytest.fixture(scope="package")
def secured(secured_profile) -> Settings:
    return secured_profile[0]


def profile_secrets(settings: Settings) -> set[str]:
    """Every password, token and key password of the profile, and the stack's S3 secret key."""
    client = read_kafka_properties(settings.security_dir / security.CLIENT_PROPERTIES)
    plain = read_kafka_properties(settings.security_dir / security.PLAIN_PROPERTIES)
    profile = (settings.security_dir / PROFILE_SECRETS).read_text().splitlines()
    s3proxy = parse_properties((settings.state_dir / "s3" / "s3proxy.properties").read_text())
    found = {
        client["sasl.password"],
        plain["sasl.password"],
        client["basic.auth.user.info"].split(":", 1)[1],
        *(line.split("=", 1)[1].rpartition(":")[2] for line in profile),  # a client credential's secret
        s3proxy["s3proxy.keystore-password"],
        settings.s3_secret_key,
    }
    assert all(len(secret) >= 16 for secret in found)
    return found
