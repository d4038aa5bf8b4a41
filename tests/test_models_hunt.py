"""Managing models as a user does, through real localgen processes against the loopback Hub: what `pull`, `models`
and `-m` say and keep where a download stopped, a name was typed in another case, or a reference is odd."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hub_server import REPO_ROOT, HubEnv, HubRepo, HubServer, make_gguf_bytes, run_cli

from localgen.errors import HubError
from localgen.units import binary_size

REPO = "acme/Tiny-GGUF"
NAME = "tiny-Q8_0.gguf"


def test_a_stopped_update_leaves_the_whole_copy_listed_as_downloaded(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {NAME: make_gguf_bytes("old", 2**20)})
    first = run_cli(env, "pull", f"{REPO}:Q8_0")
    assert first.returncode == 0, first.stderr
    old_path = first.stdout.strip()
    server.repos[REPO] = HubRepo(files={NAME: make_gguf_bytes("new", 4 * 2**20)})  # a newer commit on the Hub
    server.abort_after[(REPO, NAME)] = 3 * 2**20
    server.down_after_abort = True  # huggingface_hub's own retry fails too: the pull stops, its part kept
    update = run_cli(env, "pull", f"{REPO}:Q8_0")
    resumes = "are on disk, which `localgen pull acme/Tiny-GGUF:Q8_0` resumes"
    assert update.returncode == 1 and resumes in update.stderr, update.stderr
    listing = run_cli(env, "models")
    assert listing.returncode == 0, listing.stderr
    (row,) = [line for line in listing.stdout.splitlines() if line.startswith(REPO)]
    assert row.split("\t") == [f"{REPO}:Q8_0", "Q8_0", "1.0 MiB", "never", "hub", old_path, "no"], listing.stdout
    kept = listing.stderr.removeprefix(f"localgen: {REPO}:Q8_0 is partly downloaded (").split(" of ")[0]
    assert kept != "0 B" and listing.stderr == (
        f"localgen: {REPO}:Q8_0 is partly downloaded ({kept} of {binary_size(4 * 2**20)}); "
        f"`localgen pull {REPO}:Q8_0` resumes it\n"), listing.stderr


def test_a_repo_typed_in_another_case_is_named_as_the_hub_spells_it_from_the_first_line(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {NAME: make_gguf_bytes("q8"), "tiny-Q4_K_M.gguf": make_gguf_bytes("q4")})
    pulled = run_cli(env, "pull", REPO.lower())
    assert pulled.returncode == 0, pulled.stderr
    lines = pulled.stderr.splitlines()
    assert lines[0].startswith(f"localgen: chose {REPO}:Q4_K_M (64.0 KiB), the best that fits of 2 quants: "), lines
    assert lines[1].startswith(f"localgen: downloading {REPO}/tiny-Q4_K_M.gguf (64.0 KiB) from "), lines
    assert REPO.lower() not in pulled.stderr, pulled.stderr
    assert server.count("GET", "/api/models/") == 1, "the repo listed once, however it was typed"


def test_the_hubs_addresses_over_http_or_with_www_are_the_hubs(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    addresses = (f"http://huggingface.co/{REPO}/blob/main/{NAME}", f"https://www.huggingface.co/{REPO}",
                 f"www.huggingface.co/{REPO}:q8_0", f"HTTP://HF.CO/{REPO}/resolve/main/{NAME}?download=true")
    pulled = run_cli(env, "pull", *addresses)  # one model, however its address is spelt: pulled and printed once
    assert pulled.returncode == 0 and "pulled all" not in pulled.stderr, pulled.stderr
    paths = pulled.stdout.splitlines()
    whole = [r for r in server.answered() if r.method == "GET" and r.path.endswith(NAME) and r.range is None]
    assert len(paths) == 1 and paths[0].endswith(NAME) and len(whole) == 1, (paths, whole)
    other = run_cli(env, "pull", f"http://example.com/{REPO}")
    assert other.returncode == 2 and "is not an address on the Hugging Face Hub" in other.stderr, other.stderr


def test_a_default_given_as_the_mirrors_address_still_names_the_model_under_another_endpoint(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    assert run_cli(env, "pull", f"{REPO}:Q8_0").returncode == 0
    set_ = run_cli(env, "models", "default", f"{server.url}/{REPO}/blob/main/{NAME}")
    assert set_.returncode == 0 and set_.stderr.startswith(f"localgen: the default model is now hf.co/{REPO}/{NAME} ")
    elsewhere = {**env, "HF_ENDPOINT": "https://huggingface.co", "LOCALGEN_OFFLINE": "1"}
    shown = run_cli(elsewhere, "models", "default")
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"hf.co/{REPO}/{NAME}\n", ""), shown.stderr
    listing = run_cli(elsewhere, "models")
    (row,) = [line for line in listing.stdout.splitlines() if line.startswith(REPO)]
    assert listing.returncode == 0 and row.endswith("\tyes"), (listing.stdout, listing.stderr)


def test_a_file_or_folder_here_whose_name_is_no_model_name_is_named_in_the_hint(tmp_path: Path) -> None:
    (tmp_path / "my model").write_bytes(make_gguf_bytes("mine"))
    (tmp_path / "my models").mkdir()
    (tmp_path / "my models" / "m-Q8_0.gguf").write_bytes(make_gguf_bytes("m"))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"}
    hints = {}
    for typed in ("my model", "my models", "no such"):
        shown = subprocess.run([sys.executable, "-m", "localgen", "models", "show", typed], env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert shown.returncode == 2 and shown.stderr.startswith(
            f"localgen: error: '{typed}' is not a model name, repo or path (hint: "), shown.stderr
        hints[typed] = shown.stderr.partition("(hint: ")[2]
    names = "see `localgen models list --all` for names)\n"
    assert hints == {"my model": f"for the file of that name here, use './my model'; or {names}",
                     "my models": f"my models here is a folder, not a model: did you mean './my models/m-Q8_0.gguf'?; "
                                  f"or {names}",
                     "no such": names}, hints


def test_a_file_typed_in_another_case_is_named_as_the_hub_spells_it(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    typed = f"{REPO.lower()}/{NAME.upper()}"
    first, again = run_cli(env, "pull", typed), run_cli(env, "pull", typed)
    assert first.returncode == again.returncode == 0 and first.stdout == again.stdout, (first.stderr, again.stderr)
    assert first.stderr.startswith(f"localgen: downloading {REPO}/{NAME} (64.0 KiB) from "), first.stderr
    assert again.stderr == f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB) and up to date with the Hub\n"


def _pull_removed_as_it_asks_the_hub(server: HubServer, env: dict[str, str],
                                     then: Callable[[], None] = lambda: None) -> tuple[int, str, str, str]:
    """A pull of a downloaded model whose question to the Hub is held while models rm removes the model (then: what
    the Hub does meanwhile): the pull's exit status, stdout and stderr, and the first pull's stdout."""
    server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    first = run_cli(env, "pull", f"{REPO}:Q8_0")
    assert first.returncode == 0, first.stderr
    server.delay_until, server.delay_only = threading.Event(), f"/api/models/{REPO}"
    pull = subprocess.Popen([sys.executable, "-m", "localgen", "pull", f"{REPO}:Q8_0"], env=env, cwd=REPO_ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while server.delayed == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.delayed == 1, "the pull never asked the Hub"
        removed = run_cli(env, "models", "rm", "-y", f"{REPO}:Q8_0")
        assert removed.returncode == 0, removed.stderr
        then()
        server.delay_until.set()
        out, err = pull.communicate(timeout=60)
    finally:
        server.delay_until.set()
        pull.kill()
    return pull.returncode, out, err, first.stdout


def test_a_pull_whose_copy_is_removed_as_it_asks_the_hub_downloads_it_again_and_says_no_update(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    code, out, err, first = _pull_removed_as_it_asks_the_hub(*hub)
    assert code == 0 and out == first, err
    assert "newer version" not in err and "up to date" not in err, err
    lines = err.splitlines()
    assert lines[0].startswith(f"localgen: downloading {REPO}/{NAME} (64.0 KiB) from "), err
    assert lines[-1] == f"localgen: {REPO}:Q8_0 was removed after this pull found it; it was downloaded again", err


@pytest.mark.parametrize(("outage", "said"), [("down", "503"), ("gone", "not found on the Hub")])
def test_a_pull_whose_copy_is_removed_as_the_hub_fails_says_it_was_removed(
        hub: tuple[HubServer, dict[str, str]], outage: str, said: str) -> None:
    server, env = hub

    def fail() -> None:
        """The Hub goes down, or says the repo is gone."""
        if outage == "down":
            server.down = True
        else:
            server.status[REPO] = (404, "RepoNotFound")

    code, out, err, _ = _pull_removed_as_it_asks_the_hub(server, env, fail)
    assert code != 0 and out == "", err
    assert err.startswith(f"localgen: error: {REPO}:Q8_0 was removed after this pull found it, and could not be "
                          "downloaded again: "), err
    assert "file not found" not in err and "check the path" not in err, err


def test_a_pull_links_its_file_where_a_models_rm_beside_it_pruned_the_empty_snapshot_folder(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import file_download

    from localgen import hub

    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8"), "tiny-Q4_K_M.gguf": make_gguf_bytes("q4")})
    (kept,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    real, removals = file_download._create_symlink, []

    def rm_beside(src: str, dst: str, new_blob: bool = False) -> None:
        """The moment a models rm of the other quant, run now, empties the snapshot folder, which goes as where no
        flock tells the rm that a download of the repo runs."""
        if not removals:
            removals.append(run_cli(hubenv.env, "models", "rm", "-y", f"{REPO}:Q8_0"))
            Path(dst).parent.rmdir()
        real(src, dst, new_blob)

    monkeypatch.setattr(file_download, "_create_symlink", rm_beside)
    (path,) = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    assert removals[0].returncode == 0 and not kept.exists(), removals[0].stderr
    assert path.parent == kept.parent and path.read_bytes() == make_gguf_bytes("q4")


def test_an_own_file_a_run_refuses_is_listed_with_what_is_wrong_with_it(hub: tuple[HubServer, dict[str, str]],
                                                                      tmp_path: Path) -> None:
    _, env = hub
    whole = make_gguf_bytes("mine")
    files = {"page": b"<!DOCTYPE html><html>a web page saved as a model</html>", "mine": whole,
             "future": whole.replace(struct.pack("<Q", 5) + b"llama", struct.pack("<Q", 10) + b"futurearch"),
             "cut": whole[:30]}
    names = {"page": "page.gguf", "mine": "mine-Q8_0.gguf", "future": "future-Q8_0.gguf", "cut": "cut.gguf"}
    for name, data in files.items():
        (tmp_path / names[name]).write_bytes(data)
    config = Path(env["LOCALGEN_HOME"]) / "config"
    config.mkdir(parents=True)
    entries = "".join(f'[models.{name}]\npath = "{tmp_path / names[name]}"\n' for name in files)
    (config / "models.toml").write_text(entries + '[defaults]\nmodel = "page"\n')
    listing, everything = run_cli(env, "models"), run_cli(env, "models", "list", "--all")
    as_json = run_cli(env, "models", "list", "--json")
    assert listing.returncode == everything.returncode == as_json.returncode == 0, (listing.stderr, everything.stderr)
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in listing.stdout.splitlines()[1:]}
    page = tmp_path / "page.gguf"
    assert rows["page"] == ["-", binary_size(page.stat().st_size), "never", "local (not a GGUF file)", str(page),
                            "yes"], listing.stdout
    sources = {name: rows[name][3] for name in files}
    assert sources == {"page": "local (not a GGUF file)", "mine": "local",
                       "future": "local (won't load: architecture 'futurearch' is not supported)",
                       "cut": "local (won't load: truncated or corrupt)"}, sources
    downloaded = {line.split("\t")[0]: line.split("\t")[4] for line in everything.stdout.splitlines()[1:]}
    assert (downloaded["page"], downloaded["mine"], downloaded["cut"]) == (
        "no (not a GGUF file)", "yes (local)", "no (won't load: truncated or corrupt)"), everything.stdout
    problems = {m["name"]: m["problem"] for m in json.loads(as_json.stdout) if m["name"] in files}
    assert problems == {name: None if source == "local" else source.removeprefix("local (")[:-1]
                        for name, source in sources.items()}, problems


def test_an_own_file_that_cannot_be_read_is_listed_as_unreadable(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen.catalog import _own_file_model

    model = tmp_path / "mine-Q8_0.gguf"
    model.write_bytes(make_gguf_bytes("mine"))
    real = Path.open

    def refused(self: Path, *args: object, **kwargs: object) -> object:
        """Opening the model is refused, as for a file of another user's without read permission."""
        if self == model:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refused)
    listed = _own_file_model("mine", model)
    assert (listed.problem, listed.size) == ("unreadable", model.stat().st_size), listed


