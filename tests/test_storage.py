"""Files localgen keeps: what stands where a folder should be is named for what it is, and a file system that takes
no writes (read-only, full) for what it is."""

from __future__ import annotations

import errno
import os
import re
import sys
import time
from pathlib import Path
from typing import BinaryIO

import pytest
from hub_server import HubServer, child_env, make_gguf_bytes, run_cli

from localgen.errors import LocalgenError
from localgen.storage import atomic_write_text, make_folder, remove_leftover_temp_files, unwritable_hint
from tests.conftest import REPO_ROOT, run_localgen_process
from tests.mount_namespace import run_mounted as _mounted


def _blocked(tmp_path: Path, by: str) -> Path:
    """A data folder with a file (a pipe), or a link to a folder not there (or into a loop, through a file, to a
    device), in its place."""
    data = tmp_path / "data"
    if by == "file":
        data.write_text("not a folder")
    elif by == "loop":
        data.symlink_to("data")
    elif by == "pipe":
        os.mkfifo(data)
    elif by == "link to a device":
        data.symlink_to("/dev/null")
    elif by == "link through a file":
        (tmp_path / "file").write_text("not a folder")
        data.symlink_to(tmp_path / "file" / "place")
    else:
        data.symlink_to(tmp_path / "unmounted" / "place")
    return data


@pytest.mark.parametrize(("by", "says", "hint"), [
    ("file", "{data} is a file, where a folder should be", "move that file out of the way"),
    ("pipe", "{data} is a pipe, where a folder should be", "move that file out of the way"),
    ("link to a device", "{data} is a link to /dev/null, where a folder should be",
     "point the link at a folder that is there, or remove it"),
    ("link", "{data} is a link to {tmp_path}/unmounted/place, which is not there",
     "point the link at a folder that is there, or remove it"),
    ("loop", "{data} is a link to data, which leads into a loop of links",
     "point the link at a folder that is there, or remove it"),
    ("link through a file", "{data} is a link to {tmp_path}/file/place, which cannot be there: {tmp_path}/file is a "
     "file", "point the link at a folder that is there, or remove it"),
])
def test_what_stands_where_a_folder_should_be_is_named(tmp_path: Path, by: str, says: str, hint: str) -> None:
    data = _blocked(tmp_path, by)
    said = says.format(data=data, tmp_path=tmp_path)
    with pytest.raises(LocalgenError) as written:
        atomic_write_text(data / "last-run.json", "{}")
    assert (written.value.message, written.value.hint) == (f"could not write {data}/last-run.json: {said}", hint)
    with pytest.raises(LocalgenError) as made:
        make_folder(data / "conversations")
    assert (made.value.message, made.value.hint) == (f"could not create {data}/conversations: {said}", hint)
    assert data.is_symlink() == (by not in ("file", "pipe")), "nothing is made at the link's end, nor in its place"
    assert not (tmp_path / "unmounted").exists()


