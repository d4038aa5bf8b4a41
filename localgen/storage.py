"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from localgen.errors import LocalgenError


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write data to path through a temp file, fsync and rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as tmp:
            os.fchmod(tmp.fileno(), mode)
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise LocalgenError(
            f"could not write {path}: {exc.strerror or exc}",
            hint="check free disk space and permissions; the previous file is unchanged",
        ) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise


def atomic_write_text(path: Path, text: str, *, mode: int = 0o644) -> None:
    """Write UTF-8 text to path atomically."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)
