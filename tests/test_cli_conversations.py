"""`localgen conversations`: list, show, rename and delete saved conversations, in subprocesses over a private home."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from localgen.conversation import Conversation, Turn
from localgen.conversation_lock import hold, release
from localgen.conversation_store import conversations_dir, let_go, save_conversation
from tests.conftest import REPO_ROOT, popen_localgen, run_localgen, run_localgen_process, spawn_localgen

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def _save(name: str, *turns: Turn, system: str | None = None) -> Path:
    conversation = Conversation(name=name, system=system, turns=list(turns), model="smollm2-135m")
    path = save_conversation(conversation)
    let_go(conversation)
    return path


def test_with_none_saved_the_listing_says_how_they_come() -> None:
    empty = run_localgen("conversations")
    assert empty.returncode == 0 and empty.out == "" and "no saved conversations" in empty.err
    assert json.loads(run_localgen("conversations", "list", "--json").out) == []


@pytest.mark.parametrize("blocked", ["data/conversations", "data", "cache/prompts"])
def test_a_file_where_a_folder_belongs_is_named_not_listed_as_empty(home: Path, blocked: str) -> None:
    path = home / blocked
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a folder")
    listing = "cache" if blocked.startswith("cache") else "conversations"
    acting = ("cache", "clear") if listing == "cache" else ("run", "--continue", "hi")
    for args in ((listing,), (listing, "--json"), acting):
        result = run_localgen(*args)
        assert result.returncode == 1 and result.out == "", (args, result.err)
        assert f"cannot hold {'prompt' if listing == 'cache' else 'saved conversations'}" in result.err, result.err
        assert f"{path} is a file, where a folder should be" in result.err and "Traceback" not in result.err, result.err
    if listing == "cache":  # a run answers, and says once that its prompt cache is not used, where it saved nothing
        answered = run_localgen("run", "-n", "3", "--temperature", "0", "Say hello.")
        assert answered.returncode == 0 and answered.out.strip(), answered.err
        its = "its folder" if blocked == "cache/prompts" else "a folder"
        assert answered.err == f"localgen: warning: the prompt cache is not used: {path} is a file, where {its} " \
            "should be (move that file out of the way; LOCALGEN_PROMPT_CACHE_BYTES=0 turns the prompt cache off, and " \
            "warns no more)\n", answered.err


@pytest.mark.parametrize("blocked", ["data/conversations", "data"])
def test_a_file_where_a_folder_belongs_is_named_by_a_run_that_writes_there(home: Path, blocked: str) -> None:
    """A run that saves a conversation, or keeps itself for --continue, names the file in the way, not the error
    a folder's creation met ("File exists", "Not a directory") with a hint about disk space."""
    path = home / blocked
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a folder")
    saved = run_localgen("run", "--conversation", "q", "-n", "1", "hi")
    assert saved.returncode == 1 and saved.err.endswith(f"{path} is a file, where a folder should be (hint: move that "
                                                        "file out of the way)\n"), saved.err
    shown = run_localgen("conversations", "show", "q")  # as chat's /load and --resume read it
    assert shown.returncode == 1 and shown.err == (f"localgen: error: no saved conversation named 'q': {path} is a "
                                                   "file, where the conversations folder should be (hint: move that "
                                                   "file out of the way)\n"), shown.err
    if blocked == "data":
        kept = run_localgen("run", "-n", "1", "hi")
        assert kept.returncode == 0 and f"last-run.json: {path} is a file, where a folder should be" in kept.err


def test_a_dangling_link_in_place_of_the_data_folder_is_named_not_listed_as_empty(home: Path) -> None:
    """A data folder linked to a place not there (an unmounted disk) was listed as no saved conversations, exit 0,
    and a conversation asked for by name was said to be missing under "a file"."""
    from localgen.conversation_store import list_conversations, read_conversation
    from localgen.errors import LocalgenError

    data = home / "data"
    data.symlink_to(home / "unmounted")
    link = f"{data} is a link to {home}/unmounted, which is not there"
    hint = "point the link at a folder that is there, or remove it"
    listed = run_localgen("conversations")
    assert listed.returncode == 1 and listed.err == (f"localgen: error: {data}/conversations cannot hold saved "
                                                     f"conversations: {link} (hint: {hint})\n"), listed.err
    with pytest.raises(LocalgenError) as latest:  # chat --resume, run --continue
        list_conversations()
    assert latest.value.message == f"{data}/conversations cannot hold saved conversations: {link}"
    with pytest.raises(LocalgenError) as named:  # chat --resume NAME, conversations show NAME
        read_conversation("q")
    assert (named.value.message, named.value.hint) == (f"no saved conversation named 'q': {link}", hint)


@pytest.mark.parametrize(("looped", "target"), [("data/conversations", None), ("cache/prompts", None),
                                                ("cache/prompts", "unmounted")])
