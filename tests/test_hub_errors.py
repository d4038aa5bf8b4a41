"""hub_errors.py: a full disk, a disk quota and a file too large for the file system get their own messages."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from hub_server import (
    HubServer,
    child_env,
    loopback_hub_fixture,  # noqa: F401  (the `loopback_hub` fixture)
    make_gguf_bytes,
    run_python,
)

from localgen.errors import HubError
from localgen.hub_errors import map_hub_error


def _os_error(code: int) -> OSError:
    """An OSError as a failed write raises it."""
    return OSError(code, os.strerror(code))


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT], ids=["ENOSPC", "EDQUOT"])
def test_a_full_disk_or_quota_says_to_free_space(code: int) -> None:
    error = map_hub_error(_os_error(code), repo="org/r", filename="m.gguf")
    assert isinstance(error, HubError)
    assert error.message.startswith("no space left on the disk while downloading org/r/m.gguf")
    assert os.strerror(code) in error.message
    assert "free some space in" in (error.hint or "")


def test_a_full_disk_is_found_behind_the_error_that_wraps_it() -> None:
    try:
        try:
            raise _os_error(errno.EDQUOT)
        except OSError as exc:
            raise RuntimeError("download failed") from exc
    except RuntimeError as exc:
        error = map_hub_error(exc, repo="org/r", filename="m.gguf")
    assert error.message.startswith("no space left on the disk")


def test_other_os_errors_are_not_called_a_full_disk() -> None:
    error = map_hub_error(_os_error(errno.EACCES), repo="org/r", filename="m.gguf")
    assert "no space" not in error.message and "Permission denied" in error.message


EFBIG_CODE = """
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, resource.RLIM_INFINITY))
from localgen import hub
from localgen.errors import LocalgenError
try:
    hub.download_model("org/big-GGUF", quant=None, filename=None, quiet=True)
except LocalgenError as exc:
    print(json.dumps({"error": exc.message, "hint": exc.hint}))
    sys.exit(1)
"""


def test_a_file_too_large_for_the_file_system_names_the_limit(loopback_hub: HubServer, tmp_path: Path) -> None:
    # A file-size limit of 200 kB makes the real download's writes fail with EFBIG, as on a FAT32 disk.
    loopback_hub.add_repo("org/big-GGUF", {"big-Q4_K_M.gguf": make_gguf_bytes("big", 400_000)})
    result = run_python(EFBIG_CODE, child_env(loopback_hub, tmp_path))
    assert result.returncode == 1, result.stderr
    out = json.loads(result.stdout)
    assert out["error"].startswith("org/big-GGUF/big-Q4_K_M.gguf is too large for the file system of ")
    assert "HF_HUB_CACHE" in out["hint"]
    assert not list((tmp_path / "hf").rglob("*.gguf"))
