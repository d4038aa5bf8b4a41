"""Small promises of `localgen bench` and `localgen conversations`, each checked end to end: the real engine on the
bundled model, real files, real subprocesses."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from localgen.conversation import Conversation, Turn
from localgen.conversation_store import conversations_dir, let_go, save_conversation
from localgen.storage import temp_name
from tests.conftest import REPO_ROOT, run_localgen, spawn_localgen


def _saved(names: list[str]) -> None:
    """Save a conversation of one exchange under each name."""
    for name in names:
        conversation = Conversation(name=name, turns=[Turn("Hi.", "Hello.")], model="smollm2-135m")
        save_conversation(conversation)
        let_go(conversation)


def test_the_listing_on_a_terminal_shows_a_title_s_controls_as_show_does(home: Path) -> None:
    import pexpect

    said = "Say \x1b[31mred\x07 \x9b1m a\x0bb\x0cc\x1fd\x85e"
    conversation = Conversation(name="colours", turns=[Turn(said, "Red.")], model="smollm2-135m")
    save_conversation(conversation)
    let_go(conversation)
    shown = []
    terminal_env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}  # the pty's
    for args in (("conversations",), ("conversations", "show", "colours")):
        child = spawn_localgen(*args, env=terminal_env, encoding="utf-8", timeout=60, dimensions=(24, 200))
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, child.before
        shown.append(child.before)
    listing, transcript = shown
    assert "Say ^[[31mred^G \ufffd1m a^Kb^Lc^_d\ufffde" in transcript, transcript
    assert "Say ^[[31mred^G \ufffd1m a^Kb^Lc^_d\ufffde" in listing, \
        f"the listing shows them as show does, VT and NEL too, which str.split() takes for spaces: {listing}"


def test_a_pipe_named_as_a_conversation_is_listed_as_not_a_file_and_never_waited_on(home: Path) -> None:
    _saved(["kept"])
    os.mkfifo(conversations_dir() / "pipe.json")
    listed = run_localgen("conversations", "--json", timeout=30)
    assert listed.returncode == 0, listed.err
    assert {row["name"]: row["problem"] for row in json.loads(listed.out)} == {"kept": None, "pipe": "not a file"}
    table = run_localgen("conversations", timeout=30)
    assert "pipe\t" in table.out and "\t-\t-\t(damaged: not a file)\n" in table.out, table.out
    shown = run_localgen("conversations", "show", "pipe", timeout=30)
    assert shown.returncode == 1 and "pipe.json is not a saved conversation (not a file)" in shown.err
    assert run_localgen("conversations", "rm", "-y", "pipe", timeout=30).returncode == 0
    assert not os.path.lexists(conversations_dir() / "pipe.json")


def test_mv_onto_a_folder_says_it_is_a_folder_not_a_conversation_to_force(home: Path) -> None:
    _saved(["kept"])
    (conversations_dir() / "box.json").mkdir()
    moved = run_localgen("conversations", "mv", "kept", "box")
    assert moved.returncode == 1 and "box.json is a folder, not a saved conversation" in moved.err, moved.err
    assert "--force" not in moved.err, "no --force replaces a folder"
    assert (conversations_dir() / "kept.json").is_file() and (conversations_dir() / "box.json").is_dir()


def test_the_json_listing_gives_no_first_message_for_a_conversation_without_an_exchange(home: Path) -> None:
    conversation = Conversation(name="kept", system="Be brief.", turns=[], model="smollm2-135m")  # as /undo leaves it
    save_conversation(conversation)
    let_go(conversation)
    listed = run_localgen("conversations", "--json")
    assert listed.returncode == 0, listed.err
    (record,) = json.loads(listed.out)
    assert (record["exchanges"], record["first_message"]) == (0, None), "no exchange: no first message, as null"
    assert "\t0\tsmollm2-135m\t(empty)\n" in run_localgen("conversations").out, "the table says (empty)"


def test_bench_s_table_on_a_terminal_shows_a_model_path_s_controls(tmp_path: Path, bundled_model: Path) -> None:
    import pexpect

    model = tmp_path / "m\x1b[31mred.gguf"
    model.symlink_to(bundled_model)
    args = ("bench", "-m", str(model), "-p", "0", "-n", "1", "-r", "1", "-t", "1")
    child = spawn_localgen(*args, env={**os.environ}, encoding="utf-8", timeout=120, dimensions=(24, 200))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert "\nmodel " in child.before and "\x1b[31mred" not in child.before, child.before
    assert f"model {tmp_path}/m^[[31mred.gguf ({tmp_path}/m^[[31mred.gguf)" in child.before, child.before
    piped = run_localgen(*args)
    assert piped.returncode == 0 and f"model {model} ({model})\n" in piped.out, "a pipe gets it as it is"


def _rm_with_open_files_limited(names: list[str], soft: int, hard: int) -> subprocess.CompletedProcess[str]:
    """`localgen conversations rm -y NAMES` in a process whose limits of open files are soft (ulimit -n) and hard
    (ulimit -Hn)."""
    return subprocess.run([sys.executable, "-m", "localgen", "conversations", "rm", "-y", *names], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=120, stdin=subprocess.DEVNULL,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))


def test_rm_of_more_conversations_than_open_files_allow_raises_the_limit_or_says_so(home: Path) -> None:
    names = [f"old-{number}" for number in range(300)]
    _saved(names)
    refused = _rm_with_open_files_limited(names, 256, 300)
    assert refused.returncode == 1, refused.stderr
    assert re.fullmatch(r"localgen: error: deleting 300 conversations at once needs more open files than this "
                        r"process may have \(300, ulimit -Hn\); nothing deleted \(hint: delete at most (\d+) at a "
                        r"time: `xargs -n \1 localgen conversations rm -y`\)\n", refused.stderr), \
        f"the hard limit binds, which the soft one, ulimit -n's 256, was raised to: {refused.stderr}"
    assert len(list(conversations_dir().glob("*.json"))) == 300, "all or none"
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 512:
        pytest.skip(f"this machine's hard limit of open files ({hard}) is too low to raise the soft one")
    deleted = _rm_with_open_files_limited(names, 256, hard)
    assert deleted.returncode == 0, deleted.stderr
    assert not list(conversations_dir().glob("*.json")), "the soft limit raised toward the hard one, as needed"


def test_an_error_shows_a_carriage_return_in_a_path_as_a_space(tmp_path: Path) -> None:
    result = run_localgen("run", "-m", f"{tmp_path}/notes\rmodel\r\nfile.gguf", "hi", timeout=30)
    assert result.returncode == 1
    assert f"no such model file: {tmp_path}/notes model file.gguf (hint:" in result.err, \
        f"line ends are spaces on one line, a Windows one a single space: {result.err!r}"


def test_a_ctrl_c_part_way_through_rm_leaves_each_conversation_deleted_said_and_the_rest_kept(home: Path) -> None:
    kept = Conversation(name="a-conversation-with-a-long-name-0", turns=[Turn("Hi.", "Hello.")], model="smollm2-135m")
    save_conversation(kept)
    let_go(kept)
    text = (conversations_dir() / f"{kept.name}.json").read_text()
    names = [f"a-conversation-with-a-long-name-{number}" for number in range(2500)]  # 100 KB of lines: a pipe holds 64
    for name in names[1:]:
        (conversations_dir() / f"{name}.json").write_text(text)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < len(names) + 100:
        pytest.skip(f"this machine's hard limit of open files ({hard}) is too low to hold {len(names)} locks")
    with subprocess.Popen([sys.executable, "-m", "localgen", "conversations", "rm", "-y", *names], cwd=REPO_ROOT,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as process:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first == f"localgen: deleted {names[0]}\n", "each is said as it is deleted, not once all are"
        process.send_signal(signal.SIGINT)  # it writes no more than a full pipe holds before it sees the signal
        rest = process.stderr.read()
    assert process.returncode == 130, rest
    *deleted, last = (first + rest).splitlines()
    said = [line.removeprefix("localgen: deleted ") for line in deleted]
    assert len(said) < len(names) and said == names[:len(said)], rest[-300:]
    assert last == f"localgen: stopped; {len(names) - len(said):,} conversations kept", rest[-300:]
    left = sorted(path.stem for path in conversations_dir().glob("*.json"))
    assert left == sorted(names[len(said):]), "each one said is deleted, each other one kept"


def test_a_pipe_under_a_name_no_command_takes_is_listed_as_not_a_file_without_a_rename(home: Path) -> None:
    conversations_dir().mkdir(parents=True)
    os.mkfifo(conversations_dir() / "my notes.json")
    listed = run_localgen("conversations", "--json", timeout=30)
    assert listed.returncode == 0, listed.err
    assert [(row["name"], row["problem"]) for row in json.loads(listed.out)] == [("my notes", "not a file")], \
        "no rename makes a pipe one to open"
    assert "\t(damaged: not a file)\n" in run_localgen("conversations", timeout=30).out


def test_rm_of_several_conversations_removes_the_temp_files_their_killed_saves_left_and_no_other(home: Path) -> None:
    _saved(["first", "second", "third", "other"])
    folder = conversations_dir()
    killed = {name: folder / temp_name(folder / f"{name}.json") for name in ("first", "second", "third", "other")}
    for path in killed.values():  # just now: no sweep of stale ones takes them, only one of a conversation held
        path.write_text("{")
    deleted = run_localgen("conversations", "rm", "-y", "first", "second", "third", timeout=30)
    assert deleted.returncode == 0, deleted.err
    assert sorted(path.name for path in folder.iterdir() if path.is_file()) == sorted(
        ["other.json", killed["other"].name]), "each deleted one's leftover is gone in the one sweep; another's kept"


def test_rm_under_a_limit_of_open_files_of_64_or_less_deletes_what_fits_and_its_hint_works(home: Path) -> None:
    names = [f"old-{number}" for number in range(40)]
    _saved(names)
    one = _rm_with_open_files_limited(names[:1], 60, 60)
    assert (one.returncode, one.stderr) == (0, "localgen: deleted old-0\n"), "one lock fits in 60 open files"
    refused = _rm_with_open_files_limited(names[1:], 40, 40)
    hinted = re.fullmatch(r"localgen: error: deleting 39 conversations at once needs more open files than this "
                          r"process may have \(40, ulimit -Hn\); nothing deleted \(hint: delete at most (\d+) at a "
                          r"time: `xargs -n \1 localgen conversations rm -y`\)\n", refused.stderr)
    assert refused.returncode == 1 and hinted, refused.stderr
    most = int(hinted.group(1))
    assert 1 <= most < 39, refused.stderr
    followed = _rm_with_open_files_limited(names[1:1 + most], 40, 40)
    assert followed.returncode == 0, f"the hint is one that works: {followed.stderr}"
    assert sorted(path.stem for path in conversations_dir().glob("*.json")) == sorted(names[1 + most:])


def test_rm_under_a_limit_of_open_files_that_holds_no_lock_gives_no_hint_to_delete_fewer(home: Path) -> None:
    _saved(["kept"])
    refused = _rm_with_open_files_limited(["kept"], 6, 6)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr == ("localgen: error: deleting 1 conversation at once needs more open files than this "
                              "process may have (6, ulimit -Hn); nothing deleted (hint: run it where more files may "
                              "be open than 6 (`ulimit -Hn` prints the limit))\n"), "one, and no xargs -n 0"
    assert (conversations_dir() / "kept.json").is_file()


def _rm_with_unlink_patched(names: list[str], patch: str) -> subprocess.CompletedProcess[str]:
    """`localgen conversations rm -y NAMES` in a process whose Path.unlink runs patch first (Python source with self,
    the path, and unlink, the real one, in scope)."""
    source = ("import errno, os, pathlib, signal, sys\n"
              "unlink = pathlib.Path.unlink\n"
              "def patched(self, missing_ok=False):\n"
              + "".join(f"    {line}\n" for line in patch.splitlines()) +
              "    return unlink(self, missing_ok=missing_ok)\n"
              "pathlib.Path.unlink = patched\n"
              "sys.argv = ['localgen', 'conversations', 'rm', '-y', *sys.argv[1:]]\n"
              "from localgen.launcher import main\n"
              "main()\n")
    return subprocess.run([sys.executable, "-c", source, *names], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_an_error_part_way_through_rm_says_how_many_conversations_are_kept(home: Path) -> None:
    _saved(["c385", "c386", "c387"])
    failed = _rm_with_unlink_patched(["c385", "c386", "c387"], "if self.name == 'c386.json':\n"
                                     "    raise PermissionError(errno.EPERM, 'Operation not permitted')")
    assert failed.returncode == 1, failed.stderr
    assert failed.stderr == (f"localgen: deleted c385\nlocalgen: error: could not delete {conversations_dir()}/"
                             "c386.json: Operation not permitted; 2 conversations kept (hint: check the permissions "
                             "of its folder)\n"), "the one that failed and the one after it are kept, and said to be"
    assert sorted(path.stem for path in conversations_dir().glob("*.json")) == ["c386", "c387"]


def test_a_ctrl_c_as_rm_deletes_its_last_conversation_stops_nothing(home: Path) -> None:
    _saved(["first", "last"])
    deleted = _rm_with_unlink_patched(["first", "last"], "if self.name == 'last.json':\n"
                                      "    os.kill(os.getpid(), signal.SIGINT)")
    assert (deleted.returncode, deleted.stderr) == (0, "localgen: deleted first\nlocalgen: deleted last\n"), \
        "all are deleted: nothing is left to stop or keep"
    assert not list(conversations_dir().glob("*.json"))


def test_rm_deletes_a_pipe_listed_under_a_name_no_other_command_takes(home: Path) -> None:
    _saved(["kept"])
    os.mkfifo(conversations_dir() / "my notes.json")
    (conversations_dir() / "copied in.json").write_text("{}")
    (conversations_dir().parent / "outside.json").write_text("{}")
    assert "my notes\t" in run_localgen("conversations", timeout=30).out
    for escaping in ("../outside", "..", ".hidden", "a/b", "a\\b"):
        refused = run_localgen("conversations", "rm", "-y", escaping, timeout=30)
        assert refused.returncode == 2 and "is not a valid conversation name" in refused.err, refused.err
    deleted = run_localgen("conversations", "rm", "-y", "my notes", "copied in.json", timeout=30)
    assert deleted.returncode == 0, deleted.err
    assert deleted.err == "localgen: deleted my notes\nlocalgen: deleted copied in\n"
    assert sorted(path.name for path in conversations_dir().iterdir() if not path.name.startswith(".")) == \
        ["kept.json"], "each is deleted by the name the listing gives it (or its file's)"
    assert (conversations_dir().parent / "outside.json").is_file()


def test_rm_deletes_a_file_whose_name_holds_a_backslash_or_a_tab_typed_as_the_shell_types_it(home: Path) -> None:
    """A file copied in as back\\slash.json or with a tab in its name could not be deleted under any spelling: a
    backslash was refused as a path separator, which on this system it is not."""
    _saved(["kept"])
    for name in ("back\\slash", "tab\tx"):
        (conversations_dir() / f"{name}.json").write_text("{}")
    deleted = run_localgen("conversations", "rm", "-y", "back\\slash", "tab\tx", timeout=30)
    assert deleted.returncode == 0, deleted.err
    assert sorted(path.name for path in conversations_dir().iterdir() if not path.name.startswith(".")) == \
        ["kept.json"], deleted.err
