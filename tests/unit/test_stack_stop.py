"""`stack down` stops dependants before what they require, and peers together, as a quorum needs."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from lineage_assets.settings_environment import settings_from_env
from lineage_assets.stack.services.base import Service
from lineage_assets.stack.supervisor import Supervisor

# On SIGTERM a service notes it was signalled, waits (up to a minute) for what it names in WAIT_FOR
# to be signalled too, as a KRaft node waits for its quorum, then notes its clean stop.
SERVICE_SCRIPT = """
import os, signal, sys, time
from pathlib import Path
here, name, waits_for = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
def stop(*_):
    (here / f"{name}.signalled").touch()
    deadline = time.monotonic() + 60
    while not all((here / f"{other}.signalled").exists() for other in waits_for) and time.monotonic() < deadline:
        time.sleep(0.05)
    (here / f"{name}.stopped").write_text(" ".join(sorted(p.stem for p in here.glob("*.stopped"))))
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
(here / f"{name}.ready").touch()
while True:
    time.sleep(1)
"""


def _service(name: str, folder: Path, waits_for: tuple[str, ...] = (), requires: tuple[str, ...] = ()) -> Service:
    return Service(
        name=name,
        ports=lambda settings: [],
        address=lambda settings: name,
        requires=requires,
        command=lambda settings: [sys.executable, "-c", SERVICE_SCRIPT, str(folder), name, *waits_for],
        healthy=lambda settings: (folder / f"{name}.ready").exists(),
        prepare=lambda settings: (settings.state_dir / name).mkdir(parents=True, exist_ok=True),  # its working folder
    )


def test_peers_stop_together_and_dependants_first(tmp_path):
    settings = dataclasses.replace(settings_from_env(), state_dir=tmp_path / "state")
    notes = tmp_path / "notes"
    notes.mkdir()
    services = (
        _service("node-1", notes, waits_for=("node-2",)),
        _service("node-2", notes, waits_for=("node-1",)),
        _service("client", notes, requires=("node-1", "node-2")),
    )
    supervisor = Supervisor(settings, services)
    supervisor.up()
    # A timeout far below the peers' patience: stopped one after the other, the first would be killed.
    assert sorted(supervisor.down(timeout=10)) == ["client", "node-1", "node-2"]
    assert (notes / "client.stopped").read_text() == ""
    for node in ("node-1", "node-2"):  # each stopped on its own, after the client had
        assert "client" in (notes / f"{node}.stopped").read_text().split()
    assert not any((settings.state_dir / "run").iterdir())
