"""What the Hugging Face cache keeps, against the loopback Hub: a file of the user's that a snapshot entry links to
outside the cache is never deleted (models rm and a pull remove the link alone), a verified copy stays until the
download that replaces it is verified (pull --force), and a download is linked into its snapshot with no further
request, which could fail and leave it unseen."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from hub_server import HubEnv, file_sha256, make_gguf_bytes

from localgen import hub, hub_cache
from localgen.errors import HubError
from tests.conftest import run_localgen

REPO = "org/m-GGUF"
NAME = "m-Q8_0.gguf"


def _linked_to_a_file_of_one_s_own(hubenv: HubEnv, content: bytes | None = None, *, blob_too: bool = False) -> Path:
    """Pull REPO, then link its snapshot entry to a file of the user's outside the cache (a copy of the download, or
    content), as a user puts a file of their own in its place (blob_too: deleting the blob as well); that file."""
    entry = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)[0]
    mine = hubenv.tmp_path / "mydocs" / "my-finetune.gguf"
    mine.parent.mkdir()
    if content is None:
        shutil.copyfile(entry, mine)
    else:
        mine.write_bytes(content)
    blob = entry.resolve()
    entry.unlink()
    entry.symlink_to(mine)
    if blob_too:
        blob.unlink()
    return mine


def test_models_rm_of_a_model_linked_to_a_file_outside_the_cache_removes_the_link_alone(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8"), "m-Q4_K_M.gguf": make_gguf_bytes("q4")})
    mine = _linked_to_a_file_of_one_s_own(hubenv, blob_too=True)
    kept = mine.read_bytes()
    asked = run_localgen("models", "rm", f"{REPO}:Q8_0", env=hubenv.env)  # no terminal, no --yes: says what it would
    assert asked.returncode == 2 and f"{REPO}:Q8_0 (0 B)" in asked.err, asked.err
    removed = run_localgen("models", "rm", "-y", f"{REPO}:Q8_0", env=hubenv.env)
    assert removed.returncode == 0, removed.err
    assert removed.err == (f"localgen: removed {REPO}:Q8_0: freed 0 B, kept {mine} (outside the Hugging Face cache: "
                           "only the link to it was removed)\n")
    assert mine.read_bytes() == kept
    assert hubenv.snapshot_files(REPO) == [] and not (hubenv.hf_cache / "models--org--m-GGUF").exists()



def test_models_rm_of_a_model_linked_to_a_file_outside_the_cache_frees_the_blob_of_it_that_the_cache_kept(
        hubenv: HubEnv) -> None:
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    mine = _linked_to_a_file_of_one_s_own(hubenv, make_gguf_bytes("finetune"))  # the Hub's blob stays, unlinked
    blob = hubenv.hf_cache / "models--org--m-GGUF" / "blobs" / repo.sha256(NAME)
    assert blob.is_file()
    asked = run_localgen("models", "rm", f"{REPO}:Q8_0", env=hubenv.env)  # no terminal, no --yes: says what it would
    assert asked.returncode == 2 and f"{REPO}:Q8_0 (64.0 KiB)" in asked.err, asked.err
    removed = run_localgen("models", "rm", "-y", f"{REPO}:Q8_0", env=hubenv.env)
    assert removed.returncode == 0, removed.err
    assert removed.err == (f"localgen: removed {REPO}:Q8_0: freed 64.0 KiB, kept {mine} (outside the Hugging Face "
                           "cache: only the link to it was removed)\n"), removed.err
    assert mine.read_bytes() == make_gguf_bytes("finetune")
    assert not os.path.lexists(hubenv.hf_cache / "models--org--m-GGUF"), "nothing of the model is left"


def test_models_rm_of_a_model_linked_to_a_file_outside_the_cache_keeps_the_blob_of_it_another_model_uses(
        hubenv: HubEnv) -> None:
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8"), "m-Q4_K_M.gguf": make_gguf_bytes("q8")})
    (twin,) = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)  # the same bytes: the same blob
    mine = _linked_to_a_file_of_one_s_own(hubenv, make_gguf_bytes("finetune"))
    removed = run_localgen("models", "rm", "-y", f"{REPO}:Q8_0", env=hubenv.env)
    assert removed.returncode == 0, removed.err
    assert removed.err.startswith(f"localgen: removed {REPO}:Q8_0: freed 0 B, kept {mine} "), removed.err
    assert file_sha256(twin) == repo.sha256(NAME), "the blob the Q4_K_M model links to stays"


def _pulled_through_a_link_of_yours(hubenv: HubEnv) -> tuple[Path, Path]:
    """Pull REPO:Q8_0, then lead its snapshot entry through a link of the user's to the model's blob: the blob and
    the user's link."""
    (entry,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    blob = entry.resolve()
    mine = hubenv.tmp_path / "mydocs" / "m.gguf"
    mine.parent.mkdir()
    mine.symlink_to(blob)  # a link of the user's to the model's file, which the snapshot entry now leads through
    entry.unlink()
    entry.symlink_to(mine)
    return blob, mine


@pytest.mark.parametrize("shared", [False, True], ids=["its own", "another model's too"])
def test_models_rm_of_a_model_linked_through_a_link_of_one_s_own_to_its_blob_frees_the_blob_and_keeps_the_link(
        hubenv: HubEnv, shared: bool) -> None:
    files = {NAME: make_gguf_bytes("q8")} | ({"m-Q4_K_M.gguf": make_gguf_bytes("q8")} if shared else {})
    hubenv.server.add_repo(REPO, files)
    if shared:  # the same bytes: the same blob
        hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    blob, mine = _pulled_through_a_link_of_yours(hubenv)
    asked = run_localgen("models", "rm", f"{REPO}:Q8_0", env=hubenv.env)  # no terminal, no --yes: says what it would
    said = f"0 B; its 64.0 KiB are shared with {REPO}:Q4_K_M and stay" if shared else "64.0 KiB"
    assert asked.returncode == 2 and f"{REPO}:Q8_0 ({said})" in asked.err, asked.err
    removed = run_localgen("models", "rm", "-y", f"{REPO}:Q8_0", env=hubenv.env)
    assert removed.returncode == 0, removed.err
    if shared:
        assert removed.err == f"localgen: removed {REPO}:Q8_0: freed 0 B, kept 1 file {REPO}:Q4_K_M uses\n"
        assert mine.read_bytes() == make_gguf_bytes("q8"), "the blob the Q4_K_M model links to stays"
    else:
        assert removed.err == (f"localgen: removed {REPO}:Q8_0: freed 64.0 KiB, kept {mine} (a link of yours to the "
                               "model's file, which is deleted: it leads nowhere now)\n"), removed.err
        assert not os.path.lexists(blob) and not os.path.lexists(hubenv.hf_cache / "models--org--m-GGUF")
    assert os.readlink(mine) == str(blob), "the user's link is theirs: never removed"


def _linked_to_another_model_s_file(hubenv: HubEnv, *, blob_too: bool = False, moved: bool = False) -> Path:
    """Pull REPO and org/other-GGUF, then link REPO's snapshot entry to the other's blob, as a user links one model's
    file to another's in the cache by hand (blob_too: deleting REPO's blob as well; moved: the other's repo folder
    moved to another disk and linked back first); the other's snapshot entry."""
    hubenv.server.add_repo("org/other-GGUF", {"other-Q8_0.gguf": make_gguf_bytes("other")})
    (entry,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    (other,) = hub.download_model("org/other-GGUF", quant="Q8_0", filename=None, quiet=True)
    if moved:
        folder = hubenv.hf_cache / "models--org--other-GGUF"
        (hubenv.tmp_path / "bigdisk").mkdir()
        shutil.move(folder, hubenv.tmp_path / "bigdisk" / folder.name)
        folder.symlink_to(hubenv.tmp_path / "bigdisk" / folder.name)
    blob = entry.resolve()
    entry.unlink()
    entry.symlink_to(other.resolve())
    if blob_too:
        blob.unlink()
    return other


@pytest.mark.parametrize("moved", [False, True], ids=["in place", "its folder moved and linked back"])
@pytest.mark.parametrize("its_entry", [True, False], ids=["its entry there", "its entry deleted by hand"])
def test_models_rm_of_a_model_linked_to_another_repo_s_blob_keeps_that_blob_as_another_model_s(
        hubenv: HubEnv, its_entry: bool, moved: bool) -> None:
    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    other = _linked_to_another_model_s_file(hubenv, blob_too=True, moved=moved)
    other_blob = other.resolve()
    if not its_entry:
        other.unlink()  # the blob is still the other repo's, in the cache: never a file of the user's outside it
    removed = run_localgen("models", "rm", "-y", f"{REPO}:Q8_0", env=hubenv.env)
    assert removed.returncode == 0, removed.err
    user = "org/other-GGUF:Q8_0" if its_entry else "another model"  # without its entry, the blob names no model
    assert removed.err == f"localgen: removed {REPO}:Q8_0: freed 0 B, kept 1 file {user} uses\n", removed.err
    assert other_blob.read_bytes() == make_gguf_bytes("other")


def _repo_folder_moved_and_linked_back(hubenv: HubEnv) -> tuple[Path, Path]:
    """Pull REPO, then move its repo folder to another disk and link it back, as one moves big models; the snapshot
    entry, and the repo folder where it is now."""
    (entry,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    folder = hubenv.hf_cache / "models--org--m-GGUF"
    moved = hubenv.tmp_path / "bigdisk" / folder.name
    moved.parent.mkdir()
    shutil.move(folder, moved)
    folder.symlink_to(moved)
    return entry, moved


def test_models_rm_of_a_model_whose_repo_folder_is_linked_in_from_another_disk_frees_its_blob(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    _entry, moved = _repo_folder_moved_and_linked_back(hubenv)
    removed = run_localgen("models", "rm", "-y", f"{REPO}:Q8_0", env=hubenv.env)
    assert removed.returncode == 0, removed.err
    assert removed.err == f"localgen: removed {REPO}:Q8_0: freed 64.0 KiB\n"
    assert not os.path.lexists(moved), "the emptied repo folder goes, at its real place, as an ordinary one does"
    assert not os.path.lexists(hubenv.hf_cache / "models--org--m-GGUF"), "and the link to it"


@pytest.mark.parametrize("moved", [True, False], ids=["moved and linked back", "in place"])
def test_models_rm_of_the_last_model_of_a_repo_folder_keeps_it_while_it_holds_another_file(hubenv: HubEnv,
                                                                                          moved: bool) -> None:
    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    folder = hubenv.hf_cache / "models--org--m-GGUF"
    if moved:
        folder = _repo_folder_moved_and_linked_back(hubenv)[1]
    else:
        hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    (folder / "refs").mkdir(exist_ok=True)  # (the download noted main's commit there already)
    (folder / "refs" / "v1.0").write_text("a" * 40)  # as huggingface_hub notes a tag's commit
    note = folder / "NOTES.txt"
    note.write_text("where these weights came from\n")  # the user's, next to the cache's folders
    removed = run_localgen("models", "rm", "-y", f"{REPO}:Q8_0", env=hubenv.env)
    assert removed.returncode == 0, removed.err
    assert sorted(p.name for p in folder.iterdir()) == ["NOTES.txt"], "the cache's emptied folders and notes go"
    assert note.read_text() == "where these weights came from\n"
    assert (hubenv.hf_cache / "models--org--m-GGUF").resolve() == folder, "and the link to the folder stays"


def test_a_pull_downloads_again_a_corrupt_blob_of_a_repo_folder_linked_in_from_another_disk(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    from localgen.verify import forget_verified

    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    entry, moved = _repo_folder_moved_and_linked_back(hubenv)
    blob = moved / "blobs" / repo.sha256(NAME)
    damaged = bytearray(blob.read_bytes())
    damaged[-1] ^= 1
    blob.write_bytes(bytes(damaged))
    forget_verified(entry)
    capsys.readouterr()
    gets = hubenv.server.count("GET", f"/{NAME}")
    assert hub.download_model(REPO, quant="Q8_0", filename=None) == [entry]
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"localgen: downloaded {REPO}/{NAME} (64.0 KiB) in ")
    assert hubenv.server.count("GET", f"/{NAME}") == gets + 1
    assert file_sha256(blob) == repo.sha256(NAME) and os.path.realpath(entry) == str(blob)


@pytest.mark.parametrize("blob_too", [False, True], ids=["blob kept", "blob deleted"])
def test_a_pull_replaces_a_link_to_a_file_of_one_s_own_that_is_not_the_hub_s_and_keeps_the_file(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str], blob_too: bool) -> None:
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    mine = _linked_to_a_file_of_one_s_own(hubenv, b"my own weights" * 5000, blob_too=blob_too)
    kept = mine.read_bytes()
    capsys.readouterr()
    gets = hubenv.server.count("GET", f"/{NAME}")
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None)
    assert mine.read_bytes() == kept, "the user's file is left as it was"
    assert path.is_symlink() and os.path.realpath(path) != str(mine) and file_sha256(path) == repo.sha256(NAME)
    err = capsys.readouterr().err.splitlines()
    assert err[-2] == (f"localgen: {path} led to {mine}, which is not the Hub's {REPO}/{NAME}; it leads to the Hub's "
                       f"file now, and {mine} is left as it was")
    if blob_too:  # downloaded again, and said so
        assert err[-1].startswith(f"localgen: downloaded {REPO}/{NAME} (64.0 KiB) in "), err
        assert hubenv.server.count("GET", f"/{NAME}") == gets + 1
    else:  # the blob in the cache, verified before, linked again: never "downloaded by another process"
        assert err[-1] == f"localgen: {REPO}/{NAME} (64.0 KiB) already in the cache, sha256 verified", err
        assert hubenv.server.count("GET", f"/{NAME}") == gets


def test_a_pull_takes_a_linked_file_of_one_s_own_that_is_the_hub_s_once_it_hashed_it(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    mine = _linked_to_a_file_of_one_s_own(hubenv, blob_too=True)  # the Hub's bytes, kept in a folder of the user's
    capsys.readouterr()
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None)
    assert os.path.realpath(path) == str(mine) and mine.is_file()
    assert capsys.readouterr().err == f"localgen: {REPO}/{NAME} (64.0 KiB) already in the cache, sha256 verified\n"


def test_a_pull_force_puts_the_hub_s_file_in_place_of_a_link_to_a_file_of_one_s_own_and_keeps_the_file(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    mine = _linked_to_a_file_of_one_s_own(hubenv, make_gguf_bytes("finetune"))  # a model, but not the Hub's
    kept = mine.read_bytes()
    capsys.readouterr()
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None, force=True)
    assert mine.read_bytes() == kept
    assert os.readlink(path) == f"../../blobs/{repo.sha256(NAME)}" and file_sha256(path) == repo.sha256(NAME)
    err = capsys.readouterr().err.splitlines()
    assert err[-2] == (f"localgen: {path} led to {mine}; it leads to the Hub's {REPO}/{NAME} now, and {mine} is left "
                       "as it was"), err
    assert err[-1].startswith(f"localgen: downloaded {REPO}/{NAME} (64.0 KiB) in "), err
    assert hub_cache.cached_model(REPO, quant="Q8_0", filename=None) == [path], "the Hub's file, verified, offline"


def test_a_download_s_checksum_vouches_only_for_a_snapshot_entry_that_is_the_file_checked(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import hub_resume
    from localgen.verify import recorded_sha256

    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    mine = _linked_to_a_file_of_one_s_own(hubenv, make_gguf_bytes("finetune"))
    monkeypatch.setattr(hub_resume, "link_into_snapshot", lambda *args, **kwargs: None)  # an entry left as it was
    with pytest.raises(HubError) as info:
        hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True, force=True)
    assert info.value.message.endswith(f"; the link to {mine} was removed, and that file is left as it was")
    assert recorded_sha256(mine) is None and mine.read_bytes() == make_gguf_bytes("finetune")


def test_a_download_s_checksum_names_another_model_s_file_that_the_snapshot_entry_still_led_to(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import hub_resume

    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    other = _linked_to_another_model_s_file(hubenv)
    other_blob = other.resolve()
    monkeypatch.setattr(hub_resume, "link_into_snapshot", lambda *args, **kwargs: None)  # an entry left as it was
    with pytest.raises(HubError) as info:
        hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True, force=True)
    assert info.value.message.endswith(f"; the link to {other_blob} (another model's file in the cache) was removed, "
                                       "and that file is left as it was"), info.value.message
    assert other.read_bytes() == make_gguf_bytes("other")


@pytest.mark.parametrize("links", [True, False], ids=["links", "copies"])
def test_a_pull_force_whose_download_fails_its_checksum_keeps_the_verified_copy_that_was_there(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, links: bool) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_SYMLINKS", not links)  # copies: as on Windows without developer mode
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    hubenv.server.corrupt.add((REPO, NAME))  # a mirror or proxy now serves damaged bytes
    with pytest.raises(HubError) as info:
        hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True, force=True)
    assert file_sha256(path) == repo.sha256(NAME) and hubenv.incomplete_files() == []
    assert re.fullmatch(rf"{REPO}/{NAME}: sha256 mismatch \(got [0-9a-f]{{12}}…, expected {repo.sha256(NAME)[:12]}…\); "
                        "the corrupt download was deleted; the copy that was there is kept", info.value.message), \
        info.value.message
    hubenv.server.requests.clear()
    assert hub_cache.cached_model(REPO, quant="Q8_0", filename=None) == [path], "still verified, offline"
    assert hubenv.server.requests == []


def test_ctrl_c_while_a_pull_force_hashes_its_download_keeps_the_verified_copy_that_was_there(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from localgen import hub_verify

    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)

    def interrupted(file: Path) -> str:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:  # Ctrl-C as the download is hashed
        patch.setattr(hub_verify, "sha256_file", interrupted)
        capsys.readouterr()
        with pytest.raises(KeyboardInterrupt):
            hub.download_model(REPO, quant="Q8_0", filename=None, force=True)
    assert file_sha256(path) == repo.sha256(NAME) and hubenv.incomplete_files() == []
    assert hub_cache.cached_model(REPO, quant="Q8_0", filename=None) == [path], "still verified"
    assert capsys.readouterr().err.splitlines()[-1] == (f"localgen: the download of {REPO}/{NAME} stopped; the copy "
                                                        "that was there is kept")


def test_a_download_received_whole_and_stopped_as_it_was_hashed_is_checked_by_the_next_pull_with_no_download(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from localgen import hub_verify

    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})

    def interrupted(file: Path) -> str:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:  # Ctrl-C as the first download is hashed
        patch.setattr(hub_verify, "sha256_file", interrupted)
        with pytest.raises(KeyboardInterrupt):
            hub.download_model(REPO, quant="Q8_0", filename=None)
    assert capsys.readouterr().err.splitlines()[-1] == (f"localgen: the download of {REPO}/{NAME} stopped; all 64.0 "
                                                        f"KiB of it are on disk, which `localgen pull {REPO}:Q8_0` "
                                                        "checks, with no download")
    gets = hubenv.server.count("GET", f"/{NAME}")
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None)
    assert capsys.readouterr().err == (f"localgen: {REPO}/{NAME} (64.0 KiB) received in full by the pull that stopped, "
                                       "sha256 verified\n")
    assert hubenv.server.count("GET", f"/{NAME}") == gets and hubenv.incomplete_files() == []
    assert file_sha256(path) == repo.sha256(NAME)