def test_a_folder_that_is_a_link_to_itself_or_to_nothing_is_named_not_an_internal_error(
        home: Path, looped: str, target: str | None) -> None:
    """A folder that is a link to itself (a loop of links) gave `internal error: OSError: [Errno 40] Too many levels
    of symbolic links` where it was listed; a run warns once, its answer out, that its prompt cache is not used, as
    where the link leads to a folder not there."""
    from localgen.conversation_store import list_conversations
    from localgen.errors import LocalgenError

    path = home / looped
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(path if target is None else home / target)
    keeps = "prompt cache entries" if looped.startswith("cache") else "saved conversations"
    link = f"{path} is a link to {path}, which leads into a loop of links" if target is None else \
        f"{path} is a link to {home}/{target}, which is not there"
    said = f"{path} cannot hold {keeps}: {link}"
    hint = "point the link at a folder that is there, or remove it"
    listing = ("cache", "cache clear") if looped.startswith("cache") else ("conversations", "conversations list",
                                                                           "run --continue hi")
    for args in listing:
        result = run_localgen(*args.split())
        assert result.returncode == 1 and result.err == f"localgen: error: {said} (hint: {hint})\n", (args, result.err)
    if looped.startswith("cache"):
        answered = run_localgen("run", "-n", "3", "--temperature", "0", "Say hello.")
        assert answered.returncode == 0 and answered.out.strip(), answered.err
        assert answered.err == f"localgen: warning: the prompt cache is not used: {link} ({hint}; " \
            "LOCALGEN_PROMPT_CACHE_BYTES=0 turns the prompt cache off, and warns no more)\n", answered.err
    else:
        with pytest.raises(LocalgenError) as latest:  # chat --resume
            list_conversations()
        assert (latest.value.message, latest.value.hint) == (said, hint)


def test_a_prompt_cache_folder_that_is_a_link_to_a_device_is_named_a_link_not_a_file(home: Path) -> None:
    """A prompt cache folder linked to /dev/null was called a file, and a run's warning named it twice."""
    path = home / "cache" / "prompts"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to("/dev/null")
    hint = "point the link at a folder that is there, or remove it"
    listed = run_localgen("cache")
    assert listed.returncode == 1 and listed.err == f"localgen: error: {path} cannot hold prompt cache entries: " \
        f"{path} is a link to /dev/null, where a folder should be (hint: {hint})\n", listed.err
    answered = run_localgen("run", "-n", "3", "--temperature", "0", "Say hello.")
    assert answered.returncode == 0 and answered.out.strip(), answered.err
    assert answered.err == f"localgen: warning: the prompt cache is not used: {path} is a link to /dev/null, where " \
        f"its folder should be ({hint}; LOCALGEN_PROMPT_CACHE_BYTES=0 turns the prompt cache off, and warns no " \
        "more)\n", answered.err


@pytest.mark.parametrize("target", [None, "gone.json"])
def test_a_last_run_record_that_is_a_link_to_nothing_is_named_so(home: Path, target: str | None) -> None:
    """A last-run.json that is a link to itself was refused with the OS's words and a hint to check its folder's
    permissions; one that is a link to a file not there was taken for no run kept."""
    record = home / "data" / "last-run.json"
    record.parent.mkdir(parents=True)
    record.symlink_to(record if target is None else home / target)
    said = f"{record}, which leads into a loop of links" if target is None else f"{home}/{target}, which is not there"
    continued = run_localgen("run", "--continue", "-n", "1", "hi")
    assert continued.returncode == 1 and continued.err == f"localgen: error: cannot read {record}: it is a link to " \
        f"{said} (hint: point the link at a file that is there, or remove it)\n", continued.err


def test_the_listing_shows_each_conversation_s_size_model_and_first_message() -> None:
    long_question = "Summarize this report about the harbour, the market and the library in three lines please."
    _save("report", Turn(long_question, "Done."), Turn("Shorter?", "Yes."))
    _save("greeting", Turn("Hi\tthere\nfriend", "Hello!"))
    (conversations_dir() / "broken.json").write_text("{not json")
    listed = run_localgen("conversations", "list")
    assert listed.returncode == 0, listed.err
    rows = [line.split("\t") for line in listed.out.splitlines()]
    assert rows[0] == ["NAME", "UPDATED", "EXCHANGES", "MODEL", "FIRST MESSAGE"]
    by_name = {row[0]: row for row in rows[1:]}
    assert by_name["report"][2:] == ["2", "smollm2-135m", long_question[:59].rstrip() + "…"]
    assert by_name["greeting"][2:] == ["1", "smollm2-135m", "Hi there friend"]
    assert by_name["broken"][2] == "-" and by_name["broken"][4] == "(damaged: not JSON at line 1, column 2: " \
        "expecting property name enclosed in double quotes)"
    records = {r["name"]: r for r in json.loads(run_localgen("conversations", "--json").out)}
    assert records["report"]["exchanges"] == 2 and records["report"]["first_message"] == long_question
    assert records["report"]["updated"].endswith("+00:00") and "problem" in records["broken"]
    assert [records["broken"][key] for key in ("exchanges", "model", "first_message")] == [None, None, None], \
        "what a damaged file holds is unknown, not 0 exchanges and an empty first message"
    assert json.loads(run_localgen("conversations", "list", "--json").out) == list(records.values())


def test_the_listing_s_help_says_the_first_message_is_a_one_line_preview() -> None:
    helped = run_localgen("conversations", "list", "--help")
    said = " ".join(helped.out.split())
    assert helped.returncode == 0 and "another control character \\xHH. The first message is a preview on one line: " \
        "runs of whitespace as one space, cut with … past 60 characters (--json has the whole text)." in said, said


