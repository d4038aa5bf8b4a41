"""errors.os_reason and read_failure: the one way a message says why a file could not be read or written."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from localgen.errors import LocalgenError, os_reason, read_failure
from localgen.verify import reading


def test_an_os_error_s_reason_is_the_os_s_words_else_its_text() -> None:
    assert os_reason(OSError(errno.EISDIR, os.strerror(errno.EISDIR), "/x")) == "Is a directory"
    assert os_reason(OSError("the pipe closed")) == "the pipe closed"  # no errno, no strerror


def test_a_read_failure_names_the_file_and_why() -> None:
    error = read_failure(Path("/data/notes.json"), OSError(errno.EIO, os.strerror(errno.EIO)), hint="check the disk")
    assert (error.message, error.hint) == ("cannot read /data/notes.json: Input/output error", "check the disk")


def test_a_model_file_that_cannot_be_read_is_said_so_in_one_line(tmp_path: Path) -> None:
    """verify.reading, as a real read of a folder given for a file fails."""
    with pytest.raises(LocalgenError) as info, reading(tmp_path):
        tmp_path.read_bytes()
    assert info.value.message == f"cannot read {tmp_path}: Is a directory"
    assert info.value.hint == "check that the file exists and is readable (permissions, disk)"
