"""The tls profile's proxy: Debian's nginx, serving TLS on the registry's, the catalog's and Marquez's
ports and passing a request on to the server behind (``Settings.behind_proxy``) only with its credential,
as the project's clients send them: the registry's basic auth and Marquez's API key compared with the
profile's, the catalog's token vouched for by the token server."""

from __future__ import annotations

import base64
import os
import pwd
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from lineage_assets.connections import (
    TokenRefused,
    catalog_access_token,
    https_context,
    kafka_properties,
    marquez_headers,
)
from lineage_assets.settings import Settings
from lineage_assets.stack import security
from lineage_assets.stack.probes import http_ok
from lineage_assets.stack.services.base import Service, StackError, backend_url, render, rendered
from lineage_assets.stack.services.catalog import ICEBERG_REST, REGISTRY
from lineage_assets.stack.services.marquez import MARQUEZ
from lineage_assets.stack.services.token_server import TOKEN_SERVER


@dataclass(frozen=True)
class Front:
    service: Service
    port: Callable[[Settings], int]
    authorization: Callable[[Settings], str]  # the Authorization header its clients send
    challenge: str  # the WWW-Authenticate of a refusal
    probe: str  # a path that an authorized GET finds
    token_checked: bool = False  # checked by the token server, not compared with ``authorization``


def _catalog_authorization(settings: Settings) -> str:
    return f"Bearer {catalog_access_token(settings)}"


def _registry_authorization(settings: Settings) -> str:
    user_info = kafka_properties(settings).get("basic.auth.user.info", "")
    return "Basic " + base64.b64encode(user_info.encode()).decode()


FRONTS = (
    Front(
        REGISTRY,
        lambda s: s.registry_port,
        _registry_authorization,
        'Basic realm="registry"',
        "/apis/ccompat/v7/subjects",
    ),
    Front(
        ICEBERG_REST,
        lambda s: s.iceberg_rest_port,
        _catalog_authorization,
        "",  # the token server's
        "/v1/config",
        token_checked=True,
    ),
    Front(
        MARQUEZ,
        lambda s: s.marquez_port,
        lambda s: marquez_headers(s).get("Authorization", ""),
        'Bearer realm="marquez"',
        "/api/v1/namespaces?limit=1",
    ),
)


def _fronts(settings: Settings) -> list[Front]:
    """The fronts of the services the stack runs (one run elsewhere has its own security)."""
    return [front for front in FRONTS if not front.service.replaced(settings)]


def _nginx() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if not found:
        raise StackError("nginx not found: run `make setup` (installs Debian's nginx)")
    return found


def _configuration(settings: Settings) -> str:
    return str(PROXY.data_dir(settings) / "nginx.conf")


def _prepare_proxy(settings: Settings) -> None:
    data = PROXY.data_dir(settings)
    fronts = "".join(
        rendered(
            "nginx-front-token.conf",
            name=front.service.name,
            host=settings.host,
            port=front.port(settings),
            backend=backend_url(settings, front.port(settings)),
            userinfo=f"{settings.local_token_server_url}/protocol/openid-connect/userinfo",
            ca=settings.security_dir / security.CA,
        )
        if front.token_checked
        else rendered(
            "nginx-front.conf",
            name=front.service.name,
            variable=front.service.name.replace("-", "_"),
            authorization=front.authorization(settings),
            challenge=front.challenge,
            host=settings.host,
            port=front.port(settings),
            backend=backend_url(settings, front.port(settings)),
        )
        for front in _fronts(settings)
    )
    # Its workers run as the stack's own user, the one that may enter the owner-only state folder
    # (nginx started by root would otherwise switch them to nobody).
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
    render(
        "nginx.conf",
        data / "nginx.conf",
        user=user,
        data_dir=data,
        certificate=security.server_pem(settings),
        fronts=fronts,
    )


def _proxy_healthy(settings: Settings) -> bool:
    """Each front answers, over TLS trusting the profile's CA, a request with its credential."""
    context = https_context(settings)
    try:
        return all(
            http_ok(
                f"https://{settings.host}:{front.port(settings)}{front.probe}",
                headers={"Authorization": front.authorization(settings)},
                context=context,
            )
            for front in _fronts(settings)
        )
    except (TokenRefused, OSError):  # the token server refused or did not answer
        return False


PROXY: Service = Service(
    name="proxy",
    wanted=lambda s: s.tls,
    replaced_by=("registry_url", "catalog_url", "marquez_url"),
    ports=lambda s: [front.port(s) for front in _fronts(s)],
    # In the foreground, under its own prefix, its errors on stderr (the service's log) from the start.
    command=lambda s: [
        _nginx(),
        "-p",
        f"{PROXY.data_dir(s)}/",
        "-e",
        "stderr",
        "-c",
        _configuration(s),
        "-g",
        "daemon off;",
    ],
    healthy=_proxy_healthy,
    address=lambda s: ", ".join(f"https://{s.host}:{front.port(s)}" for front in _fronts(s)),
    prepare=_prepare_proxy,
    retitled=lambda command: [f"nginx: master process {' '.join(command)}"],
    requires=(*(front.service.name for front in FRONTS), TOKEN_SERVER.name),
)
