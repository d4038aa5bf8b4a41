"""verify.py: one notion of "this version of a file", for verification markers and for cache keys alike."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from localgen.verify import file_identity_key, is_verified, record_verified, verify_file

CONTENT = b"GGUF" + bytes(range(256)) * 64


def _replace_keeping_size_and_mtime(path: Path) -> None:
    """Put a different file of the same size in place by rename, with the old mtime (as rsync -a or cp -p do)."""
    st = path.stat()
    new = path.with_name(path.name + ".new")
    new.write_bytes(bytes(b ^ 0xFF for b in path.read_bytes()))
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, path)


def _rewrite_in_place(path: Path) -> None:
    """Overwrite the file's bytes in place (same inode, same size, a new mtime)."""
    st = path.stat()
    with path.open("r+b") as handle:
        handle.write(b"XXXX")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def _append(path: Path) -> None:
    """Grow the file in place."""
    with path.open("ab") as handle:
        handle.write(b"more")


def _chmod(path: Path) -> None:
    """Change only the permissions: the contents are the same file version."""
    path.chmod(0o400)


MUTATIONS: dict[str, tuple[Callable[[Path], None], bool]] = {
    "replaced, same size and mtime": (_replace_keeping_size_and_mtime, True),
    "rewritten in place": (_rewrite_in_place, True),
    "appended to": (_append, True),
    "permissions changed": (_chmod, False),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_the_cache_key_and_the_verification_marker_change_together(tmp_path: Path, name: str) -> None:
    mutate, changes = MUTATIONS[name]
    path = tmp_path / "model.gguf"
    path.write_bytes(CONTENT)
    sha = hashlib.sha256(CONTENT).hexdigest()
    record_verified(path, sha)
    key = file_identity_key(path)
    assert is_verified(path, sha) and file_identity_key(path) == key  # stable while nothing happens
    mutate(path)
    assert (file_identity_key(path) != key) is changes
    assert is_verified(path, sha) is not changes


def test_a_replaced_file_is_hashed_again(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(CONTENT)
    verify_file(path, sha256=hashlib.sha256(CONTENT).hexdigest())
    _replace_keeping_size_and_mtime(path)
    with pytest.raises(Exception, match="sha256 mismatch"):
        verify_file(path, sha256=hashlib.sha256(CONTENT).hexdigest())


def test_the_same_file_at_another_path_has_another_key(tmp_path: Path) -> None:
    first = tmp_path / "a.gguf"
    first.write_bytes(CONTENT)
    second = tmp_path / "b.gguf"
    os.link(first, second)
    assert file_identity_key(first) != file_identity_key(second)
    link = tmp_path / "c.gguf"
    link.symlink_to(first)
    assert file_identity_key(link) == file_identity_key(first)  # a link names the file it points to



def test_git_blob_id_and_sha256_in_one_read(tmp_path: Path) -> None:
    from localgen.verify import git_blob_id_and_sha256

    path = tmp_path / "README.md"
    path.write_bytes(b"hello\n")
    assert git_blob_id_and_sha256(path) == ("ce013625030ba8dba906f756967f9e9ca394464a",  # git hash-object
                                            hashlib.sha256(b"hello\n").hexdigest())


def test_a_bad_download_that_cannot_be_deleted_is_a_clear_error(tmp_path: Path) -> None:
    from localgen.errors import LocalgenError
    from localgen.hub_entry_data import discard_cached_file

    blob = tmp_path / "blob"
    blob.mkdir()  # unlink fails on it (as on a read-only cache, which does not stop root)
    with pytest.raises(LocalgenError, match=f"cannot delete the bad download {blob}"):
        discard_cached_file(blob)
    gone = tmp_path / "gone"
    discard_cached_file(gone)  # already gone: nothing to do