def test_a_download_is_linked_into_the_snapshot_without_asking_the_hub_again(hubenv: HubEnv) -> None:
    """The Hub's metadata (HEAD) failing while its downloads work: the file downloaded is linked, and found."""
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8", 1 << 20)})
    hubenv.server.head_status = 500
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    assert hubenv.server.count("HEAD") == 0
    assert os.readlink(path) == f"../../blobs/{repo.sha256(NAME)}" and file_sha256(path) == repo.sha256(NAME)
    assert hub_cache.cached_model(REPO, quant="Q8_0", filename=None) == [path]


def test_a_blob_a_pull_left_unlinked_is_linked_by_the_next_without_asking_the_hub_about_it(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    path.unlink()  # the blob alone, as a pull whose link failed left it
    hubenv.server.head_status = 500
    capsys.readouterr()
    assert hub.download_model(REPO, quant="Q8_0", filename=None) == [path]
    assert capsys.readouterr().err == f"localgen: {REPO}/{NAME} (64.0 KiB) already in the cache, sha256 verified\n"
    assert hubenv.server.count("HEAD") == 0 and hubenv.server.count("GET", f"/{NAME}") == 1, "the first pull's GET"
    assert os.readlink(path) == f"../../blobs/{repo.sha256(NAME)}"


@pytest.mark.parametrize("moved", [False, True], ids=["in place", "its folder moved and linked back"])
@pytest.mark.parametrize("force", [False, True], ids=["pull", "pull --force"])
def test_a_pull_over_a_link_to_another_model_s_file_in_the_cache_names_it_so_and_keeps_it(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str], force: bool, moved: bool) -> None:
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    other = _linked_to_another_model_s_file(hubenv, moved=moved)
    other_blob = other.resolve()
    capsys.readouterr()
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None, force=force)
    assert file_sha256(path) == repo.sha256(NAME) and other.read_bytes() == make_gguf_bytes("other")
    err = capsys.readouterr().err.splitlines()
    kept = f"and {other_blob} is left as it was"
    said = (f"; it leads to the Hub's {REPO}/{NAME} now, {kept}" if force else
            f", which is not the Hub's {REPO}/{NAME}; it leads to the Hub's file now, {kept}")
    assert err[-2] == f"localgen: {path} led to {other_blob} (another model's file in the cache){said}", err


