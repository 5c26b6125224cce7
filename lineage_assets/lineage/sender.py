"""The OpenLineage sender process: delivers a lineage folder's event log, in order, then leaves.

    python -m lineage_assets.lineage.sender FOLDER    (started by the durable transport)

It holds the folder's delivery lock while it runs (a second sender exits at once), follows the log
and the backend recorded in the folder, and retries an unavailable backend with growing pauses for as
long as events wait. It leaves once everything is delivered and the log has not grown for
``LINGER_S``, or when its folder is gone (a wiped state folder). After letting go of the lock it
looks at the log once more, so an event appended while it was leaving is never stranded (see
``DurableTransport._ensure_sender``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path

from lineage_assets.lineage.delivery import Delivery
from lineage_assets.lineage.event_log import file_lock

LINGER_S = 30.0
STARTUP_S = 10.0  # a sender takes well under this to start
assert LINGER_S > STARTUP_S
POLL_S = 0.1
RETRY_S = (0.5, 30.0)
SENDER_NICENESS = 10

log = logging.getLogger("lineage_assets.lineage.sender")


def _log_size(delivery: Delivery) -> int:
    return delivery.log.end()


def send_while_locked(delivery: Delivery, linger_s: float = LINGER_S, give_up_s: float | None = None) -> int | None:
    """Deliver until all is delivered and the log has been still for ``linger_s`` (or, with events
    waiting, for ``give_up_s``); the log's size as last seen, or None when another sender holds the
    lock or the folder is gone."""
    with file_lock(delivery.lock_path, blocking=False) as lock:
        if lock is None:
            return None
        size, still_since, pause = _log_size(delivery), time.monotonic(), RETRY_S[0]
        while True:
            delivered = delivery.deliver_locked()
            if delivered is False:
                time.sleep(pause)
                pause = min(pause * 2, RETRY_S[1])
            else:
                pause = RETRY_S[0]
                time.sleep(POLL_S)
            if not delivery.log.folder.is_dir():
                return None
            if _log_size(delivery) != size:
                size, still_since = _log_size(delivery), time.monotonic()
            still = time.monotonic() - still_since
            if still >= linger_s and (delivered is True or (give_up_s is not None and still >= give_up_s)):
                return size


def main(folder: Path, linger_s: float = LINGER_S, give_up_s: float | None = None) -> int:
    delivery = Delivery(folder)
    if delivery.transport() is None:
        log.error("no lineage backend recorded in %s", delivery.backend_path)
        return 2
    while (seen := send_while_locked(delivery, linger_s, give_up_s)) is not None and _log_size(delivery) != seen:
        pass  # appended while this sender was leaving: deliver that too
    return 0


if __name__ == "__main__":
    # Delivery is background work: the job's own threads, which record the events, come first for a core.
    os.nice(SENDER_NICENESS)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds, so the cursor records what went out
    sys.exit(main(Path(sys.argv[1])))