def test_a_download_through_hf_hub_download_keeps_its_snapshot_folder_through_a_models_rm_beside_it(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import file_download

    from localgen import hub

    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8"), "tiny-Q4_K_M.gguf": make_gguf_bytes("q4")})
    (kept,) = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    monkeypatch.setattr(hub, "resumable", lambda f: False)  # a file over the Hub's plain HTTP limit
    real, removals = file_download._download_to_tmp_and_move, []

    def rm_beside(*args: object, **kwargs: object) -> None:
        """A models rm of the other quant, run as this download holds its lock, its snapshot folder made."""
        removals.append(run_cli(hubenv.env, "models", "rm", "-y", f"{REPO}:Q8_0"))
        real(*args, **kwargs)

    monkeypatch.setattr(file_download, "_download_to_tmp_and_move", rm_beside)
    (path,) = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    assert removals[0].returncode == 0 and not kept.exists(), removals[0].stderr
    assert path.parent == kept.parent and path.read_bytes() == make_gguf_bytes("q4")


def test_a_file_given_by_its_bare_name_in_a_subfolder_is_named_as_the_hub_spells_it(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {"Sub/Tiny-Q4_K_M.gguf": make_gguf_bytes("q4"), "x-Q8_0.gguf": make_gguf_bytes("q8")})
    typed = f"{REPO.lower()}/TINY-Q4_K_M.GGUF"
    first, again = run_cli(env, "pull", typed), run_cli(env, "pull", typed)
    assert first.returncode == again.returncode == 0 and first.stdout == again.stdout, (first.stderr, again.stderr)
    listed = f"{REPO}/Sub/Tiny-Q4_K_M.gguf"
    assert first.stderr.startswith(f"localgen: downloading {listed} (64.0 KiB) from "), first.stderr
    named = f"{REPO}:Q4_K_M"  # as models list names the file
    assert again.stderr == f"localgen: {named} is already downloaded (64.0 KiB) and up to date with the Hub\n"
    shown = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "models", "show", "--json", typed)
    assert shown.returncode == 0 and json.loads(shown.stdout)["name"] == named, shown.stderr


