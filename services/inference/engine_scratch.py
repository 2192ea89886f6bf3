"""The llama.cpp engine's own files: a checkpoint's weights converted to GGUF and each full-weight push, kept in one
directory per engine and removed when the engine closes or its process exits.

Why: these files are as large as the model in float (a 1.5B model: ~6 GB) and named per checkpoint, so kept in the
shared model cache they grew by one file per resume, per probe and per push base. A directory whose process died
without removing it (SIGKILL, a crash) is swept by the next engine that starts on the same host. Names hold the host
and the process id (`<host>-<pid>-<random>`): a cache shared by containers or pods on other hosts is never swept
from here, and a process still alive keeps its directory. Files in use stay readable after a sweep (Linux keeps a
memory-mapped file until it is unmapped).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import weakref
from pathlib import Path


def _host() -> str:
    return socket.gethostname().replace("-", "_") or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    return True


def sweep_abandoned(root: Path) -> list[Path]:
    """Remove the directories under ``root`` made on this host by processes no longer running; returns them."""
    if not root.is_dir():
        return []
    swept = []
    for entry in root.iterdir():
        parts = entry.name.rsplit("-", 2)
        if len(parts) != 3 or parts[0] != _host() or not parts[1].isdigit() or not entry.is_dir():
            continue
        pid = int(parts[1])
        if pid != os.getpid() and not _alive(pid):
            shutil.rmtree(entry, ignore_errors=True)
            swept.append(entry)
    return swept


class EngineScratch:
    """A directory under ``root`` for one engine's files (made on first use); `remove` deletes it, and so does the
    interpreter's exit when the engine was never closed."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._path: Path | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            self.root.mkdir(parents=True, exist_ok=True)
            sweep_abandoned(self.root)
            self._path = Path(tempfile.mkdtemp(prefix=f"{_host()}-{os.getpid()}-", dir=self.root))
            self._finalizer = weakref.finalize(self, shutil.rmtree, self._path, True)
        return self._path

    def holds(self, path: Path) -> bool:
        """Whether ``path`` is one of this engine's files (and so removable once the engine no longer serves it)."""
        return self._path is not None and Path(path).parent == self._path

    def remove(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._path, self._finalizer = None, None