def test_the_preview_cut_keeps_each_accent_with_its_letter() -> None:
    """A first message of letters with combining accents (as macOS and some keyboards write them) was cut between a
    letter and its accent: the preview ended e…, the accent lost."""
    _save("accents", Turn("e\u0301" * 80, "ok"))
    listed = run_localgen("conversations")
    preview = listed.out.splitlines()[1].split("\t")[4]
    assert listed.returncode == 0 and preview == "e\u0301" * 59 + "…", ascii(preview[-6:])


def test_a_file_named_against_the_rule_is_listed_saying_how_to_rename_it() -> None:
    """A file copied into the folder by hand under a name no command takes was passed over in silence."""
    path = _save("cafe", Turn("Hi", "Hello!"))
    wanted = {"my notes": "invalid name: rename it (conversations mv) to my-notes to resume it",
              "café": "invalid name: rename it (conversations mv) to cafe-2 to resume it",  # cafe.json is taken
              "a\x1bb": "invalid name: rename it (conversations mv) to a-b to resume it",
              "tab\there": "invalid name: rename it (conversations mv) to tab-here to resume it",
              "two\nlines\\": "invalid name: rename it (conversations mv) to two-lines to resume it"}
    listed_as = {"a\x1bb": "a\\x1bb", "tab\there": "tab\\there", "two\nlines\\": "two\\nlines\\\\"}  # escaped
    for name in [*wanted, ".hidden"]:  # a hidden file is none of the listing's
        (conversations_dir() / f"{name}.json").write_bytes(path.read_bytes())
    listed = run_localgen("conversations")
    assert listed.returncode == 0 and listed.err == "", listed.err
    rows = {row[0]: row[2:] for row in (line.split("\t") for line in listed.out.splitlines()[1:])}
    assert rows == {"cafe": ["1", "smollm2-135m", "Hi"], **{listed_as.get(name, name): ["-", "-", f"({problem})"]
                                                             for name, problem in wanted.items()}}
    records = {r["name"]: r for r in json.loads(run_localgen("conversations", "--json").out)}
    assert {name: records[name].get("problem") for name in records} == {"cafe": None, **wanted}
    assert [records["my notes"][key] for key in ("exchanges", "model", "first_message")] == [None, None, None]
    renamed = run_localgen("conversations", "mv", "my notes", "my-notes")  # as the listing says
    assert renamed.returncode == 0 and renamed.err == "localgen: renamed my notes to my-notes\n", renamed.err
    assert run_localgen("conversations", "show", "my-notes").out.startswith("# my-notes\n")


def test_another_format_version_is_kept_not_called_damaged_and_never_offered_for_removal() -> None:
    path = _save("newer", Turn("Hi", "Hello!"))
    path.write_text(path.read_text().replace('"format": 1', '"format": 2'))
    before = path.read_bytes()
    listed = run_localgen("conversations", "list")
    assert listed.out.splitlines()[1].split("\t")[4] == "(format 2, from another localgen version)"
    for args in (("run", "--continue", "-n", "2", "hi"), ("conversations", "show", "newer")):
        refused = run_localgen(*args)
        assert refused.returncode == 1 and refused.err == (
            f"localgen: error: {path} is in conversation format 2, which this localgen does not read (it reads "
            "format 1) (hint: it was left untouched for the localgen version that wrote it; go on with another "
            "conversation)\n"), refused.err
    assert path.read_bytes() == before


def test_a_new_conversation_named_like_a_saved_one_is_noted_as_a_possible_typo() -> None:
    _save("review", Turn("Look at this.", "Looks fine."))
    typo = run_localgen("run", "--conversation", "reveiw", "-n", "2", "--temperature", "0", "hi")
    assert typo.returncode == 0, typo.err
    assert typo.err.startswith("localgen: warning: starting a new conversation 'reveiw'; a saved one is named "
                               "'review' (--conversation review continues it)\n"), typo.err
    other = run_localgen("run", "--conversation", "groceries", "-n", "2", "--temperature", "0", "hi")
    assert other.returncode == 0 and "warning" not in other.err, other.err
    _save("a1", Turn("Look at this.", "Looks fine."))  # too short for a close match, the same but for case
    cased = run_localgen("run", "--conversation", "A1", "-n", "2", "--temperature", "0", "hi")
    assert cased.err.startswith("localgen: warning: starting a new conversation 'A1'; a saved one is named 'a1' "
                                "(--conversation a1 continues it)\n"), cased.err
    assert sorted(p.stem for p in conversations_dir().glob("*.json")) == ["A1", "a1", "groceries", "reveiw",
                                                                          "review"]


def test_show_of_a_damaged_file_points_at_rm() -> None:
    conversations_dir().mkdir(parents=True)
    (conversations_dir() / "bad.json").write_text("{")
    shown = run_localgen("conversations", "show", "bad")
    assert shown.returncode == 1 and shown.out == ""
    assert shown.err.endswith("(hint: it was left untouched: move it away or delete it (`localgen conversations rm "
                              "bad`))\n"), shown.err


