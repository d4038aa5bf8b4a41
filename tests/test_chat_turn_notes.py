"""What the chat says around a turn, in a real pseudo-terminal on the bundled model, and run's words that match
them: the note of an answer that fills the context (run's, as the chat's), /undo of a message with an attachment,
/model of a model too small for the last exchange, Ctrl-C amid /load, and the wrapped notes' line breaks."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from tests.chat_terminal import ESCAPE, end_chat
from tests.conftest import run_localgen
from tests.test_repl import TIMEOUT, Chat

# The greedy model never ends it by itself (the context does); complete after each ab: a cut is no error.
ENDLESS = ("--grammar", 'root ::= "ab" (" ab")*', "--temperature", "0")


def test_run_s_answer_that_fills_the_context_says_how_large_a_one_the_model_takes(tmp_path: Path,
                                                                                  bundled_model: Path) -> None:
    """run's answer stopped at the end of the context says the model takes up to 8,192 where its context is 96, and
    that the context is the most the model takes where it is (it said to raise --ctx-size, which that model
    refuses), in the chat's words."""
    from gguf_builders import copy_with_metadata

    larger = run_localgen("run", "-c", "96", *ENDLESS, "Say ab.")
    assert larger.returncode == 0, larger.err
    assert larger.err == ("localgen: stopped at the end of the context window (raise --ctx-size for longer output: up "
                          "to 8,192 for this model; it is 96 now)\n"), larger.err
    small = copy_with_metadata(bundled_model, tmp_path / "small.gguf", set_values={"llama.context_length": 96})
    most = run_localgen("run", "-m", str(small), *ENDLESS, "Say ab.")
    assert most.returncode == 0, most.err
    assert most.err == "localgen: stopped at the end of the context window (96 tokens, the most this model takes)\n", \
        most.err


