"""Emission latency: time a job's thread spends per emitted event, with the backend up, slow and down.

The backend is an HTTP endpoint on loopback reached through openlineage-python's HttpTransport (a
2 s delay per request when "slow", a closed port when "down"): the emitter's sender thread talks to
it while the measured thread only records events.
"""

from __future__ import annotations

import datetime as dt
import http.server
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

from openlineage.client.event_v2 import RunState
from openlineage.client.transport.http import HttpConfig, HttpTransport

from bench.measure import percentile
from lineage_assets.catalog import SUPPLIER_STATS
from lineage_assets.lineage import events
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.settings import Settings


class _Receiver(http.server.BaseHTTPRequestHandler):
    delay = 0.0

    def do_POST(self):  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(self.delay)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def _backend(delay: float):
    handler = type("Receiver", (_Receiver,), {"delay": delay})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def measure(url: str, count: int) -> dict:
    settings = Settings()
    run = events.DagsterRun(run_id="bench", job_name="bench", started_at=dt.datetime.now(dt.UTC))
    event = events.asset_event(RunState.RUNNING, SUPPLIER_STATS, run, settings)  # built once: emission alone is timed
    with tempfile.TemporaryDirectory() as folder:
        transport = HttpTransport(HttpConfig(url=url, timeout=5.0))
        emitter = LineageEmitter(Path(folder), transport, retry_seconds=(0.2, 1.0))
        timings = []
        for _ in range(count):
            started = time.perf_counter()
            emitter.emit(event)
            timings.append((time.perf_counter() - started) * 1000)
        emitter.close(timeout=0.5)
    return {"events": count, "p50_ms": round(percentile(timings, 0.5), 4), "p99_ms": round(percentile(timings, 0.99), 4),
            "mean_ms": round(statistics.fmean(timings), 4)}


def run(quick: bool) -> dict:
    count = 500 if quick else 5000
    results = {}
    up, up_url = _backend(0.0)
    slow, slow_url = _backend(2.0)
    try:
        results["up"] = measure(up_url, count)
        results["slow (2 s per request)"] = measure(slow_url, count)
        results["down"] = measure(f"http://127.0.0.1:{_closed_port()}", count)
    finally:
        up.shutdown()
        slow.shutdown()
    worst = max(r["p99_ms"] for r in results.values())
    return {"name": "emission_latency", "target": "p99 <= 1 ms in all three", "met": worst <= 1.0,
            "worst_p99_ms": worst, "cases": results}


def summary(result: dict) -> str:
    return ", ".join(f"{case}: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms" for case, r in result["cases"].items())