@pytest.mark.parametrize("looped", [False, True])
def test_a_dangling_link_is_named_alike_by_show_run_and_rm(looped: bool) -> None:
    """A link whose file is not there, or that leads into a loop of links (once said to lead to a file not there)."""
    conversations_dir().mkdir(parents=True)
    link = conversations_dir() / "gone.json"
    link.symlink_to(link if looped else conversations_dir() / "nowhere.json")
    problem = f"a link to {link}, which leads into a loop of links" if looped else \
        f"a link to {conversations_dir() / 'nowhere.json'}, which is not there"
    listed = run_localgen("conversations")  # its file in a folder not mounted now, say: listed, saying why
    assert listed.returncode == 0 and listed.out.splitlines()[1].split("\t")[2:] == [
        "-", "-", f"(damaged: {problem})"], listed.out
    (record,) = json.loads(run_localgen("conversations", "--json").out)
    assert (record["name"], record["exchanges"], record["problem"]) == ("gone", None, problem)
    said = f"{link} is not a saved conversation ({problem})"
    shown = run_localgen("conversations", "show", "gone")
    assert shown.returncode == 1 and said in shown.err, shown.err
    assert "(`localgen conversations rm gone`)" in shown.err
    ran = run_localgen("run", "--conversation", "gone", "-n", "1", "hi")
    assert ran.returncode == 1 and said in ran.err, ran.err
    assert run_localgen("conversations", "rm", "gone", "--yes").returncode == 0
    assert not link.is_symlink()


@pytest.mark.parametrize("args", [("show", ""), ("show", "--json", ""), ("rm", "first", "", "-y")])
def test_an_empty_name_is_named_as_such_not_as_the_newest_nor_as_a_name_to_make(args: tuple[str, ...]) -> None:
    """show "$NAME" or rm "$NAME" with NAME not set: the name is empty, and the names are listed where the hint says
    (as run --conversation "" and chat --resume "" say), where it was told what a new name may be."""
    first = _save("first", Turn("Name a color.", "Blue."))
    refused = run_localgen("conversations", *args)
    assert refused.returncode == 2 and refused.out == "" and first.exists(), refused.err
    kept = "; nothing deleted" if args[0] == "rm" else ""  # rm of first and "": first is kept too
    assert refused.err == (f"localgen: error: the conversation name is empty{kept} (hint: give a saved one's name: "
                           "`localgen conversations` lists the saved ones; `localgen chat --resume` reopens the "
                           "latest)\n")


def test_show_without_a_name_prints_the_newest() -> None:
    empty = run_localgen("conversations", "show")
    assert empty.returncode == 1 and "there are no saved conversations" in empty.err, empty.err
    _save("older", Turn("Name a color.", "Blue."))
    _save("newer", Turn("Name a fish.", "Cod."))
    os.utime(conversations_dir() / "older.json", (1, 1))  # the listing's order is the files' times
    shown = run_localgen("conversations", "show")
    assert shown.returncode == 0 and shown.out.startswith("# newer\n") and "Cod." in shown.out, shown.out


def test_show_without_a_name_skips_a_damaged_newest_as_resume_does() -> None:
    _save("older", Turn("Name a color.", "Blue."))
    os.utime(conversations_dir() / "older.json", (1, 1))
    (conversations_dir() / "broken.json").write_text("{")
    for args in (("conversations", "show"), ("conversations", "show", "--json")):
        shown = run_localgen(*args)
        assert shown.returncode == 0 and "Blue." in shown.out, shown.err
        assert shown.err == (f"localgen: warning: skipped a damaged conversation: {conversations_dir() / 'broken.json'}"
                             " is not a valid saved conversation (its JSON ends before it is complete)\n"), shown.err
    (conversations_dir() / "older.json").write_text("[]")
    none = run_localgen("conversations", "show")
    assert none.returncode == 1 and none.out == "" and none.err.count("skipped a damaged conversation") == 2
    assert none.err.endswith("localgen: error: no saved conversation can be read (hint: `localgen conversations` "
                             "lists them, damaged ones marked)\n"), none.err


