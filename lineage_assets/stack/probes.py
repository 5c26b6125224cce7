"""Whether a service answers: the probes every service's health check is made of."""

from __future__ import annotations

import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_ok(
    url: str, timeout: float = 2.0, headers: Mapping[str, str] | None = None, context: ssl.SSLContext | None = None
) -> bool:
    """Whether a GET of ``url`` (with ``headers``; over HTTPS trusting ``context``) answers with success."""
    try:
        request = urllib.request.Request(url, headers=dict(headers or {}))
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            status: int = response.status
            return 200 <= status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False
