"""The tls profile's OAuth2 token server: Keycloak, over HTTPS with the profile's certificate, its realm
holding one confidential client, the catalog's, whose credentials are the profile's
``CATALOG_CREDENTIAL``. The catalog's clients ask it for tokens (client credentials grant); the proxy
in front of the catalog asks it whether a token is good (its userinfo endpoint).

Keycloak runs from its distribution in the jar cache, through a home of its own in the state folder:
its realm database and the server image that ``kc.sh build`` makes are the stack's, so two stacks on
one machine share only the distribution.
"""

from __future__ import annotations

import json
import shutil
import subprocess

from lineage_assets.connections import https_context
from lineage_assets.settings import TOKEN_SERVER_REALM, Settings
from lineage_assets.settings_environment import secret_in_effect
from lineage_assets.stack import security
from lineage_assets.stack.probes import http_ok
from lineage_assets.stack.services.base import Service, StackError, java

# Options of the server image (`kc.sh build`); the same at every start, so it is built once per home.
BUILD_OPTIONS = ("--db=dev-file",)
SHARED = ("conf", "providers", "themes", "lib/app", "lib/lib")  # read-only parts of the distribution


def _distribution(settings: Settings) -> str:
    found = sorted((settings.jars_dir / "keycloak").glob("keycloak-*/bin/kc.sh"))
    if not found:
        raise StackError(f"Keycloak not found in {settings.jars_dir / 'keycloak'}: run `make setup`")
    return str(found[-1].parent.parent)


def _kc(settings: Settings) -> str:
    return str(TOKEN_SERVER.data_dir(settings) / "bin" / "kc.sh")


SECRET_VARIABLE = "CATALOG_CLIENT_SECRET"  # the realm file's placeholder, filled from the environment
# Its tokens live a minute (Keycloak's default is five), so that a job running longer, as a streaming
# job does on any token server, must have its token refreshed here too.
TOKEN_LIFETIME_S = 60


def _java_environment() -> dict[str, str]:
    return {"JAVA": java(), "JAVA_OPTS_KC_HEAP": "-Xms64m -Xmx512m"}


def _environment(settings: Settings) -> dict[str, str]:
    """The server's environment: its JVM, and the client's secret for the realm's import (a process's
    environment is its owner's alone; its arguments are anyone's)."""
    return {**_java_environment(), SECRET_VARIABLE: secret_in_effect(settings, "catalog_credential").partition(":")[2]}


def _prepare(settings: Settings) -> None:
    """Its home (the distribution's read-only parts linked, its script, runner and server image its
    own: Quarkus writes the image beside the runner), built once; the realm to import at every start."""
    home = TOKEN_SERVER.data_dir(settings)
    image = home / "lib" / "quarkus"
    distribution = _distribution(settings)
    stamp = image / ".built-from"  # the distribution the home was made of: another one makes it again
    if not stamp.is_file() or stamp.read_text() != distribution:
        shutil.rmtree(home / "lib", ignore_errors=True)
        (home / "bin").mkdir(parents=True, exist_ok=True)
        (home / "lib").mkdir()
        shutil.copy2(f"{distribution}/bin/kc.sh", home / "bin" / "kc.sh")
        shutil.copy2(f"{distribution}/lib/quarkus-run.jar", home / "lib" / "quarkus-run.jar")
        shutil.copytree(f"{distribution}/lib/quarkus", image)
        for part in SHARED:
            (home / part).unlink(missing_ok=True)
            (home / part).symlink_to(f"{distribution}/{part}")
        built = subprocess.run(
            ["/bin/sh", _kc(settings), "build", *BUILD_OPTIONS],
            env={"PATH": "/usr/bin:/bin", **_java_environment()},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if built.returncode != 0:
            raise StackError(f"token-server: `kc.sh build` failed:\n{built.stdout[-2000:]}{built.stderr[-2000:]}")
        stamp.write_text(distribution)
    client = secret_in_effect(settings, "catalog_credential").partition(":")[0]
    realm = {
        "realm": TOKEN_SERVER_REALM,
        "enabled": True,
        "accessTokenLifespan": TOKEN_LIFETIME_S,
        "clients": [
            {
                "clientId": client,
                "enabled": True,
                "publicClient": False,
                "clientAuthenticatorType": "client-secret",
                "secret": f"${{{SECRET_VARIABLE}}}",
                "serviceAccountsEnabled": True,
                "standardFlowEnabled": False,
                "directAccessGrantsEnabled": False,
            }
        ],
    }
    realm_file = home / "data" / "import" / "realm.json"
    realm_file.parent.mkdir(parents=True, exist_ok=True)
    realm_file.write_text(json.dumps(realm, indent=2))


def _command(settings: Settings) -> list[str]:
    pem = str(security.server_pem(settings))  # its key, then its certificate chain: Keycloak reads both
    return [
        "/bin/sh",
        _kc(settings),
        "start",
        "--optimized",
        "--import-realm",
        "--http-enabled=false",
        f"--https-port={settings.token_server_port}",
        f"--https-certificate-file={pem}",
        f"--https-certificate-key-file={pem}",
        f"--http-host={settings.host}",
        # Its tokens name the address they were asked at, the one the catalog's clients are given.
        "--hostname-strict=false",
    ]


def _healthy(settings: Settings) -> bool:
    """The realm is imported and published over TLS."""
    return http_ok(
        f"{settings.local_token_server_url}/.well-known/openid-configuration", context=https_context(settings)
    )


TOKEN_SERVER: Service = Service(
    name="token-server",
    wanted=lambda s: s.local_token_server,
    replaced_by=("catalog_url",),
    ports=lambda s: [s.token_server_port],
    command=_command,
    healthy=_healthy,
    address=lambda s: s.local_token_server_url,
    prepare=_prepare,
    env=_environment,
    start_timeout=180.0,  # its first start makes its database and imports the realm: a minute on a busy machine
    umask=0o077,  # its database holds the client's secret
)
