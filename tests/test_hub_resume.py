"""A pull that stopped part way keeps what it received in blobs/ETAG.incomplete, and the next one asks the loopback
Hub for the rest only (a Range request); a stale partial file is discarded, a server ignoring Range starts over."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hub_server import HubEnv, file_sha256, make_gguf_bytes

from localgen import hub, hub_cache
from localgen.cli_manage import models_list
from localgen.errors import HubError

REPO = "org/tiny-GGUF"
NAME = "big-Q4_K_M.gguf"
SIZE = 1_000_000


@pytest.fixture(name="small_pieces", autouse=True)
def small_pieces_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    """A download writes what it receives in 1 MiB pieces: 64 KiB ones here keep the files small."""
    from localgen import hub_resume

    monkeypatch.setattr(hub_resume, "DOWNLOAD_PIECE", 64 * 1024)


def _serve(hubenv: HubEnv) -> str:
    """Serve the repo with one file of SIZE bytes and a smaller one; the big file's sha256 (its blob's name)."""
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("big", SIZE), "small-Q8_0.gguf": make_gguf_bytes("s")})
    return repo.sha256(NAME)


def _gets(hubenv: HubEnv) -> list:
    """The GETs of the big file's bytes."""
    return [r for r in hubenv.server.answered() if r.method == "GET" and r.path.endswith(NAME)]


def test_a_pull_cut_part_way_resumes_with_a_range_request_for_the_rest(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from localgen.units import binary_size

    sha = _serve(hubenv)
    hubenv.server.abort_after[(REPO, NAME)] = 400_000
    hubenv.server.down_after_abort = True  # huggingface_hub's own retry of the dropped connection fails too
    with pytest.raises(HubError, match="server error") as info:
        hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    partial = hubenv.hf_cache / "models--org--tiny-GGUF" / "blobs" / f"{sha}.incomplete"
    kept = partial.stat().st_size
    assert 0 < kept <= 400_000 and kept % (64 * 1024) == 0
    assert f"of 976.6 KiB are on disk, which `localgen pull {REPO}:Q4_K_M` resumes" in (info.value.hint or "")
    assert hub_cache.cached_model(REPO, quant="Q4_K_M", filename=None) is None, "a partial file is no model"
    assert hub_cache.cached_gguf_files() == []
    _check_listed_as_partly_downloaded(partial, kept, capsys)
    hubenv.server.down, hubenv.server.bytes_sent = False, {}
    real = shutil.disk_usage
    monkeypatch.setattr(hub.shutil, "disk_usage", lambda path: real(path)._replace(free=SIZE - kept - 1))
    with pytest.raises(HubError, match=rf"the download needs {binary_size(SIZE - kept)}, and "):  # the rest only
        hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    monkeypatch.setattr(hub.shutil, "disk_usage", lambda path: real(path)._replace(free=SIZE - kept))
    capsys.readouterr()
    path = hub.download_model(REPO, quant="Q4_K_M", filename=None)[0]
    assert file_sha256(path) == sha and not partial.exists()
    assert hub_cache.cached_model(REPO, quant="Q4_K_M", filename=None) == [path]
    resumed = _gets(hubenv)[-1]
    assert resumed.range == f"bytes={kept}-" and resumed.status == 206
    assert hubenv.server.bytes_sent[(REPO, NAME)] == SIZE - kept
    err = capsys.readouterr().err
    assert f"localgen: resuming {REPO}/{NAME} at {kept / 1024:.1f} KiB of 976.6 KiB" in err, err
    assert f"localgen: downloaded {REPO}/{NAME}: {binary_size(SIZE - kept)} of 976.6 KiB in " in err, err
    assert "s, the rest already in the cache, sha256 verified" in err
    models_list(json_output=True)
    assert [m["partial"] for m in json.loads(capsys.readouterr().out)] == [None, None], "downloaded whole"
    partial.write_bytes(b"\0" * 1000)  # as a pull --force stopped part way leaves it: the file is complete
    assert hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True) == [path]
    assert not partial.exists()


