"""`localgen conversations` and the model commands on what a demanding user does: files copied in by hand, tight
limits, many entries of one time, local files pulled, quants named as the user named them, damaged files and links
to nothing, in subprocesses (a real terminal where one asks); and the one rule of what a process keeps of a file it
read, in the process."""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from hub_server import HubServer, child_env, make_gguf_bytes, run_cli

from localgen.conversation import Conversation, Turn
from localgen.conversation_store import conversations_dir, let_go, save_conversation
from localgen.storage import temp_name
from tests.conftest import REPO_ROOT, run_localgen, spawn_localgen, user_registry

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def _save(name: str, *turns: Turn) -> Path:
    conversation = Conversation(name=name, turns=list(turns), model="smollm2-135m")
    path = save_conversation(conversation)
    let_go(conversation)
    return path


def test_a_file_copied_in_under_a_name_against_the_rule_is_shown_and_renamed_by_the_name_listed() -> None:
    """show refused "my notes", the name the listing gives, and the rename it hinted was one no command did."""
    copied = conversations_dir() / "my notes.json"
    copied.write_bytes(_save("notes", Turn("Remember the word pineapple.", "I will.")).read_bytes())
    shown = run_localgen("conversations", "show", "my notes")
    assert shown.returncode == 0 and shown.out.startswith("# my notes\n"), shown.err
    assert "Remember the word pineapple." in shown.out
    record = run_localgen("conversations", "show", "my notes.json", "--json")  # its file's name means it too
    assert record.returncode == 0 and json.loads(record.out)["turns"][0]["answer"] == "I will.", record.err
    listed = {row["name"]: row["problem"] for row in json.loads(run_localgen("conversations", "--json").out)}
    assert listed["my notes"] == "invalid name: rename it (conversations mv) to my-notes to resume it", listed
    resumed = run_localgen("run", "--conversation", "my notes", "-n", "1", "hi")  # no save under such a name
    assert resumed.returncode == 2 and resumed.out == "", resumed.err
    hint = resumed.err.partition("(hint: ")[2]
    assert hint == (f"{copied} is there: `localgen conversations mv 'my notes' my-notes` renames it to a name chat "
                    "and run take)\n"), resumed.err
    command = shlex.split(hint.split("`")[1])  # the very command hinted does it
    renamed = run_localgen(*command[1:])
    assert renamed.returncode == 0 and renamed.err == "localgen: renamed my notes to my-notes\n", renamed.err
    assert not copied.exists()
    again = run_localgen("run", "--conversation", "my-notes", "-n", "1", "--temperature", "0", "hi")
    assert again.returncode == 0, again.err
    assert len(json.loads((conversations_dir() / "my-notes.json").read_text())["turns"]) == 2


def test_the_rename_hinted_for_a_name_with_a_tab_is_the_shells_way_to_type_it() -> None:
    """A tab in the name is hinted as $'...' a shell reads back as the name."""
    copied = conversations_dir() / "tab\there.json"
    copied.write_bytes(_save("notes", Turn("Hi", "Hello!")).read_bytes())
    refused = run_localgen("run", "--conversation", "tab\there", "-n", "1", "hi")
    assert refused.returncode == 2 and "`localgen conversations mv $'tab\\there' tab-here`" in refused.err, refused.err
    renamed = run_localgen("conversations", "mv", "tab\there", "tab-here")
    assert renamed.returncode == 0 and (conversations_dir() / "tab-here.json").is_file(), renamed.err


def _rm_with_open_files_limited(names: list[str], limit: int) -> subprocess.CompletedProcess[str]:
    """`localgen conversations rm -y NAMES` in a process whose soft and hard limits of open files are limit."""
    return subprocess.run([sys.executable, "-m", "localgen", "conversations", "rm", "-y", *names], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=120, stdin=subprocess.DEVNULL,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))


def test_rm_of_one_conversation_under_a_low_limit_of_open_files_deletes_it() -> None:
    """One lock beside a process's few open files was refused under `ulimit -n 12`: 16 more were asked to be free."""
    _save("kept", Turn("Hi", "Hello!"))
    deleted = _rm_with_open_files_limited(["kept"], 12)
    assert (deleted.returncode, deleted.stderr) == (0, "localgen: deleted kept\n")
    assert not (conversations_dir() / "kept.json").exists()


