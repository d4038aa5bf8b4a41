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


def test_a_link_whose_target_may_not_be_reached_keeps_the_permissions_hint(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A link into a folder that may not be entered is refused for its permissions, not said to lead to nothing."""
    link = tmp_path / "last-run.json"
    link.symlink_to(tmp_path / "locked" / "last-run.json")
    refused = PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    real_stat = os.stat

    def refusing_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if Path(str(path)) == link:  # as for a user other than root, the target's folder mode 000
            raise refused
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", refusing_stat)
    error = read_failure(link, refused, hint="check the permissions of its folder")
    assert (error.message, error.hint) == (f"cannot read {link}: Permission denied",
                                           "check the permissions of its folder")


def test_a_model_file_that_cannot_be_read_is_said_so_in_one_line(tmp_path: Path) -> None:
    """verify.reading, as a real read of a folder given for a file fails."""
    with pytest.raises(LocalgenError) as info, reading(tmp_path):
        tmp_path.read_bytes()
    assert info.value.message == f"cannot read {tmp_path}: Is a directory"
    assert info.value.hint == "check that the file exists and is readable (permissions, disk)"
