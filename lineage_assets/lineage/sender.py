"""The OpenLineage sender process: delivers a lineage folder's event log, in order, then leaves.

    python -m lineage_assets.lineage.sender FOLDER    (started by LineageEmitter; the Backend in $LINEAGE_ASSETS_LINEAGE_BACKEND)

It holds the folder's sender lock while it runs (a second sender exits at once), follows the log,
retries an unavailable backend with growing pauses, and leaves once the log has not grown for
``LINGER_S``, delivered or not: what is left waits for the next sender or `lineage-assets lineage
flush`. After letting go of the lock it looks at the log once more, so an event appended while it
was leaving is never stranded (see ``LineageEmitter._ensure_sender``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path

from lineage_assets.lineage.emitter import BACKEND_VARIABLE, STARTUP_S, Backend, LineageEmitter, file_lock

LINGER_S = 30.0
assert LINGER_S > STARTUP_S
POLL_S = 0.1
RETRY_S = (0.5, 30.0)
SENDER_NICENESS = 10

log = logging.getLogger("lineage_assets.lineage.sender")


def _log_size(emitter: LineageEmitter) -> int:
    try:
        return emitter.log_path.stat().st_size
    except FileNotFoundError:
        return 0


def send_while_locked(emitter: LineageEmitter, linger_s: float = LINGER_S) -> int | None:
    """Deliver until the log has been still for ``linger_s``; the log's size as last seen, or None
    when another sender holds the lock."""
    with file_lock(emitter.sender_lock_path, blocking=False) as lock:
        if lock is None:
            return None
        size, still_since, pause = _log_size(emitter), time.monotonic(), RETRY_S[0]
        while time.monotonic() - still_since < linger_s:
            if emitter.deliver_locked() is False:
                time.sleep(pause)
                pause = min(pause * 2, RETRY_S[1])
            else:
                pause = RETRY_S[0]
                time.sleep(POLL_S)
            if _log_size(emitter) != size:
                size, still_since = _log_size(emitter), time.monotonic()
        return size


def main(folder: Path, backend: Backend, linger_s: float = LINGER_S) -> int:
    emitter = LineageEmitter(folder, backend)
    if emitter.transport is None:
        log.error("no lineage backend in %s=%s", BACKEND_VARIABLE, backend.to_json())
        return 2
    while (seen := send_while_locked(emitter, linger_s)) is not None and _log_size(emitter) != seen:
        pass  # appended while this sender was leaving: deliver that too
    return 0


if __name__ == "__main__":
    # Delivery is background work: the job's own threads, which record the events, come first for a core.
    os.nice(SENDER_NICENESS)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds, so the cursor records what went out
    sys.exit(main(Path(sys.argv[1]), Backend.from_json(os.environ[BACKEND_VARIABLE])))
