"""What every process on the machine shows in its arguments, which any user of the machine can read."""

from __future__ import annotations

import threading
from pathlib import Path


class ArgumentSampler:
    """Reads every process's command line from ``/proc`` every ``interval`` seconds, on a thread of its
    own, while the ``with`` block runs: the distinct command lines seen, and those that held one of
    ``secrets`` (a few bytes of it, so a failure does not print it whole)."""

    def __init__(self, *secrets: bytes, interval: float = 0.05):
        self.secrets = secrets
        self.interval = interval
        self.commands: set[bytes] = set()
        self.holding: dict[int, str] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="argument-sampler", daemon=True)

    def __enter__(self) -> ArgumentSampler:
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._done.set()
        self._thread.join()

    def saw(self, *parts: bytes) -> bool:
        """Whether a process whose arguments held every one of ``parts`` ran while sampled."""
        return any(all(part in command for part in parts) for command in self.commands)

    def _sample(self) -> None:
        while True:
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    command = (proc / "cmdline").read_bytes()
                except OSError:  # gone since the folder was listed
                    continue
                self.commands.add(command)
                for secret in self.secrets:
                    if secret in command:
                        shown = command.replace(b"\0", b" ").replace(secret, secret[:4] + b"...")
                        self.holding[int(proc.name)] = shown.decode(errors="replace")[:300]
            if self._done.wait(self.interval):
                return
