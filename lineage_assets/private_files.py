"""Files and folders for the owner only: the state folder, and every file that holds a credential."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

OWNER_ONLY = 0o700


def private_folder(path: Path) -> Path:
    """``path`` as a folder only its owner can list or change (made if missing, narrowed if not). Leave to
    pass through stays: a server run as another user (PostgreSQL's, when the stack runs as root) is
    given it to reach its own folder inside, and takes it away from a running server at its peril."""
    path.mkdir(mode=OWNER_ONLY, parents=True, exist_ok=True)
    path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o066)
    return path


def write_private(path: Path, text: str | bytes) -> Path:
    """``text`` into ``path``, readable and writable by its owner only from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # a file that existed would keep its mode
    with os.fdopen(descriptor, "wb" if isinstance(text, bytes) else "w") as out:
        out.write(text)
    return path


def replace_private(path: Path, text: str | bytes) -> Path:
    """``path`` replaced whole by ``text`` (owner-only): a reader sees the old content or the new, never
    a part; writers in several processes each use a temporary file of their own."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    write_private(temporary, text)
    temporary.replace(path)
    return path