@pytest.mark.parametrize("unbuffered", ["", "1"])  # PYTHONUNBUFFERED=1: Python ignores a short write of stdout's
@pytest.mark.parametrize("args", [("conversations", "show", "long"), ("conversations", "show", "long", "--json")])
def test_show_to_a_reader_that_leaves_exits_141_as_run_does(args: tuple[str, ...], unbuffered: str) -> None:
    _save("long", *[Turn(f"Question {n}?", "An answer that goes on. " * 100) for n in range(100)])  # 240 KB
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    proc = popen_localgen([sys.executable, "-m", "localgen", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, cwd=REPO_ROOT, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)
    proc.stdout.close()  # `| head -c 10`
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141 and err == b"", err.decode()


def test_show_prints_the_transcript_and_json_the_saved_record() -> None:
    path = _save("recipe", Turn("How long do eggs boil?", "About **7** minutes."),
                 Turn("And soft?", "Four", interrupted=True), system="Be brief.")
    shown = run_localgen("conversations", "show", "recipe")
    assert shown.returncode == 0, shown.err
    assert shown.out.startswith("# recipe\n\nmodel smollm2-135m, 2 exchanges, started ")
    assert shown.out.endswith("## system\n\nBe brief.\n\n## user\n\nHow long do eggs boil?\n\n## assistant\n\n"
                              "About **7** minutes.\n\n## user\n\nAnd soft?\n\n## assistant\n\nFour\n\n"
                              "*(interrupted)*\n")
    record = json.loads(run_localgen("conversations", "show", "recipe", "--json").out)
    assert record == json.loads(path.read_text()), "the record as saved, its time included"
    missing = run_localgen("conversations", "show", "nope")
    assert missing.returncode == 1 and "no saved conversation named 'nope'" in missing.err
    saved = json.loads(path.read_text())
    saved["created"] = "2026-01-02T23:30:00+00:00"
    path.write_text(json.dumps(saved))
    tokyo = run_localgen("conversations", "show", "recipe", env={"TZ": "JST-9"})
    assert ", started 2026-01-03 08:30\n" in tokyo.out, "local time, as the listing shows times, not UTC's ISO text"
    assert "`localgen conversations` lists the saved ones" in missing.err


@pytest.mark.parametrize(("verb", "what", "message"), [
    ("delete", "2 conversations (a, b)", "deleting 2 conversations (a, b) needs confirmation"),  # conversations rm
    ("remove", "org/M-GGUF Q4_0 (1.0 MiB)", "removing org/M-GGUF Q4_0 (1.0 MiB) needs confirmation"),  # models rm
])
def test_a_removal_without_a_terminal_to_ask_says_what_needs_confirmation(monkeypatch: pytest.MonkeyPatch, verb: str,
                                                                         what: str, message: str) -> None:
    import io

    from localgen.cli_options import confirmed
    from localgen.errors import UsageError

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert confirmed(verb, what, yes=True, declined="nothing done")
    with pytest.raises(UsageError) as info:
        confirmed(verb, what, yes=False, declined="nothing done")
    assert (info.value.message, info.value.hint) == (message, "pass --yes (or -y) to go ahead where no terminal can "
                                                              "ask")


def test_rm_asks_refuses_what_is_open_and_deletes_only_whole_requests() -> None:
    first, second = _save("first", Turn("a", "b")), _save("second", Turn("c", "d"))
    unconfirmed = run_localgen("conversations", "rm", "first")
    assert unconfirmed.returncode == 2 and first.exists()
    assert "deleting 1 conversation (first) needs confirmation (hint: pass --yes (or -y)" in unconfirmed.err
    partly_unknown = run_localgen("conversations", "rm", "first", "nope", "--yes")
    assert partly_unknown.returncode == 1 and partly_unknown.err.startswith(
        "localgen: error: no saved conversation named 'nope'; nothing deleted (hint: "), partly_unknown.err
    assert first.exists(), "nothing is deleted when one name is wrong"
    assert hold(conversations_dir(), "second", hint="")
    try:
        busy = run_localgen("conversations", "rm", "first", "second", "-y")
    finally:
        release(conversations_dir(), "second")
    assert busy.returncode == 1 and "in use by another localgen chat or run" in busy.err
    assert "; nothing deleted (hint: " in busy.err, busy.err
    assert first.exists() and second.exists(), "all or none"
    bad_name = run_localgen("conversations", "rm", "first", "../second", "-y")
    assert bad_name.returncode == 2 and "not a valid conversation name; nothing deleted" in bad_name.err
    assert first.exists()
    alone = run_localgen("conversations", "rm", "nope", "--yes")
    assert alone.err.startswith("localgen: error: no saved conversation named 'nope' (hint: "), "one name: no others"
    (conversations_dir() / "broken.json").write_text("{not json")
    deleted = run_localgen("conversations", "rm", "first", "second", "first", "broken", "-y")
    assert deleted.returncode == 0
    assert deleted.err == "localgen: deleted first\nlocalgen: deleted second\nlocalgen: deleted broken\n", deleted.err
    assert not first.exists() and not second.exists() and not (conversations_dir() / "broken.json").exists()
    assert not list((conversations_dir() / ".locks").glob("*.lock")), "their lock files go too"


@pytest.mark.parametrize(("args", "command"), [
    (("logs",), "localgen conversations"),
    (("logs", "-n", "3"), "localgen conversations -n 3"),  # was: localgen conversations, the count left out
    (("logs", "--count=2", "--json"), "localgen conversations -n 2 --json"),
    (("logs", "-n", "0", "-t"), "localgen conversations"),  # llm's 0: all, which conversations lists without -n
    (("history", "--json"), "localgen conversations --json"),
    (("logs", "-n3"), "localgen conversations -n 3"),  # was: localgen conversations, the count stuck on left out
    (("logs", "-c"), "localgen conversations show"),  # llm's current conversation, the latest: was the listing
    (("logs", "--current", "--json", "-n", "2"), "localgen conversations show --json"),
])
def test_other_tools_names_for_the_history_point_here(args: tuple[str, ...], command: str) -> None:
    _save("work", Turn("Hi", "Hello!"))
    result = run_localgen(*args)
    assert result.returncode == 2 and result.err.endswith(f"(hint: use `{command}`)\n"), result.err
    listed = run_localgen(*command.split()[1:])
    assert listed.returncode == 0 and ("Hello!" if " show" in command else "work") in listed.out, listed.err


def test_show_tells_an_empty_system_prompt_from_none() -> None:
    _save("empty", Turn("Hi", "Hello."), system="")
    _save("none", Turn("Hi", "Hello."))
    empty, none = run_localgen("conversations", "show", "empty"), run_localgen("conversations", "show", "none")
    assert empty.returncode == 0 and none.returncode == 0, (empty.err, none.err)
    assert "## system\n\n*(empty: the template's default is left out)*\n\n## user\n\nHi\n" in empty.out, empty.out
    assert "## system" not in none.out, none.out


def test_a_conversation_s_file_name_means_the_conversation_everywhere() -> None:
    """`review.json` is the saved review, for run, show and rm alike, and a new `notes.json` is notes: never a
    conversation "review.json" (its file review.json.json) beside it."""
    _save("review", Turn("Hi", "Hello."))
    run = run_localgen("run", "--conversation", "review.json", "-n", "2", "hi")
    assert run.returncode == 0, run.err
    new = run_localgen("run", "--conversation", "Notes.JSON", "-n", "2", "hi")
    assert new.returncode == 0, new.err
    assert sorted(p.name for p in conversations_dir().iterdir() if p.suffix == ".json") == ["Notes.json",
                                                                                             "review.json"]
    shown = run_localgen("conversations", "show", "review.json")
    assert shown.returncode == 0 and shown.out.startswith("# review\n\nmodel smollm2-135m, 2 exchanges"), shown.out
    other = run_localgen("conversations", "show", "other.json")  # no saved "other": the usual hint
    assert other.err == ("localgen: error: no saved conversation named 'other' (hint: `localgen conversations` "
                         "lists the saved ones; `localgen chat --resume` reopens the latest)\n"), other.err
    chat = run_localgen("chat", "review.json")  # a prompt argument: the conversation's --resume is the hint
    assert chat.err == ("localgen: error: chat takes no prompt argument, and 'review.json' is a saved conversation "
                        "(hint: to continue it, use `localgen chat --resume review.json`)\n"), chat.err
    removed = run_localgen("conversations", "rm", "-y", "review.json", "review")
    assert removed.returncode == 0 and removed.err == "localgen: deleted review\n", removed.err
    assert not (conversations_dir() / "review.json").exists()


def test_a_conversation_named_with_json_by_an_earlier_version_is_still_reached_by_its_name() -> None:
    """A conversation literally named notes.json (file notes.json.json) is that name's, and its file's name too;
    notes.json reaches the plain notes only when there is no such conversation."""
    _save("notes.json", Turn("Old", "Kept."))
    _save("notes", Turn("New", "Plain."))
    for typed in ("notes.json", "notes.json.json"):
        shown = run_localgen("conversations", "show", typed)
        assert shown.returncode == 0 and "## user\n\nOld\n" in shown.out, (typed, shown.err)
    run = run_localgen("run", "--conversation", "notes.json", "-n", "1", "again")
    assert run.returncode == 0, run.err
    assert len(json.loads((conversations_dir() / "notes.json.json").read_text())["turns"]) == 2
    assert len(json.loads((conversations_dir() / "notes.json").read_text())["turns"]) == 1
    assert run_localgen("conversations", "rm", "-y", "notes.json").err == "localgen: deleted notes.json\n"
    shown = run_localgen("conversations", "show", "notes.json")  # now the plain notes
    assert shown.returncode == 0 and "## user\n\nNew\n" in shown.out, shown.err


def test_show_on_a_terminal_shows_control_characters_instead_of_obeying_them() -> None:
    import pexpect

    _save("colours", Turn("Say red.", "\x1b[31mred\x1b[0m\rover"))
    child = spawn_localgen("conversations", "show", "colours", env={**os.environ}, encoding="utf-8", timeout=60)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "^[[31mred^[[0m^Mover" in child.before
    piped = run_localgen("conversations", "show", "colours")
    assert "\x1b[31mred\x1b[0m\rover" in piped.out, "a pipe gets the text as saved"



def test_show_json_on_a_terminal_escapes_control_characters_keeping_the_json_s_value() -> None:
    """The record on a terminal: C1 and bidi controls as \\u escapes (a terminal obeys U+009B as CSI), the same JSON
    value, where they were shown as U+FFFD, which changed it; a pipe gets the saved bytes."""
    import pexpect

    answer = "\x9b31mred\u202egnp.exe\x7f"
    _save("controls", Turn("Say red.", answer))
    child = spawn_localgen("conversations", "show", "controls", "--json", env={**os.environ}, encoding="utf-8",
                           timeout=60)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "\\u009b31mred\\u202egnp.exe\\u007f" in child.before, child.before
    assert json.loads(child.before.replace("\r\n", "\n"))["turns"][0]["answer"] == answer
    piped = run_localgen("conversations", "show", "controls", "--json")
    assert json.loads(piped.out)["turns"][0]["answer"] == answer and answer in piped.out, "a pipe gets it as saved"


def test_an_answer_stdout_could_not_take_is_not_saved(home: Path) -> None:
    """README: a run that gets no answer (an error) leaves the conversation as it was, and a new one unsaved."""
    _save("kept", Turn("Name a color.", "Blue."))
    before = (conversations_dir() / "kept.json").read_bytes()
    for args in (("--conversation", "fresh"), ("--conversation", "kept")):
        with open("/dev/full", "wb") as full:
            proc = run_localgen_process([sys.executable, "-m", "localgen", "run", *args, "-n", "8", "Name an animal."],
                                        stdout=full, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=120,
                                        cwd=REPO_ROOT)
        assert proc.returncode == 1 and b"cannot write to stdout" in proc.stderr, proc.stderr
    assert not (conversations_dir() / "fresh.json").exists()
    assert (conversations_dir() / "kept.json").read_bytes() == before


def _answered_on_a_terminal(args: tuple[str, ...], question: str, answer: str) -> tuple[int, str]:
    """Run `localgen ARGS` with stdin and stdout on a pty, wait for its question and type answer, then Enter (or
    the key, for "^C" and "^D"); the exit status (or 128 + the signal) and everything the terminal showed after it."""
    import pexpect

    child = spawn_localgen(*args, env={**os.environ}, encoding="utf-8", timeout=60, dimensions=(24, 200))
    child.expect_exact(question)
    if answer in ("^C", "^D"):
        child.sendcontrol(answer[1].lower())
    else:
        child.sendline(answer)
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus if child.exitstatus is not None else 128 + child.signalstatus, child.before


def test_rm_on_a_terminal_asks_and_deletes_only_on_yes(home: Path) -> None:
    made = run_localgen("run", "--conversation", "walrus", "-n", "3", "hi")
    assert made.returncode == 0, made.err
    path = conversations_dir() / "walrus.json"
    assert path.is_file()
    question = "delete 1 conversation (walrus)? [y/N] "
    for answer in ("n", "", "maybe"):  # no, the default, anything else
        code, screen = _answered_on_a_terminal(("conversations", "rm", "walrus"), question, answer)
        assert code == 0 and "localgen: nothing deleted" in screen, screen
        assert path.is_file(), f"kept on {answer!r}"
    code, screen = _answered_on_a_terminal(("conversations", "rm", "walrus"), question, "^D")
    assert code == 0 and screen.lstrip(" ^D").startswith("\r\nlocalgen: nothing deleted"), "on a line of its own"
    code, screen = _answered_on_a_terminal(("conversations", "rm", "walrus"), question, "^C")
    assert code == 130 and screen.lstrip(" ^C") == "\r\nlocalgen: nothing deleted\r\n", screen
    assert path.is_file()
    code, screen = _answered_on_a_terminal(("conversations", "rm", "walrus"), question, "y")
    assert code == 0 and "deleted walrus" in screen, screen
    assert not path.exists()
    assert "walrus" not in run_localgen("conversations", "list").out


def test_rm_on_a_terminal_says_a_conversation_is_in_use_before_asking(home: Path) -> None:
    import pexpect

    path = _save("walrus", Turn("a", "b"))
    assert hold(conversations_dir(), "walrus", hint="")
    try:
        child = spawn_localgen("conversations", "rm", "walrus", env={**os.environ}, encoding="utf-8", timeout=60,
                               dimensions=(24, 200))
        child.expect(pexpect.EOF)
        child.close()
    finally:
        release(conversations_dir(), "walrus")
    assert child.exitstatus == 1 and "in use by another localgen chat or run" in child.before, child.before
    assert "[y/N]" not in child.before and path.exists(), "no question whose yes could not be done"


def test_a_conversation_rm_asks_about_is_said_to_be_in_use_by_that_rm_not_by_a_chat_or_run(home: Path) -> None:
    import pexpect

    path = _save("walrus", Turn("a", "b"))
    asking = spawn_localgen("conversations", "rm", "walrus", env={**os.environ}, encoding="utf-8", timeout=60,
                            dimensions=(24, 200))
    try:
        asking.expect_exact("delete 1 conversation (walrus)? [y/N] ")
        run = run_localgen("run", "--conversation", "walrus", "-n", "3", "hi")
        second = run_localgen("conversations", "rm", "walrus", "-y")
        asking.sendline("n")
        asking.expect(pexpect.EOF)
    finally:
        asking.close(force=True)
    busy = f"conversation 'walrus' is in use by `localgen conversations rm` (process {asking.pid})"
    assert run.returncode == 1 and busy in run.err and "chat or run" not in run.err, run.err
    assert second.returncode == 1 and busy in second.err, second.err
    assert "(hint: answer that `localgen conversations rm`'s question (or press Ctrl-C there) first, then try " \
           "again)" in second.err, second.err
    assert len(json.loads(path.read_text())["turns"]) == 1, "kept on a no, the run refused"
    again = run_localgen("run", "--conversation", "walrus", "-n", "3", "hi")
    assert again.returncode == 0, again.err


def test_list_n_lists_only_the_newest(home: Path) -> None:
    for age, name in enumerate(["newest", "middle", "oldest"]):
        path = _save(name, Turn(f"About {name}?", "Yes."))
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    for args in (("conversations", "list", "-n", "2"), ("conversations", "--limit", "2")):
        listed = run_localgen(*args)
        assert listed.returncode == 0, listed.err
        assert [line.split("\t")[0] for line in listed.out.splitlines()] == ["NAME", "newest", "middle"], listed.out
    records = json.loads(run_localgen("conversations", "list", "--json", "-n", "1").out)
    assert [r["name"] for r in records] == ["newest"]
    assert len(run_localgen("conversations", "list", "-n", "9").out.splitlines()) == 4, "more than there are: all"
    for count in ("0", "-3"):
        refused = run_localgen("conversations", "list", "-n", count)
        assert refused.returncode == 2 and refused.out == "", refused.err
        assert refused.err == (f"localgen: error: -n/--limit {count} lists nothing: it takes a count of at least 1 "
                               "(hint: e.g. `localgen conversations -n 5` lists the newest five; without -n, all of "
                               "them)\n")
    for count in ("0", "1"):  # before a subcommand it would be ignored: refused, 0 as much as 1
        misplaced = run_localgen("conversations", "-n", count, "list")
        assert misplaced.returncode == 2 and misplaced.out == "", (count, misplaced.err)
    misplaced = run_localgen("conversations", "-n", "2", "show", "newest")
    assert misplaced.returncode == 2 and "has no --limit option" in misplaced.err, misplaced.err


def test_show_gives_each_answer_s_details_from_a_real_run(home: Path) -> None:
    made = run_localgen("run", "--conversation", "facts", "-n", "6", "--temperature", "0",
                        "Tell me about the moon.")
    assert made.returncode == 0, made.err
    shown = run_localgen("conversations", "show", "facts")
    assert shown.returncode == 0, shown.err
    assert re.search(r"\n\n\*smollm2-135m · 6 tokens · \d+\.\d s · \d+ tok/s · stopped at the token limit\*\n$",
                     shown.out), shown.out
    (turn,) = json.loads(run_localgen("conversations", "show", "facts", "--json").out)["turns"]
    assert turn["finish_reason"] == "length" and turn["model"] == "smollm2-135m" and turn["completion_tokens"] == 6
    assert turn["prompt_tokens"] > 6 and turn["duration_s"] > 0 and turn["decode_tokens_per_s"] > 0
    assert turn["interrupted"] is False


def test_an_answer_cut_short_by_a_closed_pipe_is_saved_interrupted_and_said_to_be(home: Path) -> None:
    """`localgen run --conversation NAME "..." | head -c 5`: the reader goes after five bytes."""
    proc = popen_localgen([sys.executable, "-m", "localgen", "run", "--conversation", "story", "--temperature", "0",
                           "-n", "400", "Write a long story about a robot."], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    seen = proc.stdout.read(5)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == b"", err.decode()
    (turn,) = json.loads((conversations_dir() / "story.json").read_text())["turns"]
    assert turn["interrupted"] is True and turn["finish_reason"] == "interrupted", turn
    assert turn["answer"].encode().startswith(seen) and 0 < turn["completion_tokens"] < 400
    shown = run_localgen("conversations", "show", "story")
    assert re.search(r"\*smollm2-135m · \d+ tokens? · [^*]* · interrupted\*\n$", shown.out), shown.out
    going_on = run_localgen("run", "--continue", "-n", "2", "--temperature", "0", "Go on.")
    assert going_on.returncode == 0, going_on.err
    assert "localgen: the last answer in conversation 'story' was interrupted; the model sees it as far as it " \
           "came\n" in going_on.err
    again = run_localgen("run", "--continue", "-n", "2", "--temperature", "0", "And then?")
    assert again.returncode == 0 and "was interrupted" not in again.err, "a whole answer is not noted"


def test_show_on_a_terminal_dims_each_answer_s_details() -> None:
    import pexpect

    from localgen.conversation import AnswerDetails

    _save("dim", Turn("Say hi.", "Hi!", details=AnswerDetails(finish_reason="stop", model="smollm2-135m",
                                                              completion_tokens=3, duration_s=0.2,
                                                              decode_tokens_per_s=70.0)))
    for env, line in (({}, "\x1b[2msmollm2-135m · 3 tokens · 0.2 s · 70 tok/s\x1b[0m"),
                      ({"NO_COLOR": "1"}, "*smollm2-135m · 3 tokens · 0.2 s · 70 tok/s*")):
        child = spawn_localgen("conversations", "show", "dim", env={**os.environ, **env}, encoding="utf-8",
                               timeout=60)
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0 and f"Hi!\r\n\r\n{line}\r\n" in child.before, repr(child.before)


def test_show_marks_an_answer_with_no_text_instead_of_leaving_a_blank() -> None:
    import pexpect

    _save("blank", Turn("Say nothing.", ""), Turn("Say spaces.", " \n "), Turn("Hi", "Hello."), system="\n\n  ")
    shown = run_localgen("conversations", "show", "blank")
    assert shown.returncode == 0, shown.err
    assert "## system\n\n*(whitespace only)*\n\n## user" in shown.out, shown.out
    assert ("## user\n\nSay nothing.\n\n## assistant\n\n*(empty answer)*\n\n## user\n\nSay spaces.\n\n## assistant\n\n"
            "*(an answer of whitespace only)*\n\n## user\n\nHi\n\n## assistant\n\nHello.\n") in shown.out, shown.out
    assert json.loads(run_localgen("conversations", "show", "blank", "--json").out)["turns"][1]["answer"] == " \n ", \
        "the record keeps the text as saved"
    colour = {key: value for key, value in os.environ.items() if key != "NO_COLOR"}
    child = spawn_localgen("conversations", "show", "blank", env=colour, encoding="utf-8", timeout=60)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "## assistant\r\n\r\n\x1b[2m(empty answer)\x1b[0m\r\n" in child.before, \
        repr(child.before)