@pytest.mark.parametrize("force", [False, True], ids=["pull", "pull --force"])
def test_a_pull_over_a_link_of_one_s_own_to_the_model_s_blob_names_both_as_what_they_are(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str], force: bool) -> None:
    """pull --force called the model's own blob another model's file in the cache, as models rm never did."""
    repo = hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    blob, mine = _pulled_through_a_link_of_yours(hubenv)
    capsys.readouterr()
    (path,) = hub.download_model(REPO, quant="Q8_0", filename=None, force=force)
    assert file_sha256(path) == repo.sha256(NAME) and os.readlink(mine) == str(blob)
    err = capsys.readouterr().err
    if not force:  # the Hub's file, as it is: taken through the user's link
        assert os.readlink(path) == str(mine), "the user's link is theirs"
        assert err == f"localgen: {REPO}/{NAME} (64.0 KiB) already in the cache, sha256 verified\n", err
        return
    assert os.readlink(path) == f"../../blobs/{repo.sha256(NAME)}"
    said = err.splitlines()[-2]
    assert said == (f"localgen: {path} led to {blob} through {mine} (a link of yours to the model's file); it leads "
                    f"to the Hub's {REPO}/{NAME} now, and {mine} is left as it was"), err


SHARDS = [f"s-Q8_0-{n:05d}-of-00002.gguf" for n in (1, 2)]