def test_undo_of_a_message_sent_with_a_file_attaches_the_file_to_the_next_message_again(tmp_path: Path) -> None:
    """/undo of a message sent with /file says its file is attached to the next message again, and the next message
    carries it (it was dropped with the exchange); one sent with none leaves what is attached as it is."""
    notes = tmp_path / "notes.txt"
    notes.write_text("The secret word is plum.\n")
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        chat.command_words(f"/file {notes}", "to the next message")
        chat.ask("What is the secret word?")
        said = chat.command_words("/undo", "/file none drops it)")
        said = " ".join(ESCAPE.sub("", said).split())
        assert "dropped: '[notes.txt] What is the secret word?' (" in said, said
        assert f"; {notes} is attached to the next message again as sent; /file none drops it)" in said, said
        said = " ".join(ESCAPE.sub("", chat.command_words("/file", "(/file none drops it)")).split())
        assert f"attached to the next message: {notes} (25 characters) (/file none drops it)" in said, said
        turns = chat.ask("Say it again.")["turns"]
        assert len(turns) == 1 and turns[0]["attached"] == [{"name": str(notes), "characters": 25, "sent": 24}], turns
        assert turns[0]["user"] == "The secret word is plum.\n\nSay it again.", turns
        chat.ask("Thanks.")
        chat.command_words("/undo", "dropped: 'Thanks.'")
        chat.command_words("/file none", "no files are attached")  # (where it dropped notes.txt, attached again)
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_undo_in_a_conversation_loaded_attaches_the_files_its_record_gives_as_sent(tmp_path: Path) -> None:
    """/undo in a conversation loaded (the files this chat sent forgotten with it at /reset) attaches the files of
    the message it drops again, cut from the saved message by the sizes recorded, Windows line ends as sent: the
    next message is sent and recorded as it was, and /file of one of them finds it attached once."""
    notes, table, other = tmp_path / "notes.md", tmp_path / "a.csv", tmp_path / "b.csv"
    notes.write_bytes(b"# Notes\r\n\r\nThe secret word is plum.\r\n")
    table.write_bytes(b"a,b\r\n1,2\r\n\r\n")  # a blank line after it, as a file's paragraphs end
    other.write_bytes(b"x,y\r\r\n3,4\r\r\n")
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "3")
    try:
        for path in (notes, table, other):
            chat.command_words(f"/file {path}", "to the next message")
        sent = chat.ask("Count them.")
        chat.command("/reset", ">>>")
        chat.command_words(f"/load {sent['name']}", f"loaded {sent['name']}")
        said = " ".join(ESCAPE.sub("", chat.command_words("/undo", "/file none drops them)")).split())
        assert f"; {notes}, {table}, {other} are attached to the next message again as sent; /file none drops them)" \
            in said, said
        said = " ".join(ESCAPE.sub("", chat.command_words(f"/file {table}", "it is attached once")).split())
        said = " ".join(ESCAPE.sub("", chat.command_words("/file", "(/file none drops them)")).split())
        assert f"attached to the next message: {notes} (37 characters), {table} (12 characters), {other} (12 " \
               "characters) (/file none drops them)" in said, said
        again = chat.ask("Count them.")["turns"]
        assert len(again) == 1 and again[0]["user"] == sent["turns"][0]["user"] \
            and again[0]["attached"] == sent["turns"][0]["attached"], (again, sent)
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_undo_of_a_message_saved_without_its_files_sizes_says_how_to_attach_them(tmp_path: Path) -> None:
    """/undo of a message saved before each file's part of it was recorded says its files are not attached again,
    with how to attach them (stdin's text by a file /file takes); a file named with a ~ that is no user's home
    comes back as named, where its exchange was dropped from the chat, not its file, with an error."""
    home = tmp_path / "home"
    (home / "data" / "conversations").mkdir(parents=True)
    turns = [{"user": "draft text\n\nQ1", "answer": "A1", "attached": [{"name": "~draft.txt", "characters": 11,
                                                                         "sent": 10}], "typed": "Q1"},
             {"user": "piped\n\nQ2", "answer": "A2", "attached": [{"name": "-", "characters": 6}], "typed": "Q2"},
             {"user": "one\n\ntwo\n\nQ3", "answer": "A3", "attached": [{"name": "a.txt", "characters": 3},
                                                                        {"name": "b.txt", "characters": 3}],
              "typed": "Q3"}]
    path = home / "data" / "conversations" / "old.json"
    path.write_text(json.dumps({"format": 1, "name": "old", "turns": turns}))
    chat = Chat(home, "--resume", "old", "--no-markdown")
    try:
        said = " ".join(ESCAPE.sub("", chat.command_words("/undo", "attaches each again)")).split())
        assert ("(a.txt, b.txt are not attached again: the saved conversation holds their texts only as part of the "
                "message; /file attaches each again)") in said, said
        said = " ".join(ESCAPE.sub("", chat.command_words("/undo", "attaches it again)")).split())
        assert "(- is not attached again: the saved conversation holds its text only as part of the message; /file " \
            "PATH attaches it again)" in said, said
        said = " ".join(ESCAPE.sub("", chat.command_words("/undo", "/file none drops it)")).split())
        assert "; ~draft.txt is attached to the next message again as sent; /file none drops it)" in said, said
        assert json.loads(path.read_text())["turns"] == []
        said = " ".join(ESCAPE.sub("", chat.command_words("/file", "(/file none drops it)")).split())
        assert "attached to the next message: ~draft.txt (11 characters) (/file none drops it)" in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_file_of_the_text_a_run_piped_attached_again_by_undo_says_it_has_the_piped_text(tmp_path: Path) -> None:
    """/undo of a message a run was piped text for attaches that text again; /file of a file with that text is
    refused naming it the piped text."""
    home = tmp_path / "home"
    (home / "data" / "conversations").mkdir(parents=True)
    turns = [{"user": "piped\n\nQ1", "answer": "A1", "attached": [{"name": "(text)", "characters": 6, "sent": 5}],
              "typed": "Q1"}]
    (home / "data" / "conversations" / "old.json").write_text(json.dumps({"format": 1, "name": "old", "turns": turns}))
    (tmp_path / "n.txt").write_text("piped\n")
    chat = Chat(home, "--resume", "old", "--no-markdown", cwd=tmp_path)
    try:
        chat.command_words("/undo", "/file none drops it)")
        said = " ".join(ESCAPE.sub("", chat.command_words("/file n.txt", "not attached again")).split())
        assert "localgen: warning: n.txt has the same text as the piped text: it is not attached again" in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_model_too_small_for_the_last_exchange_says_so_with_the_way_back(tmp_path: Path, bundled_model: Path) -> None:
    """/model of a model whose context cannot hold the conversation's last exchange warns that the next message goes
    without it and /regen cannot ask it again, with the /model that goes back (it said only "now using"); the next
    message is answered without it."""
    from gguf_builders import copy_with_metadata

    small = copy_with_metadata(bundled_model, tmp_path / "small.gguf", set_values={"llama.context_length": 128})
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        chat.ask("Repeat these words: " + " ".join(f"word{i}" for i in range(120)))
        said = chat.command_words(f"/model {small}", "goes back to the model before")
        said = " ".join(ESCAPE.sub("", said).split())
        assert re.search(r"localgen: warning: the last exchange takes \d+ tokens, more than the 123 the context leaves "
                         r"for the conversation: the next message goes without it, and /regen cannot ask it again; "
                         r"/model smollm2-135m goes back to the model before", said), said
        assert len(chat.ask("Hi.")["turns"]) == 2
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def _wait_until_held(lock: Path) -> None:
    """Wait until a process holds the conversation of lock file lock (its pid written there)."""
    deadline = time.monotonic() + TIMEOUT
    while not lock.read_text():
        assert time.monotonic() < deadline, f"{lock} was never held"
        time.sleep(0.001)