def test_rm_of_as_many_as_the_refusal_says_fit_deletes_them_and_their_killed_saves() -> None:
    """The margin is what rm opens beside its locks: at the most the refusal says fit, the temp files that their
    killed saves left are tested and removed too, none left for want of a descriptor."""
    folder = conversations_dir()
    text = _save("first", Turn("Hi", "Hello!")).read_text()
    names = [f"old-{number}" for number in range(10)]
    temps = {name: temp_name(folder / f"{name}.json") for name in names}  # as a save killed part way leaves them
    for name in names:
        (folder / f"{name}.json").write_text(text)
        (folder / temps[name]).write_text("{")
    refused = _rm_with_open_files_limited(names, 12)
    fits = re.search(r"delete at most (\d+) at a time", refused.stderr)
    assert refused.returncode == 1 and fits, refused.stderr
    most = int(fits.group(1))
    followed = _rm_with_open_files_limited(names[:most], 12)
    assert followed.returncode == 0, followed.stderr
    left = sorted(path.name for path in folder.iterdir() if path.is_file() and not path.name.startswith("first"))
    assert left == sorted(name for old in names[most:] for name in (f"{old}.json", temps[old])), left


def test_conversations_of_one_modification_time_are_listed_by_name_in_the_table_and_json() -> None:
    """Those saved in one second (a script's, files copied with cp -p) came in the folder's own order."""
    text = _save("seed", Turn("Hi", "Hello!")).read_text()
    (conversations_dir() / "seed.json").unlink()
    names = ["kiwi", "Apple", "fig", "banana", "cherry", "date", "elder", "grape", "honeydew", "lime", "mango", "b2"]
    for name in names:
        path = conversations_dir() / f"{name}.json"
        path.write_text(text)
        os.utime(path, (1_700_000_000, 1_700_000_000))
    newer = conversations_dir() / "zebra.json"
    newer.write_text(text)
    wanted = ["zebra", *sorted(names)]
    for _ in range(2):
        table = run_localgen("conversations")
        assert [line.split("\t")[0] for line in table.out.splitlines()[1:]] == wanted, table.err
        records = json.loads(run_localgen("conversations", "list", "--json").out)
        assert [record["name"] for record in records] == wanted
        limited = run_localgen("conversations", "-n", "3", "--json")
        assert [record["name"] for record in json.loads(limited.out)] == wanted[:3], limited.err


def test_pull_of_an_entry_naming_a_file_of_one_s_own_says_it_is_here_as_pull_of_its_path_does(
        home: Path, bundled_model: Path) -> None:
    """`pull ./file.gguf` said there was nothing to download (exit 0), and `pull NAME` of an entry naming that file
    (path =) was refused (exit 2)."""
    mine = home / "models" / "mine.Q4_1.gguf"
    mine.parent.mkdir()
    os.symlink(bundled_model, mine)
    user_registry(home, '[models.mine]\npath = "../models/mine.Q4_1.gguf"\n')
    by_path, by_name = run_localgen("pull", str(mine)), run_localgen("pull", "mine")
    assert (by_path.returncode, by_path.out) == (by_name.returncode, by_name.out) == (0, f"{mine}\n"), by_name.err
    assert by_path.err == "localgen: mine.Q4_1.gguf is a file on this machine (93.8 MiB): nothing to download\n"
    assert by_name.err == f"localgen: mine is a file on this machine, {mine} (93.8 MiB): nothing to download\n"
    quiet = run_localgen("pull", "-q", "mine")
    assert (quiet.returncode, quiet.out, quiet.err) == (0, f"{mine}\n", "")
    quant = run_localgen("pull", "mine:Q8_0")  # a quant of one's own file is none there is to download
    assert quant.returncode == 2 and "mine is your own file" in quant.err, quant.err
    assert mine.is_symlink() and mine.resolve() == bundled_model.resolve(), "left as it was"