def test_a_repo_none_of_whose_quants_fits_is_named_as_the_hub_spells_it(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo("acme/Big-GGUF", {"m-Q8_0.gguf": make_gguf_bytes("q8", 2**17),
                                      "m-Q4_K_M.gguf": make_gguf_bytes("q4")})
    refused = run_cli({**env, "LOCALGEN_MEMORY_LIMIT": "8MiB"}, "pull", "acme/big-gguf")
    assert "acme/Big-GGUF:Q4_K_M" in refused.stderr and "acme/big-gguf" not in refused.stderr, refused.stderr


def test_a_folder_here_whose_name_is_no_model_name_is_hinted_with_shell_quoted_paths(tmp_path: Path) -> None:
    for folder in ("x'y", "my models"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m-Q8_0.gguf").write_bytes(make_gguf_bytes("m"))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"}
    hints = {}
    for typed in ("x'y", "my models"):
        shown = subprocess.run([sys.executable, "-m", "localgen", "models", "show", typed], env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert shown.returncode == 2, shown.stderr
        hints[typed] = shown.stderr.partition("(hint: ")[2].partition("; or")[0]
    assert hints == {"x'y": "x'y here is a folder, not a model: did you mean './x'\"'\"'y/m-Q8_0.gguf'?",
                     "my models": "my models here is a folder, not a model: did you mean './my models/m-Q8_0.gguf'?"}


def test_the_current_or_parent_folder_given_as_a_model_is_hinted_with_a_path_that_runs(tmp_path: Path,
                                                                                        bundled_model: Path) -> None:
    """`-m .` and `-m ./` (`..`, `../`) get one answer: a path that runs, with or without the slash."""
    (tmp_path / "m.gguf").symlink_to(bundled_model)
    (tmp_path / "below").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"}
    for folder, typed, meant in ((tmp_path, ".", "./m.gguf"), (tmp_path, "./", "./m.gguf"),
                                 (tmp_path / "below", "..", "../m.gguf"), (tmp_path / "below", "../", "../m.gguf")):
        refused = subprocess.run([sys.executable, "-m", "localgen", "run", "-m", typed, "hi"], env=env, cwd=folder,
                                 capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert refused.returncode == 1 and refused.stderr == (
            f"localgen: error: {typed} is not a file (hint: did you mean {meant}?)\n"), refused.stderr
        if typed.endswith("/"):
            continue  # the path hinted is the one hinted without the slash, run once
        hinted = subprocess.run([sys.executable, "-m", "localgen", "run", "-m", meant, "-n", "1", "hi"], env=env,
                                cwd=folder, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert hinted.returncode == 0 and hinted.stdout.strip(), hinted.stderr


def test_models_rm_of_a_folder_says_it_is_a_folder_not_a_file_to_delete(tmp_path: Path) -> None:
    """`models rm .` said ". is a file path" and hinted to delete the file: the folder is no model, and no file."""
    (tmp_path / "below").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"}
    for typed in (".", "./", "..", "../below", str(tmp_path / "below")):
        refused = subprocess.run([sys.executable, "-m", "localgen", "models", "rm", typed, "--yes"], env=env,
                                 cwd=tmp_path / "below", capture_output=True, text=True, timeout=60,
                                 stdin=subprocess.DEVNULL)
        assert refused.returncode == 2 and refused.stderr == (
            f"localgen: error: {typed} is a folder, not a model; localgen only removes models it downloaded (hint: "
            "pass the name of a downloaded model: `localgen models list` names them)\n"), refused.stderr
    assert (tmp_path / "below").is_dir()


def test_a_default_written_as_the_mirrors_address_is_given_as_the_hubs_reference(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {NAME: make_gguf_bytes("q8")})
    assert run_cli(env, "pull", f"{REPO}:Q8_0").returncode == 0
    config = Path(env["LOCALGEN_HOME"]) / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text(f'[defaults]\nmodel = "{server.url}/{REPO}/blob/main/{NAME}"\n')
    shown = run_cli(env, "models", "default")
    assert (shown.returncode, shown.stdout) == (0, f"hf.co/{REPO}/{NAME}\n"), shown.stderr


def _link_with(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, before: Callable[[Path, Path, int], None]) -> Path:
    """A download of the Q4_K_M quant, its link into the snapshot made after before(blob, link, try number)."""
    from huggingface_hub import file_download

    from localgen import hub

    hubenv.server.add_repo(REPO, {NAME: make_gguf_bytes("q8"), "tiny-Q4_K_M.gguf": make_gguf_bytes("q4")})
    real, tries = file_download._create_symlink, [0]

    def linked(src: str, dst: str, new_blob: bool = False) -> None:
        tries[0] += 1
        before(Path(src), Path(dst), tries[0])
        real(src, dst, new_blob)

    monkeypatch.setattr(file_download, "_create_symlink", linked)
    (path,) = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    return path


def test_a_link_whose_folder_another_pull_made_again_after_a_prune_is_made(hubenv: HubEnv,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def pruned_then_made_again(blob: Path, link: Path, tries: int) -> None:
        """The folder pruned as the link is made, and made again by another pull before this one looks."""
        if tries == 1:
            link.parent.rmdir()
            with pytest.raises(FileNotFoundError):
                os.symlink(blob, link)
            link.parent.mkdir()
            raise FileNotFoundError(2, "No such file or directory", str(link))

    path = _link_with(hubenv, monkeypatch, pruned_then_made_again)
    assert path.read_bytes() == make_gguf_bytes("q4")


def test_a_link_to_a_blob_that_went_is_not_made(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    def blob_gone(blob: Path, link: Path, tries: int) -> None:
        """The blob and the folder gone as the link is made: no prune of an empty folder, no link to make again."""
        (link.parent / blob).resolve().unlink()
        link.parent.rmdir()

    with pytest.raises(HubError) as refused:
        _link_with(hubenv, monkeypatch, blob_gone)
    assert "FileNotFoundError" in refused.value.message, refused.value.message


def test_a_link_whose_folder_is_pruned_each_time_ends_with_a_hint(hubenv: HubEnv,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def pruned(blob: Path, link: Path, tries: int) -> None:
        """A models rm beside the download prunes the empty folder each time it is made."""
        link.parent.rmdir()

    with pytest.raises(HubError) as refused:
        _link_with(hubenv, monkeypatch, pruned)
    assert "was removed 5 times as this download wrote into it" in refused.value.message, refused.value.message
    assert refused.value.hint.startswith("let the `localgen models rm`"), refused.value.hint