def test_ctrl_c_amid_load_says_which_conversation_is_open_and_lets_the_other_go(tmp_path: Path) -> None:
    """Ctrl-C while /load reads a long conversation says the one open before is still open (it said only
    [interrupted]), and leaves the long one free: another chat resumes it, and this one loads it after."""
    home = tmp_path / "home"
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        chat.ask("Hi.")
        chat.command_words("/save long", "long")
        path = home / "data" / "conversations" / "long.json"
        saved = json.loads(path.read_text())
        turn = saved["turns"][0]
        saved["turns"] = [dict(turn, user=f"question {i} " + "lorem ipsum " * 40, answer="answer " * 40)
                          for i in range(20_000)]  # a load of a few seconds
        path.write_text(json.dumps(saved))
        chat.command_words("/save other", "other")
        lock = home / "data" / "conversations" / ".locks" / "long.lock"
        assert lock.read_text() == "", "long let go: its lock file names no holder"
        chat.child.sendline("/load long")
        _wait_until_held(lock)  # the load under way: the hold taken, the file still to read
        chat.child.sendintr()
        chat.expect_words("[interrupted: other is still the conversation open]")
        chat.sync()
        other = Chat(home, "--resume", "long", "--no-markdown", wait_for_prompt=False)
        try:
            other.expect_words("20,000 exchanges")
            other.sync()
            assert other.quit() == 0
        finally:
            end_chat(other)
        chat.command_words("/load long", "loaded long")
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_a_note_after_an_answer_breaks_its_line_without_a_space_at_the_break(tmp_path: Path) -> None:
    """The note after an answer, wider than the terminal, breaks between words with no space left at the end of a
    line (it kept one, as in "changes ⏎it)]"), as the chat's other lines break."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5", columns=50)
    try:
        start = len(chat.transcript.getvalue())
        chat.ask("Name a fruit.")
        shown = ESCAPE.sub("", chat.transcript.getvalue()[start:])
        note = shown[shown.index("[stopped at the limit"):]
        note = note[:note.index("]") + 1]
        assert " ".join(note.split()) == \
            "[stopped at the limit of 5 tokens (-n/--max-tokens; /set max_tokens changes it)]", note
        assert "\n" in note and " \r\n" not in note, repr(note)
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_the_context_end_note_after_an_answer_keeps_the_command_it_names_on_one_line(tmp_path: Path) -> None:
    """The note after an answer that fills the context, wider than a narrow terminal, breaks between words but never
    inside the command it names (it broke inside `localgen chat --resume ...`), as the chat's other messages do."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "-1", "-c", "160", columns=90)
    try:
        start = len(chat.transcript.getvalue())
        name = chat.ask("Write a long story about a dragon.")["name"]
        shown = ESCAPE.sub("", chat.transcript.getvalue()[start:]).replace("\r", "")
        note = shown[shown.index("[stopped at the end of the context window"):]
        note = note[:note.index(")]") + 2]
        command = f"`localgen chat --resume {name} --no-markdown -c SIZE`"
        assert command in " ".join(note.split()), note
        assert any(command in line for line in note.split("\n")), note
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_a_blank_file_given_to_chat_is_not_counted_among_those_attached(tmp_path: Path) -> None:
    """chat -f of a blank file and another said "2 files attached" where /file listed one: the blank one, warned
    about, is not attached (as /file attaches none), and /help says what /file alone does."""
    empty, notes = tmp_path / "empty.txt", tmp_path / "notes.txt"
    empty.write_text("")
    notes.write_text("The secret word is plum.\n")
    chat = Chat(tmp_path / "home", "-f", str(empty), "-f", str(notes), wait_for_prompt=False)
    try:
        chat.expect_words("1 file attached to your first message (/file none drops it)")
        chat.sync()
        said = " ".join(ESCAPE.sub("", chat.command_words("/file", "(/file none drops it)")).split())
        assert f"attached to the next message: {notes} (25 characters) (/file none drops it)" in said, said
        said = " ".join(ESCAPE.sub("", chat.command_words("/help", "alone, lists them")).split())
        assert "attach a file's text to the next message; none drops the attached files; alone, lists them" in said
        assert chat.quit() == 0
    finally:
        end_chat(chat)