def test_a_file_whose_name_says_ud_before_its_quant_is_listed_by_the_tag_it_was_pulled_by(
        loopback_hub: HubServer, tmp_path: Path) -> None:
    """ORG/REPO:UD-Q4_K_XL, as Hugging Face's "Use this model" gives Unsloth's quants, was listed as ORG/REPO:Q4_K_XL
    (both pick the file), and a UD- file beside one of its quant without it as ORG/REPO/FILE; rm takes the name
    listed."""
    repo = "unsloth/Qwen3-8B-GGUF"
    loopback_hub.add_repo(repo, {"Qwen3-8B-UD-Q4_K_XL.gguf": make_gguf_bytes("xl"),
                                 "Qwen3-8B-UD-Q4_K_M.gguf": make_gguf_bytes("ud"),
                                 "Qwen3-8B-Q4_K_M.gguf": make_gguf_bytes("q4")})
    env = child_env(loopback_hub, tmp_path)
    for tag in ("UD-Q4_K_XL", "UD-Q4_K_M", "Q4_K_M"):
        pulled = run_cli(env, "pull", f"hf.co/{repo}:{tag}")
        assert pulled.returncode == 0, pulled.stderr
    listed = run_cli(env, "models", "list")
    names = sorted(line.split("\t")[0] for line in listed.stdout.splitlines() if repo in line)
    assert names == [f"{repo}:Q4_K_M", f"{repo}:UD-Q4_K_M", f"{repo}:UD-Q4_K_XL"], listed.stdout
    records = json.loads(run_cli(env, "models", "list", "--json").stdout)
    assert {r["name"]: r["quant"] for r in records if r["repo"] == repo} == {
        f"{repo}:Q4_K_M": "Q4_K_M", f"{repo}:UD-Q4_K_M": "Q4_K_M", f"{repo}:UD-Q4_K_XL": "Q4_K_XL"}
    removed = run_cli(env, "models", "rm", f"{repo}:UD-Q4_K_M", "-y")
    assert removed.returncode == 0, removed.stderr
    left = sorted(line.split("\t")[0] for line in run_cli(env, "models", "list").stdout.splitlines() if repo in line)
    assert left == [f"{repo}:Q4_K_M", f"{repo}:UD-Q4_K_XL"]


