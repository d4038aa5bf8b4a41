"""The chat's saved conversations in a real pseudo-terminal, on the real bundled model: names typed as their
files', and what a chat says about its conversation."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pexpect

from tests.chat_terminal import end_chat
from tests.conftest import run_localgen, user_registry
from tests.test_repl import Chat, _chat_with_an_unsaved_change, spawn_chat


def test_save_load_and_resume_take_a_file_name_as_the_conversation_s(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "1")
    try:
        chat.ask("Name a color.")
        chat.command_words("/save notes.json", f"saved to {folder / 'notes.json'}")
        chat.command("/reset", "new conversation")
        chat.command_words("/load notes.json", "loaded notes: 1 exchange")
        assert not (folder / "notes.json.json").exists()
        assert chat.quit() == 0
    finally:
        end_chat(chat)
    resumed = Chat(home, "--resume", "notes.json", "-n", "1")
    try:
        assert "resumed notes: 1 exchange" in resumed.transcript.getvalue()
        assert resumed.quit() == 0
    finally:
        end_chat(resumed)


def test_load_of_a_conversation_whose_model_file_is_gone_offers_no_switch_to_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    gone = tmp_path / "moved-away.gguf"
    for name, model in (("gone", str(gone)), ("named", "smollm2-135m-other")):
        record = {"format": 1, "name": name, "model": model, "turns": [{"user": "Hi", "answer": "Hello."}]}
        (folder / f"{name}.json").write_text(json.dumps(record))
    chat = Chat(home, "--no-markdown", "-n", "1")
    try:
        chat.command_words("/load gone", "loaded gone:")
        said = " ".join(chat.transcript.getvalue().split())
        assert f"it was saved with {gone}, which is no longer there, and goes on with smollm2-135m" in said, said
        assert "/model" not in said.rpartition("/load gone")[2], said
        chat.command_words("/load named", "(/model smollm2-135m-other to switch)")
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_changes_a_save_missed_can_be_saved_under_another_name_before_leaving(tmp_path: Path) -> None:
    home = tmp_path / "home"
    chat, blocked = _chat_with_an_unsaved_change(home)
    try:
        chat.command_words("/exit", "/save NAME saves them under another name, /exit again leaves without them")
        chat.command_words("/save kept", "saved to")
        chat.child.sendline("/exit")  # nothing unsaved now: it ends at once
        chat.child.expect(pexpect.EOF, timeout=30)
        chat.child.close()
        assert chat.child.exitstatus == 0 and blocked.is_dir()
        kept = json.loads((home / "data" / "conversations" / "kept.json").read_text())
        assert [turn["user"] for turn in kept["turns"]] == ["Name a color.", "Name a fruit."]
    finally:
        end_chat(chat)


def test_resume_with_another_system_prompt_says_which_one_it_replaces(tmp_path: Path) -> None:
    """chat --resume NAME -s X says, as run --conversation NAME -s X does, which system prompt X replaces; the same
    one again is said nothing of."""
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    record = {"format": 1, "name": "pirate", "system": "You are a pirate.",
              "turns": [{"user": "Hi", "answer": "Ahoy."}]}
    (folder / "pirate.json").write_text(json.dumps(record))
    for system, note in (("You are a cat.", "localgen: conversation 'pirate' now has system prompt 'You are a cat.' "
                                            "instead of 'You are a pirate.'"), ("You are a cat.", None)):  # saved
        chat = Chat(home, "--resume", "pirate", "-s", system, "--no-markdown", "-n", "1")
        try:
            said = " ".join(chat.transcript.getvalue().split())
            assert f"resumed pirate: 1 exchange, system prompt {system!r}" in said, said
            assert (note in said) if note else "instead of" not in said, said
            assert chat.quit() == 0
        finally:
            end_chat(chat)


def test_resume_alone_goes_on_from_the_last_plain_run_in_a_context_that_holds_it(tmp_path: Path) -> None:
    """`chat --resume` continues the last plain run when it is newer than every saved conversation, as run
    --continue does, with a context sized for the whole conversation (models.toml's small default raised for it);
    numbers, which take more tokens than their size suggests, get the model loaded again with a context that holds
    them, in the run and in the chat."""
    home = tmp_path / "home"
    user_registry(home, "[models.smollm2-135m]\ncontext = 128\n")
    numbers = " ".join(str(n * 37 % 1000) for n in range(50))  # about 195 tokens in 195 bytes
    for prompt, tokens in (("Repeat after me: " + "river stone cloud " * 50, 150), (f"Repeat: {numbers}", 195)):
        first = run_localgen("run", prompt, "-n", "2", "--temperature", "0", env={"LOCALGEN_HOME": str(home)})
        assert first.returncode == 0 and ("loading the model again" in first.err) == (tokens > 150), first.err
        chat = Chat(home, "--resume", "--no-markdown", "-n", "1", "--temperature", "0")
        try:
            said = " ".join(chat.transcript.getvalue().split())
            name = re.search(r"continuing the last run \"[^\"]*\", now saved as conversation '(chat-[\d-]+)'", said)
            assert name is not None, said
            assert f"resumed {name[1]}: 1 exchange" in said, said
            assert ("loading the model again" in said) == (tokens > 150), said
            shown = chat.command("/show info", "plan:")
            context = int(re.search(r"context: ([\d,]+) tokens", shown)[1].replace(",", ""))
            assert context > tokens + 100, shown
            state = chat.ask("And?")
            assert "left the model's context" not in chat.transcript.getvalue()
            assert state["name"] == name[1] and state["turns"][-1]["prompt_tokens"] > tokens, state["turns"][-1]
            assert chat.quit() == 0
        finally:
            end_chat(chat)


def test_keys_typed_while_the_chat_waits_on_a_pipe_it_attaches_are_not_echoed(tmp_path: Path) -> None:
    """The chat's terminal is out of line mode from the start, before the files it attaches are read: keys typed
    while it waits on a pipe given with -f are not echoed, and wait for the first prompt (Ctrl-D then quits)."""
    fifo = tmp_path / "notes.fifo"
    os.mkfifo(fifo)
    child = spawn_chat(tmp_path / "home", "--no-markdown", "-f", str(fifo))
    try:
        child.expect_exact("waiting for")
        assert not child.getecho(), "the terminal echoes keys while the chat waits on the pipe"
        child.send("zqx\x15\x04")  # a word, Ctrl-U (the prompt clears it), Ctrl-D (quits)
        fifo.write_text("Meeting at noon.\n")
        child.expect(pexpect.EOF)
        child.close()
        screen = child.before
        assert child.exitstatus == 0, screen
        assert "localgen chat with" in screen
        assert "zqx" not in screen, "typed keys were echoed while the chat started"
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_leaving_names_the_saved_conversation_and_how_to_go_on_with_it(tmp_path: Path) -> None:
    """Ctrl-D or /bye after an exchange says the conversation's name and the --resume that reopens it (the name of a
    new one is the time it started), the command whole on a narrow terminal; a chat where nothing was said, a resumed
    one too, leaves without a word of it."""
    home = tmp_path / "home"
    silent = Chat(home, "-n", "1")
    try:
        assert silent.quit() == 0
        assert "conversation saved as" not in silent.transcript.getvalue()
    finally:
        end_chat(silent)
    chat = Chat(home, "--no-markdown", "-n", "1", columns=50)
    try:
        name = chat.ask("Name a color.")["name"]
        chat.child.sendline("/bye")
        chat.child.expect(pexpect.EOF)
        chat.child.close()
        assert chat.child.exitstatus == 0
        said = " ".join(chat.transcript.getvalue().rpartition("/bye")[2].split())
        assert f"conversation saved as {name}; `localgen chat --resume {name}` goes on with it" in said, said
        assert f"`localgen chat --resume {name}`" in chat.transcript.getvalue(), "the command on one line, to copy"
    finally:
        end_chat(chat)
    resumed = Chat(home, "--resume", name, "-n", "1")
    try:
        assert resumed.quit() == 0
        assert "conversation saved as" not in resumed.transcript.getvalue(), "reopened by name, and left as it was"
    finally:
        end_chat(resumed)


def test_load_says_the_conversation_asked_in_stays_saved_and_leaving_then_names_none(tmp_path: Path) -> None:
    """/load after a message says where the conversation it leaves is saved, as /reset does, and a Ctrl-D then leaves
    without a word: the one loaded was only reopened; a /load of the conversation asked in keeps it asked in."""
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    record = {"format": 1, "name": "other", "turns": [{"user": "Hi", "answer": "Hello."}]}
    (folder / "other.json").write_text(json.dumps(record))
    chat = Chat(home, "--no-markdown", "-n", "3")
    try:
        chat.child.sendline("hi")
        name = chat.wait_for(lambda s: s["name"] != "other" and s["turns"] and s["turns"][-1]["answer"] is not None)[
            "name"]
        chat.sync()
        again = " ".join(chat.command_words(f"/load {name}", f"loaded {name}:").split())
        assert "stays saved" not in again, again
        chat.command_words("/load other", f"loaded other ({name} stays saved): 1 exchange")
        assert chat.quit() == 0
        said = chat.transcript.getvalue().rpartition("/load other")[2]
        assert "conversation saved as" not in said, "other was only reopened, and the conversation asked in was named"
    finally:
        end_chat(chat)


def test_undo_after_earlier_exchanges_left_the_context_brings_back_those_that_fit_again(tmp_path: Path) -> None:
    """The model saw the last exchange alone after /undo, where --resume of the same conversation sees all three."""
    chat = Chat(tmp_path / "home", "-c", "200", "-n", "20", "--temperature", "0", "--no-markdown")
    try:
        for i in range(5):
            chat.child.sendline(f"Tell me fact number {i} about the sea.")
            chat.sync()
        assert re.search(r"earlier\s+exchanges\s+left", chat.transcript.getvalue()), "the fifth question made room"
        chat.command("/undo", "dropped")
        chat.command("/undo", "dropped")
        chat.child.sendline("/show")
        chat.child.expect(r"conversation: ([^\r\n]*)")
        line = chat.child.match[1]
        chat.sync()
        assert line.endswith(", 3 exchanges") and "model's context" not in line, line
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_resuming_a_conversation_whose_model_file_is_now_broken_names_it_and_the_way_on(tmp_path: Path,
                                                                                         bundled_model: Path) -> None:
    """A cut or unsupported model file was named alone, where a missing one names the conversation and -m MODEL."""
    from gguf_builders import copy_with_metadata, truncated_copy

    home, folder = tmp_path / "home", tmp_path / "home" / "data" / "conversations"
    folder.mkdir(parents=True)
    cut = truncated_copy(bundled_model, tmp_path / "cut.gguf", keep_bytes=5_000_000)
    odd = copy_with_metadata(bundled_model, tmp_path / "odd.gguf", set_values={"general.architecture": "nonesuch"})
    for name, model in (("cut", cut), ("odd", odd)):
        (folder / f"{name}.json").write_text(json.dumps({"format": 1, "name": name, "system": None, "settings": {},
                                                         "model": str(model), "turns": [{"user": "hi",
                                                                                         "answer": "hello"}]}))
        chat = spawn_chat(home, "--resume", name)
        chat.expect(pexpect.EOF)
        chat.close()
        said = " ".join(chat.before.split())
        assert chat.exitstatus == 1 and f"error: conversation '{name}' was using {model}: {model}: " in said, said
        assert said.endswith("; or go on with another model: add -m MODEL)"), said
        continued = run_localgen("run", "--conversation", name, "hi", env={"LOCALGEN_HOME": str(home)})
        assert continued.returncode == 1 and f"conversation '{name}' was using {model}" in continued.err, continued.err
    resumed = Chat(home, "--resume", "cut", "-m", str(bundled_model), "-n", "1")  # the way on
    try:
        assert "resumed cut: 1 exchange" in resumed.transcript.getvalue()
        assert resumed.quit() == 0
    finally:
        end_chat(resumed)