def _check_listed_as_partly_downloaded(partial: Path, kept: int, capsys: pytest.CaptureFixture[str]) -> None:
    """`models list` shows the model a pull kept a part of, how much, and the pull that resumes it, as no download."""
    from localgen.units import binary_size

    capsys.readouterr()
    models_list(json_output=True)
    listed = json.loads(capsys.readouterr().out)
    assert [m["source"] for m in listed] == ["bundled", "hub"] and listed[0]["default"], listed
    assert listed[1] == {"name": f"{REPO}:Q4_K_M", "repo": REPO, "quant": "Q4_K_M", "size": kept, "last_used": None,
                         "path": str(partial), "source": "hub", "verified": False, "missing_shards": 0, "problem": None,
                         "problem_detail": None, "default": False,
                         "partial": {"kept_bytes": kept, "size": SIZE, "running": False,
                                     "resume": f"localgen pull {REPO}:Q4_K_M", "paths": [str(partial)]}}, listed
    models_list()
    table, notes = capsys.readouterr()
    shown = f"{binary_size(kept)} of 976.6 KiB"
    assert f"{REPO}:Q4_K_M\tQ4_K_M\t{shown}\t-\thub (partly downloaded)\t{partial}\tno\n" in table, table
    assert notes == f"localgen: {REPO}:Q4_K_M is partly downloaded ({shown}); `localgen pull {REPO}:Q4_K_M` " \
                    "resumes it\n"
    models_list(all_models=True)
    assert f"{REPO}:Q4_K_M\t{REPO}\tQ4_K_M\t-\tno (partly downloaded: {shown})\t\tno\n" in capsys.readouterr().out
    models_list(all_models=True, json_output=True)  # what is known of it, as models list --json gives it
    (part,) = [m for m in json.loads(capsys.readouterr().out) if m["name"] == f"{REPO}:Q4_K_M"]
    assert part == listed[1] | {"context": None, "description": "", "downloaded": False}, part
    with pytest.MonkeyPatch.context() as patch:  # on a terminal, the default is starred
        patch.setattr(sys.stdout, "isatty", lambda: True)
        models_list()
    screen = capsys.readouterr().out
    assert screen.count("*") == 1 and "*smollm2-135m" in screen and f" {REPO}:Q4_K_M" in screen, screen


def test_a_split_model_cut_in_its_second_shard_is_listed_once_with_what_is_kept(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    import fcntl

    from localgen.units import binary_size

    shards = [f"split-Q4_0-0000{n}-of-00002.gguf" for n in (1, 2)]
    repo = hubenv.server.add_repo("org/split-GGUF", {name: make_gguf_bytes(name, SIZE, shard=(n, 2))
                                                     for n, name in enumerate(shards, start=1)})
    hubenv.server.abort_after[("org/split-GGUF", shards[1])] = 400_000
    hubenv.server.down_after_abort = True
    with pytest.raises(HubError):
        hub.download_model("org/split-GGUF", quant="Q4_0", filename=None, quiet=True)
    part = hubenv.hf_cache / "models--org--split-GGUF" / "blobs" / f"{repo.sha256(shards[1])}.incomplete"
    kept = SIZE + part.stat().st_size
    capsys.readouterr()
    models_list(json_output=True)
    listed = [m for m in json.loads(capsys.readouterr().out) if m["source"] == "hub"]
    assert [(m["name"], m["size"], m["missing_shards"], m["partial"]["kept_bytes"]) for m in listed] == [
        ("org/split-GGUF:Q4_0", SIZE, 1, kept)], listed
    models_list()  # its row, as a part alone's, says what is kept of the whole
    table = capsys.readouterr().out
    assert f"org/split-GGUF:Q4_0\tQ4_0\t{binary_size(kept)} of {binary_size(2 * SIZE)}\tnever\t" \
           f"hub (partly downloaded)\t{listed[0]['path']}\tno\n" in table, table
    models_list(all_models=True)
    assert "org/split-GGUF:Q4_0\torg/split-GGUF\tQ4_0\t-\tno (partly downloaded: " in capsys.readouterr().out
    with open(hub_cache.blob_lock_path("org/split-GGUF", repo.sha256(shards[1])), "wb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # a pull is writing the part now
        models_list()
    assert capsys.readouterr().err == f"localgen: org/split-GGUF:Q4_0 is being downloaded: {binary_size(kept)} of " \
                                      f"{binary_size(2 * SIZE)} so far\n"


@pytest.mark.parametrize("case", ["stale etag", "longer than the file", "--force"])
def test_a_partial_file_that_cannot_be_resumed_is_started_over(hubenv: HubEnv, case: str) -> None:
    sha = _serve(hubenv)
    blobs = hubenv.hf_cache / "models--org--tiny-GGUF" / "blobs"
    blobs.mkdir(parents=True)
    other = blobs / f"{hubenv.server.repos[REPO].sha256('small-Q8_0.gguf')}.incomplete"
    other.write_bytes(b"\0" * 1000)  # another file's, which the repo still has: a later pull of it resumes
    stale = blobs / f"{'ab' * 32}.incomplete"  # a file the repo no longer has (or a version of it that changed)
    mine = blobs / f"{sha}.incomplete"
    if case == "stale etag":
        stale.write_bytes(make_gguf_bytes("big", SIZE)[:300_000])
    else:
        mine.write_bytes(b"\xaa" * (SIZE + 1 if case == "longer than the file" else 300_000))
    path = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True, force=case == "--force")[0]
    assert file_sha256(path) == sha
    assert [r.range for r in _gets(hubenv)] == [None], "the whole file, in one request"
    assert not stale.exists() and not mine.exists() and other.exists()


@pytest.mark.parametrize("when", ["at once", "after a drop"])
def test_a_server_that_ignores_range_sends_the_whole_file_which_replaces_the_partial_one(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], when: str) -> None:
    from huggingface_hub import file_download

    sha = _serve(hubenv)
    blobs = hubenv.hf_cache / "models--org--tiny-GGUF" / "blobs"
    blobs.mkdir(parents=True)
    if when == "at once":
        hubenv.server.ignore_range = True
        (blobs / f"{sha}.incomplete").write_bytes(b"\xaa" * 300_000)  # bytes that are no part of the file: replaced
    else:  # the rest is asked for and comes (206) until the connection drops; the retry gets the whole file
        (blobs / f"{sha}.incomplete").write_bytes(hubenv.server.repos[REPO].files[NAME][:300_000])
        hubenv.server.abort_after[(REPO, NAME)] = 600_000
        monkeypatch.setattr(file_download.time, "sleep",  # its pause before a retry, once a GET was answered
                            lambda _: _gets(hubenv) and setattr(hubenv.server, "ignore_range", True))
    path = hub.download_model(REPO, quant="Q4_K_M", filename=None)[0]
    assert file_sha256(path) == sha
    statuses = [(r.range, r.status) for r in _gets(hubenv)]
    assert statuses == [("bytes=300000-", 200)] if when == "at once" else statuses[0] == ("bytes=300000-", 206)
    assert statuses[-1][1] == 200 and statuses[-1][0] is not None
    err = capsys.readouterr().err
    assert f"sent the whole of {REPO}/{NAME} rather than the rest; downloading it from the start" in err, err
    assert f"localgen: downloaded {REPO}/{NAME} (976.6 KiB) in " in err, "all of it received now"