def test_a_write_on_a_read_only_file_system_names_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "models.toml").write_text("# mine\n")
    env = {"LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    result = _mounted(f"mount -o bind,ro {home} {home}", ["models", "default", "smollm2-135m"], env)
    assert result.returncode == 1
    assert result.stderr == (
        f"localgen: error: could not write {home}/config/models.toml: Read-only file system (hint: its file system "
        "is mounted read-only: remount it read-write, or set LOCALGEN_HOME to a folder on a writable one; the "
        "previous file is unchanged)\n"), result.stderr
    assert (home / "config" / "models.toml").read_text() == "# mine\n"


def test_a_write_on_a_full_disk_says_to_free_space(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    fill = f"mount -t tmpfs -o size=64k none {home} && (head -c 1M /dev/zero > {home}/filler || true)"
    result = _mounted(fill, ["models", "default", "smollm2-135m"], env)
    assert result.returncode == 1
    assert result.stderr.endswith("No space left on device (hint: free some disk space)\n"), result.stderr


def test_a_hint_names_the_setting_that_moves_the_folder_only_for_localgen_s_own(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import config

    monkeypatch.setenv("LOCALGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(config, "_settings", None)
    read_only = OSError(errno.EROFS, os.strerror(errno.EROFS))
    assert unwritable_hint(read_only, tmp_path / "home" / "cache" / "hub").endswith(
        ", or set LOCALGEN_HOME to a folder on a writable one")
    assert unwritable_hint(read_only, tmp_path / "elsewhere") == (
        "its file system is mounted read-only: remount it read-write")
    assert unwritable_hint(read_only, tmp_path / "elsewhere", setting="HF_HUB_CACHE").endswith(
        ", or set HF_HUB_CACHE to a folder on a writable one")
    assert unwritable_hint(OSError(errno.EIO, "I/O error"), tmp_path, "run it again") == "run it again"


def test_a_read_only_hugging_face_cache_is_named_by_pull_and_models_rm(loopback_hub: HubServer,
                                                                        tmp_path: Path) -> None:
    loopback_hub.add_repo("org/tiny-GGUF", {"tiny-Q4_K_M.gguf": make_gguf_bytes("q4"),
                                            "tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    env = child_env(loopback_hub, tmp_path)
    assert run_cli(env, "pull", "org/tiny-GGUF:Q4_K_M").returncode == 0
    cache = tmp_path / "hf"
    pulled = _mounted(f"mount -o bind,ro {cache} {cache}", ["pull", "org/tiny-GGUF:Q8_0"], env)
    assert pulled.returncode == 1 and pulled.stderr.endswith(
        "Read-only file system (hint: its file system is mounted read-only: remount it read-write, or set "
        "HF_HUB_CACHE (or HF_HOME) to a folder on a writable one)\n"), pulled.stderr
    removed = _mounted(f"mount -o bind,ro {cache} {cache}", ["models", "rm", "org/tiny-GGUF", "--yes"], env)
    assert removed.returncode == 1 and removed.stderr.endswith(
        "Read-only file system (hint: its file system is mounted read-only: remount it read-write, then run the "
        "command again)\n"), removed.stderr


def test_a_conversation_s_lock_file_on_a_read_only_file_system_names_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    saved = run_localgen_process([sys.executable, "-m", "localgen", "run", "--conversation", "c", "-n", "1", "hi"],
                                 env={**os.environ, **env}, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert saved.returncode == 0, saved.stderr
    locks = next(home.rglob(".locks"))
    (locks / "c.lock").unlink()
    result = _mounted(f"mount -o bind,ro {home} {home}", ["conversations", "rm", "c", "--yes"], env)
    assert result.returncode == 1
    assert result.stderr == (
        f"localgen: error: could not create {locks}/c.lock: Read-only file system (hint: its file system is mounted "
        "read-only: remount it read-write, or set LOCALGEN_HOME to a folder on a writable one)\n"), result.stderr


def test_only_the_temp_files_of_writes_of_the_file_itself_are_taken_for_leftovers(tmp_path: Path) -> None:
    names = [".a.json.0a1b2c3d.tmp", ".a.json.b.json.0a1b2c3d.tmp", ".a.json.0a1b.tmp", ".a.json.0a1b2c3d.tmp.x",
             "a.json", ".b.json.0a1b2c3d.tmp"]  # ("a.json.b" is a conversation of its own)
    for name in names:
        (tmp_path / name).write_text("{")
    (tmp_path / ".a.json.f01de000.tmp").mkdir()
    remove_leftover_temp_files(tmp_path, re.escape("a.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names[1:], ".a.json.f01de000.tmp"])


def test_where_no_lock_can_be_tested_a_temp_file_goes_only_once_it_is_old(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import storage

    monkeypatch.setattr(storage, "try_flock", lambda fd, **_: None)  # a file system without locks
    fresh, old = tmp_path / ".a.json.0123abcd.tmp", tmp_path / ".a.json.4567ef89.tmp"
    for left in (fresh, old):
        left.write_text("{")
    os.utime(old, (time.time() - storage.STALE_TEMP_S - 60,) * 2)
    remove_leftover_temp_files(tmp_path, re.escape("a.json"))
    assert (fresh.exists(), old.exists()) == (True, False), "a save under way may be writing the fresh one"


def test_a_write_s_temp_file_bears_the_name_its_sweep_looks_for(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import storage

    seen: list[str] = []
    synced = storage.fsync_file

    def look(handle: BinaryIO) -> None:
        seen.extend(p.name for p in tmp_path.iterdir() if p.name != "a.json")
        synced(handle)

    monkeypatch.setattr(storage, "fsync_file", look)
    for _ in range(20):
        atomic_write_text(tmp_path / "a.json", "{}")
    assert len(seen) == 20 and all(storage.temp_names(re.escape("a.json")).fullmatch(name) for name in seen), seen
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_an_older_localgen_s_temp_files_go_once_an_hour_old_and_only_by_their_exact_names(tmp_path: Path) -> None:
    """Before the temp names of its own (.NAME.8 hex digits.tmp), localgen's writes took tempfile.mkstemp's: 8 of
    a-z, 0-9 and _. Not every version locked them: their age alone tells whether they are written still."""
    from localgen import storage

    old = time.time() - storage.STALE_TEMP_S - 60
    left = [".a.json.k3_x9zq0.tmp", ".b.json.zzzzzzzz.tmp"]  # an older localgen's, an hour untouched
    fresh = ".a.json.q7_m2zz1.tmp"  # an older localgen may be writing it still, its lock free or not
    unlike = [".a.json.K3_X9ZQ0.tmp", ".a.json.k3_x9zq.tmp", ".a.json.k3-x9zq0.tmp", ".a.json.k3_x9zq00.tmp",
              ".a.json.k3_x9zq0.tmp.x", "a.json.k3_x9zq0.tmp", ".a.json.k3_x9zq0.TMP"]
    for name in [*left, fresh, *unlike]:
        (tmp_path / name).write_text("{")
        os.utime(tmp_path / name, (time.time() if name == fresh else old,) * 2)
    (tmp_path / ".c.json.abc_defg.tmp").mkdir()
    os.utime(tmp_path / ".c.json.abc_defg.tmp", (old, old))
    remove_leftover_temp_files(tmp_path, re.escape("a.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*left[1:], fresh, *unlike, ".c.json.abc_defg.tmp"])
    remove_leftover_temp_files(tmp_path, r"[a-z]\.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([fresh, *unlike, ".c.json.abc_defg.tmp"])