def test_a_header_of_a_file_changed_just_now_is_kept_neither_by_the_process_nor_on_disk_until_it_settles(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The process kept the header of a file changed in the last 2 s by its version, which a write within the same
    clock tick leaves as it was, where the headers kept on disk wait such a file out: both follow SETTLED_S now."""
    import gguf_builders as gb

    from localgen import file_versions, gguf_reader
    from localgen.quant_choice import read_local_header

    monkeypatch.setattr(file_versions, "SETTLED_S", 1.0, raising=False)  # the one rule: for both
    reads: list[Path] = []
    real = gguf_reader.read_gguf
    monkeypatch.setattr(gguf_reader, "read_gguf", lambda path, **kw: reads.append(path) or real(path, **kw))
    path = gb.tiny_model(tmp_path / "m.gguf")
    headers = home / "cache" / "headers"
    first = read_local_header(path)
    assert read_local_header(path) == first and reads == [path, path], "read again: changed just now"
    assert not list(headers.glob("*.json")), "nor kept on disk"
    changed = path.stat()
    time.sleep(max(0.0, changed.st_ctime - time.time() + 1.05))
    assert read_local_header(path) == first and read_local_header(path) == first
    assert reads == [path] * 3 and len(list(headers.glob("*.json"))) == 1, "settled: kept, here and on disk"


@pytest.mark.parametrize(("given", "said"), [
    ("gone", "[defaults] model 'gone' is not in the registry"),
    ("org/repo:", "[defaults] model: model reference 'org/repo:' has an empty quant after ':'"),
])
def test_models_list_warns_of_a_default_that_names_no_model(home: Path, given: str, said: str) -> None:
    """A [defaults] model naming no model, which run and chat without -m fail on, was listed in silence: no row
    starred, no word of why."""
    registry = user_registry(home, f'[defaults]\nmodel = "{given}"\n')
    run = run_localgen("run", "hi")
    assert run.returncode == 1 and f"{registry}: {said}" in run.err, run.err
    for args in (("models",), ("models", "list", "--json"), ("models", "list", "--all")):
        listed = run_localgen(*args)
        assert listed.returncode == 0, listed.err
        assert listed.err.startswith(f"localgen: warning: {registry}: {said}, so run and chat without -m fail (hint: "
                                     ), (args, listed.err)
        assert "\tyes\n" not in listed.out and '"default": true' not in listed.out
    user_registry(home, '[defaults]\nmodel = "smollm2-135m"\n')
    assert run_localgen("models").err == ""


def test_a_link_to_nothing_is_said_so_by_show_run_and_chat_as_the_listing_says_it() -> None:
    """The listing said the link led to a file not there; show, run and chat --resume called it not a file."""
    conversations_dir().mkdir(parents=True)
    target = conversations_dir().parent / "unmounted" / "notes.json"
    (conversations_dir() / "notes.json").symlink_to(target)
    reason = f"a link to {target}, which is not there"
    (record,) = json.loads(run_localgen("conversations", "--json").out)
    assert record["problem"] == reason
    for args in (("conversations", "show", "notes"), ("run", "--conversation", "notes", "-n", "1", "hi"),
                 ("chat", "--resume", "notes")):
        refused = run_localgen(*args)
        assert refused.returncode == 1 and refused.err.startswith(
            f"localgen: error: {conversations_dir() / 'notes.json'} is not a saved conversation ({reason}) (hint: it "
            "was left untouched: move it away or delete it (`localgen conversations rm notes`)"), (args, refused.err)


def test_a_folder_given_as_a_model_is_hinted_with_its_gguf_models_alone(home: Path, tmp_path: Path) -> None:
    """The hint for a folder named every .gguf file in it as a model to pass, a web page saved under that name too,
    and told an entry whose path is the folder to `pass` one, as -m is given one."""
    folder = tmp_path / "downloads"
    folder.mkdir()
    for name in ("a.Q4_K_M.gguf", "b.Q8_0.gguf"):
        (folder / name).write_bytes(b"GGUF" + bytes(20))
    (folder / "c.Q6_K.gguf").write_text("<!DOCTYPE html><html>Not found</html>\n")
    registry = user_registry(home, f'[models.mine]\npath = "{folder}"\n')
    models = f"{folder}/a.Q4_K_M.gguf, {folder}/b.Q8_0.gguf"
    for args, hint in (
            (("fit", str(folder)), f"pass one of the 2 models in this folder: {models}"),
            (("models", "show", "mine"), f"fix that entry's path: point it at one of the 2 models in this folder: "
                                         f"{models}")):
        refused = run_localgen(*args)
        origin = f" ([models.mine] in {registry})" if "mine" in args else ""
        assert refused.returncode == 1 and refused.err == (
            f"localgen: error: {folder} is not a file{origin} (hint: {hint})\n"), refused.err
    for name in ("a.Q4_K_M.gguf", "b.Q8_0.gguf"):
        (folder / name).unlink()
    refused = run_localgen("fit", str(folder))
    assert refused.err.endswith("(hint: pass the path of a .gguf model file; this folder holds none)\n"), refused.err


def test_rm_asks_on_a_terminal_with_the_escapes_of_a_name_shown_not_obeyed() -> None:
    """A file copied in under a name with an escape (one that sets the terminal's title), which rm takes as listed,
    was named raw in rm's question: the terminal obeyed it."""
    name = "a\x1b]0;pwned\x07b"
    (conversations_dir() / f"{name}.json").write_bytes(_save("notes", Turn("Hi", "Hello!")).read_bytes())
    child = spawn_localgen("conversations", "rm", name, env={**os.environ}, encoding="utf-8", timeout=60)
    child.expect_exact("[y/N] ")
    assert child.before == "delete 1 conversation (a^[]0;pwned^Gb)? ", repr(child.before)
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and child.before == "y\r\nlocalgen: deleted a^[]0;pwned^Gb\r\n", repr(child.before)
    assert not (conversations_dir() / f"{name}.json").exists()


def test_a_split_model_s_check_is_kept_only_once_every_shard_has_settled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether the shards of a split own file agree was kept by the first shard's settling alone: a later shard
    changed just now, within its clock tick, would go unseen."""
    import gguf_builders as gb

    from localgen import file_versions, gguf_split, own_files

    monkeypatch.setattr(file_versions, "SETTLED_S", 1.0, raising=False)
    shards = gb.write_split(gb.tiny_model(tmp_path / "whole.gguf"), tmp_path, 3, prefix="tiny")
    checks: list[Path] = []
    real = gguf_split.validate_split
    monkeypatch.setattr(gguf_split, "validate_split", lambda path: checks.append(path) or real(path))
    time.sleep(max(0.0, max(shard.stat().st_ctime for shard in shards) - time.time() + 1.05))
    shards[2].write_bytes(shards[2].read_bytes())  # the last shard written again just now, as it was
    assert [own_files.shards_problem(shards) for _ in range(2)] == [None, None]
    assert checks == [shards[0]] * 2, "checked again: a shard changed just now"
    time.sleep(max(0.0, shards[2].stat().st_ctime - time.time() + 1.05))
    assert [own_files.shards_problem(shards) for _ in range(2)] == [None, None]
    assert checks == [shards[0]] * 3, "kept once all have settled"


def test_the_rm_hinted_for_a_file_copied_in_that_cannot_be_read_deletes_it_as_typed() -> None:
    """show of a damaged file or a pipe copied in under a name with a space hinted `conversations rm my notes`,
    which deletes my and notes."""
    conversations_dir().mkdir(parents=True)
    os.mkfifo(conversations_dir() / "my pipe.json")
    (conversations_dir() / "it's cut.json").write_text('{"turns": [')
    for name in ("my pipe", "it's cut"):
        refused = run_localgen("conversations", "show", name, timeout=30)
        assert refused.returncode == 1, refused.err
        command = shlex.split(refused.err.rpartition("(`")[2].partition("`)")[0])
        assert command == ["localgen", "conversations", "rm", name], refused.err
        deleted = run_localgen(*command[1:], "-y", timeout=30)
        assert deleted.returncode == 0 and not os.path.lexists(conversations_dir() / f"{name}.json"), deleted.err


def test_show_of_a_name_with_a_space_typed_as_two_words_is_hinted_quoted() -> None:
    """`conversations show my notes` of a file copied in as my notes.json, which show takes now, was told to read the
    help."""
    (conversations_dir() / "my notes.json").write_bytes(_save("notes", Turn("Hi", "Hello!")).read_bytes())
    refused = run_localgen("conversations", "show", "--json", "my", "notes")
    assert refused.returncode == 2 and refused.err == (
        "localgen: error: unexpected extra argument(s) (notes) (hint: a name with a space is one word to the shell: "
        "`localgen conversations show --json 'my notes'`)\n"), refused.err
    other = run_localgen("conversations", "show", "my", "letters")  # no such file: the help, as before
    assert other.err.endswith("(hint: see `localgen conversations show --help`)\n"), other.err


def _hinted_command(refused: str) -> str:
    """The command a refusal's hint gives between backquotes."""
    return refused.rpartition("(hint: ")[2].split("`")[1]


def _as_bash_reads(command: str) -> list[bytes]:
    """The words bash gives localgen of a command typed to it."""
    read = subprocess.run(["bash", "-c", 'localgen() { printf "%s\\0" "$@"; }; ' + command], capture_output=True,
                          timeout=30, check=True)
    return read.stdout.split(b"\0")[:-1]


@pytest.mark.parametrize("name", ["a\u200bb", "a\u2028b", "a\u00a0b", "caf\udce9", "it's", "two\nlines",
                                  "a\x1b[31mb", "it's\u00a0\x1b"])
def test_the_rename_hinted_for_a_name_no_chat_takes_names_its_file_as_bash_reads_it(name: str) -> None:
    """A character past ASCII was written \\x and its code point ($'a\\x200bb', which bash reads as a, a space and
    0bb; $'a\\xa0b', a byte that is no UTF-8), and a byte that was not UTF-8 as its surrogate ($'caf\\xdce9')."""
    (conversations_dir() / f"{name}.json").write_bytes(_save("notes", Turn("Hi", "Hello!")).read_bytes())
    refused = run_localgen("run", "--conversation", name, "-n", "1", "hi")
    assert refused.returncode == 2, refused.err
    words = _as_bash_reads(_hinted_command(refused.err))
    assert words[:3] == [b"conversations", b"mv", os.fsencode(name)], (refused.err, words)


def test_a_pipe_or_a_folder_under_a_name_no_chat_takes_is_hinted_the_naming_rule_not_a_rename() -> None:
    """chat and run hinted the `conversations mv` of a pipe or a folder named my pipe.json, which mv then refused."""
    conversations_dir().mkdir(parents=True)
    os.mkfifo(conversations_dir() / "my pipe.json")
    (conversations_dir() / "my dir.json").mkdir()
    for name in ("my pipe", "my dir"):
        refused = run_localgen("run", "--conversation", name, "-n", "1", "hi", timeout=30)
        assert refused.returncode == 2 and refused.err == (
            f"localgen: error: '{name}' is not a valid conversation name (hint: start with an ASCII letter or digit, "
            f"then use ASCII letters, digits, '.', '_' and '-' (up to 100 characters), e.g. {name.replace(' ', '-')})"
            "\n"), refused.err


def test_commands_hinted_for_a_name_starting_with_a_dash_end_the_options_first() -> None:
    """`localgen conversations mv -x x`, `conversations rm -cut` and the listing's rename named the file as an
    option, which the command then refused."""
    (conversations_dir() / "-x.json").write_bytes(_save("notes", Turn("Hi", "Hello!")).read_bytes())
    (conversations_dir() / "-cut.json").write_text('{"turns": [')
    (record,) = [row for row in json.loads(run_localgen("conversations", "--json").out) if row["name"] == "-x"]
    assert record["problem"] == "invalid name: rename it (conversations mv -- -x x) to resume it"
    refused = run_localgen("run", "--conversation=-x", "-n", "1", "hi")
    assert refused.returncode == 2, refused.err
    command = _hinted_command(refused.err)
    assert command == "localgen conversations mv -- -x x", refused.err
    renamed = run_localgen(*shlex.split(command)[1:])
    assert renamed.returncode == 0 and (conversations_dir() / "x.json").is_file(), renamed.err
    shown = run_localgen("conversations", "show", "--", "-cut")
    assert shown.returncode == 1, shown.err
    command = shown.err.rpartition("(`")[2].partition("`)")[0]
    assert command == "localgen conversations rm -- -cut", shown.err
    words = shlex.split(command)
    deleted = run_localgen(*words[1:3], "-y", *words[3:])
    assert deleted.returncode == 0 and not (conversations_dir() / "-cut.json").exists(), deleted.err


def test_the_lock_a_refused_rename_of_a_name_no_chat_takes_leaves_goes_once_its_file_is_gone() -> None:
    """The lock file of my notes, left by a refused `conversations mv "my notes" seed`, was never swept: the sweep
    took only names of the naming rule."""
    copied = conversations_dir() / "my notes.json"
    copied.write_bytes(_save("seed", Turn("Hi", "Hello!")).read_bytes())
    refused = run_localgen("conversations", "mv", "my notes", "seed")
    assert refused.returncode == 2 and "a conversation named 'seed' already exists" in refused.err, refused.err
    lock = conversations_dir() / ".locks" / "my notes.lock"
    assert lock.is_file()
    copied.unlink()  # deleted by hand
    os.utime(lock, (time.time() - 3600, time.time() - 3600))
    assert run_localgen("conversations").returncode == 0
    assert not lock.exists(), "swept: its file is gone"
    assert (conversations_dir() / ".locks" / "seed.lock").exists(), "kept: seed is still saved"


def test_a_header_of_a_file_modified_in_the_future_is_kept_once_its_change_has_settled(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose modification time is in the future (touch -d tomorrow, rsync from a machine whose clock is ahead)
    was never settled: read again each time, and its header never kept on disk."""
    import gguf_builders as gb

    from localgen import file_versions, gguf_reader
    from localgen.quant_choice import read_local_header

    monkeypatch.setattr(file_versions, "SETTLED_S", 1.0, raising=False)
    reads: list[Path] = []
    real = gguf_reader.read_gguf
    monkeypatch.setattr(gguf_reader, "read_gguf", lambda path, **kw: reads.append(path) or real(path, **kw))
    path = gb.tiny_model(tmp_path / "m.gguf")
    tomorrow = time.time() + 86_400
    os.utime(path, (tomorrow, tomorrow))
    time.sleep(max(0.0, path.stat().st_ctime - time.time() + 1.05))
    first = read_local_header(path)
    assert [read_local_header(path) for _ in range(3)] == [first] * 3
    assert reads == [path], "read once: its change has settled"
    assert len(list((home / "cache" / "headers").glob("*.json"))) == 1, "and kept on disk"


def test_conversations_of_one_modification_time_are_listed_by_name_whatever_its_case() -> None:
    """Zebra came before apple: capitals sorted before every small letter."""
    text = _save("seed", Turn("Hi", "Hello!")).read_text()
    (conversations_dir() / "seed.json").unlink()
    for name in ("Zebra", "apple", "Apple", "mango"):
        path = conversations_dir() / f"{name}.json"
        path.write_text(text)
        os.utime(path, (1_700_000_000, 1_700_000_000))
    table = run_localgen("conversations")
    assert [line.split("\t")[0] for line in table.out.splitlines()[1:]] == ["Apple", "apple", "mango", "Zebra"]