def test_the_bar_of_a_resumed_download_starts_at_the_part_kept_without_counting_it_as_speed() -> None:
    import io
    import time

    from rich.console import Console

    from localgen import download_progress
    from localgen.hub_types import HubFile, HubModel

    f = HubFile(repo=REPO, filename=NAME, size=SIZE, sha256="0" * 64, quant="Q4_K_M", shard_index=None,
                shard_count=None)
    display = download_progress.RichDisplay(HubModel(repo=REPO, quant="Q4_K_M", files=(f,), revision="main"),
                                            console=Console(file=io.StringIO()))
    with display:
        display.begin_file(f, cached=False)
        display.follow(400_000)  # the partial file's size, as poll_incomplete sees it before the transfer starts
        bar = download_progress.tqdm_adapter(display)(total=SIZE, initial=400_000)
        bar.update(1000)
        time.sleep(0.05)
        bar.update(1000)
        task = display.progress.tasks[0]
        assert task.completed == 402_000 and task.total == SIZE
        assert task.speed is not None and task.speed < 1_000_000, "only the 1000 bytes received count"


def test_models_rm_of_a_model_a_pull_downloaded_in_part_deletes_the_part(hubenv: HubEnv) -> None:
    from localgen.config import settings
    from localgen.errors import ModelNotFoundError
    from localgen.model_removal import remove_model
    from localgen.registry import load_registry

    sha = _serve(hubenv)
    hub.find_model(REPO, quant="Q4_K_M", filename=None)  # the listing a pull saves before it downloads
    part = hubenv.hf_cache / "models--org--tiny-GGUF" / "blobs" / f"{sha}.incomplete"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"\0" * 300_000)
    registry = load_registry(settings().user_registry)
    with pytest.raises(ModelNotFoundError, match="is not in the cache"):
        remove_model(registry, f"{REPO}:Q8_0")  # another quant: its part is not this one
    planned = remove_model(registry, f"{REPO}:q4_k_m", dry_run=True)
    assert planned.paths == (part,) and planned.bytes_freed == 300_000 and part.exists()
    removed = remove_model(registry, f"{REPO}:Q4_K_M")
    assert removed.described == f"{REPO}:Q4_K_M" and removed.in_part and not part.exists()
    with pytest.raises(ModelNotFoundError, match="is not in the cache"):
        remove_model(registry, f"{REPO}:Q4_K_M")


def test_where_the_cache_cannot_hold_symlinks_a_download_is_one_copy_and_force_replaces_it(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_SYMLINKS", True)  # as on Windows without developer mode
    sha = _serve(hubenv)
    path = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)[0]
    assert not path.is_symlink() and file_sha256(path) == sha
    assert hubenv.blobs(REPO) == [], "the file is in the snapshot only, as huggingface_hub moves a new blob there"
    path.write_bytes(b"\0" * SIZE)  # a damaged copy, which pull --force replaces
    assert hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True, force=True) == [path]
    assert file_sha256(path) == sha and hubenv.blobs(REPO) == []