def _second_shard_linked_to_the_first_s_blob(hubenv: HubEnv) -> tuple[Path, Path, Path]:
    """A split model pulled, whose second shard's snapshot entry leads through a link of the user's to the first
    shard's blob: that entry, the blob and the link."""
    hubenv.server.add_repo(REPO, {name: make_gguf_bytes(f"s{n}", shard=(n, 2)) for n, name in enumerate(SHARDS, 1)})
    first, second = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    blob = first.resolve()
    mine = hubenv.tmp_path / "mydocs" / "s.gguf"
    mine.parent.mkdir()
    mine.symlink_to(blob)
    second.unlink()
    second.symlink_to(mine)
    return second, blob, mine


def test_a_pull_over_a_shard_s_link_to_another_shard_s_blob_names_it_the_model_s_as_models_rm_does(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    """pull told the model's own blobs by this file's alone, and called the first shard's blob another model's file
    in the cache, where models rm, which tells them by every file of the model, calls it the model's."""
    second, blob, mine = _second_shard_linked_to_the_first_s_blob(hubenv)
    capsys.readouterr()
    hub.download_model(REPO, quant="Q8_0", filename=None)
    said = capsys.readouterr().err.splitlines()
    assert f"localgen: {second} led to {blob} through {mine} (a link of yours to the model's file), which is not the " \
           f"Hub's {REPO}/{SHARDS[1]}; it leads to the Hub's file now, and {mine} is left as it was" in said, said
    assert os.readlink(mine) == str(blob) and blob.is_file()


def test_a_download_s_checksum_names_the_model_s_blob_a_shard_s_entry_still_led_to_as_the_pull_does(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checksum's deletion told whose the file was without the model's blobs: another model's file in the
    cache."""
    from localgen import hub_resume

    second, blob, mine = _second_shard_linked_to_the_first_s_blob(hubenv)
    monkeypatch.setattr(hub_resume, "link_into_snapshot", lambda *args, **kwargs: None)  # an entry left as it was
    with pytest.raises(HubError) as info:
        hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True, force=True)
    assert info.value.message.endswith(f"; the link to {blob} through {mine} (a link of yours to the model's file) "
                                       "was removed, and both are left as they were"), info.value.message
    assert not os.path.lexists(second) and os.readlink(mine) == str(blob) and blob.is_file()
