"""Whether a service answers: the probes every service's health check is made of."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status: int = response.status
            return 200 <= status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False