def test_a_file_over_the_hub_s_plain_http_limit_is_left_to_huggingface_hub_s_own_download(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hub serves files over 50 GB through Xet alone: hf_hub_download fetches those (not resumably)."""
    from huggingface_hub import constants

    from localgen.hub_resume import resumable
    from localgen.hub_types import HubFile

    assert resumable(HubFile(REPO, NAME, 49 * 10**9, None, "Q4_K_M", None, None))
    assert not resumable(HubFile(REPO, NAME, 51 * 10**9, None, "Q4_K_M", None, None))
    sha = _serve(hubenv)
    monkeypatch.setattr(constants, "MAX_HTTP_DOWNLOAD_SIZE", SIZE - 1)  # as a 50 GB file is to the real Hub
    fetched: list[str] = []
    monkeypatch.setattr(hub, "fetch_blob", lambda repo, *args, **kwargs: fetched.append(repo))
    with pytest.raises(HubError, match="too large to be downloaded using the regular download method"):
        hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)  # the loopback Hub serves no Xet
    assert not (hubenv.hf_cache / "models--org--tiny-GGUF" / "blobs" / f"{sha}.incomplete").exists()
    assert fetched == [] and all(request.range is None for request in _gets(hubenv))


@pytest.mark.parametrize("stop", [KeyboardInterrupt, OSError])
def test_a_pull_stopped_while_another_writes_the_part_does_not_call_it_its_own(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        stop: type[BaseException]) -> None:
    """Ctrl-C (or an error) while waiting on the lock of a pull that writes the part: that part is the other's."""
    import huggingface_hub.utils

    sha = _serve(hubenv)
    partial = hubenv.hf_cache / "models--org--tiny-GGUF" / "blobs" / f"{sha}.incomplete"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"\0" * 65536)  # what the other pull has received so far
    real = huggingface_hub.utils.WeakFileLock

    def waited(path: object, *args: object, **kwargs: object) -> object:
        if str(path).endswith(f"{sha}.lock"):
            raise stop("stopped while another pull holds the lock")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(huggingface_hub.utils, "WeakFileLock", waited)
    with pytest.raises((KeyboardInterrupt, HubError)) as info:
        hub.download_model(REPO, quant="Q4_K_M", filename=None)
    said = capsys.readouterr().err + str(getattr(info.value, "hint", ""))
    assert "are on disk" not in said, said
    assert partial.stat().st_size == 65536


def test_a_downloaded_file_is_on_disk_before_it_is_renamed_into_place(hubenv: HubEnv,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """blobs/ETAG.incomplete is synced before its rename to blobs/ETAG, and the folder after it, before the verification
    marker is written: after a power cut no marker vouches for a file whose bytes did not reach the disk."""
    import os

    sha = _serve(hubenv)
    blobs = hubenv.hf_cache / "models--org--tiny-GGUF" / "blobs"
    done: list[tuple[str, int, Path | None]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        done.append(("fsync", os.fstat(fd).st_ino, None))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path, **options: object) -> None:
        done.append(("replace", os.stat(src).st_ino, Path(dst)))
        real_replace(src, dst, **options)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    blob = blobs / sha
    renamed = done.index(("replace", blob.stat().st_ino, blob))
    assert ("fsync", blob.stat().st_ino, None) in done[:renamed], "its bytes are synced before the rename"
    marker = next(i for i, (call, _, _) in enumerate(done) if i > renamed and call == "replace")
    assert ("fsync", blobs.stat().st_ino, None) in done[renamed:marker], "the rename is synced before the marker is"


def test_a_download_whose_blobs_folder_goes_as_it_opens_its_part_makes_it_again(hubenv: HubEnv,
                                                                                   monkeypatch: pytest.MonkeyPatch
                                                                                   ) -> None:
    """A models rm that found no lock held just before this download took its own removes the emptied blobs/ and repo
    folder between their making and the part's opening (the real race: test_models_manage's pull held at its lock)."""
    from localgen import hub_resume

    sha = _serve(hubenv)
    made_and_opened = hub_resume._made_and_opened
    tries: list[Path] = []

    def raced(partial: Path) -> object:
        tries.append(partial)
        if len(tries) == 1:
            partial.parent.mkdir(parents=True, exist_ok=True)
            partial.parent.rmdir()  # as that models rm does, once blobs/ is made
            partial.touch()  # FileNotFoundError
        return made_and_opened(partial)

    monkeypatch.setattr(hub_resume, "_made_and_opened", raced)
    (path,) = hub.download_model(REPO, quant="Q4_K_M", filename=None)
    assert file_sha256(path) == sha and [p.name for p in tries] == [f"{sha}.incomplete"] * 2
