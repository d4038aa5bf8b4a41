"""The chat's small mends, in a real pseudo-terminal on the bundled model: /stats after /model, /list's count of
misnamed files, the transcript's dim notes, the context hints of the answer's room and of /model (saved, first
message, unsaved, no exchange, a chat that cannot be saved), and the input history's trim of a huge entry; in-process
on the real engine where an error must cut an answer short, and on the history file itself where what a start reads
is the point."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pexpect
import pytest

from tests.chat_terminal import end_chat
from tests.test_repl import Chat


def test_stats_after_model_names_the_model_that_gave_the_last_answer(tmp_path: Path, bundled_model: Path) -> None:
    """/stats after /model of another file says the model in use has not answered yet and names the one that did (it
    showed that model's figures as the last answer's), as the toolbar shows no speed; the new model's answer has
    figures again."""
    first, other = tmp_path / "first.gguf", tmp_path / "other.gguf"
    first.symlink_to(bundled_model)
    shutil.copyfile(bundled_model, other)
    chat = Chat(tmp_path / "home", "-m", str(first), "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        chat.ask("Name a fruit.")
        chat.command("/stats", "tok/s")
        chat.command(f"/model {other}", "now using")
        said = chat.command_words("/stats", "no answer from the model in use yet: the last answer came from "
                                            "first.gguf")
        assert "tok/s" not in said, said
        chat.ask("Name another.")
        chat.command("/stats", "tok/s")
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_list_counts_a_pipe_under_a_misnamed_name_as_conversations_list_lists_it(tmp_path: Path) -> None:
    """A pipe named `bad name.json` in the conversations folder is a damaged conversation to /list's heading, as its
    row and `conversations list` say (the heading counted it among the misnamed files); a regular file so named is
    misnamed."""
    home = tmp_path / "home"
    folder = home / "data" / "conversations"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "bad name.json")
    (folder / "other name.json").write_text("{}")
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        said = chat.command_words("/list", "newest first:")
        assert re.search(r"1\s+saved\s+conversation\s+and\s+1\s+misnamed\s+file,", said), said
        rows = chat.transcript.getvalue().rpartition("newest first:")[2]
        assert re.search(r"bad\s+name.*\(damaged:\s+not\s+a\s+file\)", rows), rows
        assert chat.quit() == 0
    finally:
        end_chat(chat)


@pytest.mark.parametrize("no_color", ["", "1"])
def test_history_sets_an_answer_s_details_apart_as_the_one_dim_rule_says(tmp_path: Path, no_color: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """/history on a terminal writes an answer's details between the dim escapes the reading line's dim_escapes
    gives (it ended them with its own escape), and with NO_COLOR in italics as `conversations show` does."""
    from localgen import config
    from localgen.dim_style import dim_escapes

    monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.setattr(config, "_settings", None)  # NO_COLOR is read with the settings
    start, end = dim_escapes() if not no_color else ("*", "*")
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        chat.ask("Name a fruit.")
        chat.command("/history", "tok/s")
        said = chat.transcript.getvalue().rpartition("/history")[2]
        assert re.search(re.escape(start) + r"[^\x1b*]* tok/s[^\x1b*]*" + re.escape(end), said), repr(said)
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_the_answer_room_warning_gives_a_larger_context_as_the_chat_s_other_hints_do(tmp_path: Path) -> None:
    """A chat's warning that the context leaves the answer too little room says the context that holds it in the words
    of the hint to a message too long for the context: a context of N or more, and the command that starts the chat
    again with it (it said --ctx-size N, an option the chat takes only as it starts, then "a context of N or more
    holds them all", where the hint says "a context of N or more")."""
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "200", "-c", "256", "--stop", ".")
    try:
        chat.ask("Tell me a long story about " + " and ".join(f"a cat named Tom{i}" for i in range(20)) + ".")
        chat.child.sendline("Tell me a story about " + " and ".join(f"a cat named Tom{i}" for i in range(60)) + ".")
        chat.sync()
        said = " ".join(chat.transcript.getvalue().replace("\r", "").split())
        larger = (r"a context of ([\d,]+) or more: /exit, then `localgen chat --resume \S+ --no-markdown "
                  r"-c (\d+)`")  # the same words
        warned = re.search(r"so the answer may end early: " + larger, said)
        refused = re.search(r"this message needs \d+ tokens .*?\(hint: shorten the message; " + larger, said)
        assert warned and refused, said
        for found in (warned, refused):
            assert found[1].replace(",", "") == found[2], found[0]
        assert "--ctx-size" not in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_a_history_whose_newest_entry_is_longer_than_a_trim_reads_keeps_that_entry_alone(tmp_path: Path) -> None:
    """A history whose newest entry alone (a 20 MB paste) is longer than a trim reads keeps that entry alone as a chat
    starts, the entries before it dropped (it was never trimmed: no entry began in the bytes read), and the line sent
    then after it."""
    from localgen.history_bound import ALONE_MARK, READ_BYTES

    home = tmp_path / "home"
    history = home / "data" / "history"
    history.parent.mkdir(parents=True)
    line = "+" + "pasted text " * 8 + "\n"
    paste = "\n# 2026-01-01 10:00:01\n" + line * (READ_BYTES // len(line) + 10_000)
    history.write_text("".join(f"\n# 2026-01-01 10:00:00\n+old {i}\n" for i in range(100)) + paste)
    chat = Chat(home, "--no-markdown")
    try:
        chat.command("/wrap", "answers' lines")
        assert chat.quit() == 0
    finally:
        end_chat(chat)
    text = paste.removeprefix("\n# 2026-01-01 10:00:01\n")  # the mark takes its header's place
    data, kept = history.read_text(), (ALONE_MARK % len(text)).decode() + text
    assert data.startswith(kept) and data[len(kept):].endswith("\n+/wrap\n"), data[len(kept):]


def test_model_beyond_the_chat_s_context_is_hinted_the_chat_that_takes_a_smaller_one(tmp_path: Path,
                                                                                     bundled_model: Path) -> None:
    """/model of a model whose largest context is smaller than the chat's gives, as the chat's other context hints do,
    the context that fits and the command that goes on with the conversation on that model with it (it said to use
    --ctx-size, an option a chat takes only as it starts); the model in use stays."""
    from tests.gguf_builders import copy_with_metadata

    small = tmp_path / "small.gguf"
    copy_with_metadata(bundled_model, small, set_values={"llama.context_length": 1024})
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "3", "-c", "4096")
    try:
        name = chat.ask("Hi")["name"]
        said = " ".join(chat.command_words(f"/model {small}", "-c 1024`)").split())
        assert f"(hint: a context of 1,024 or less: /exit, then `localgen chat --resume {name} -m {small} " \
               "--no-markdown -c 1024`)" \
            in said, said
        chat.command("/model", "using smollm2-135m")
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_stats_of_an_answer_an_error_cut_short_after_model_say_it_has_no_figures(
        home: Path, bundled_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """/stats after /model, where the model in use answered but an error cut its answer short (its text kept, no
    figures), says that answer has no figures, where it said the model in use had not answered yet and that the
    last answer came from the model before /model; so too once /model names that file otherwise (its models.toml
    entry, then its path), where the answer's saved name is no longer the conversation's."""
    from localgen.chat_commands_settings import say_stats
    from localgen.conversation import Conversation
    from localgen.events import TextChunk
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model
    from localgen.session import ChatSession
    from tests.conftest import user_registry

    first, other = home / "first.gguf", home / "other.gguf"
    first.symlink_to(bundled_model)
    shutil.copyfile(bundled_model, other)
    user_registry(home, f'[models.other]\npath = "{other}"\n')
    options = ModelOptions(model=str(first), ctx_size=1024, threads=1)
    session = ChatSession(load_model(options), options, Conversation.new(system=None, model=str(first)),
                          SamplingParams(temperature=0.0), GenerationLimits(max_tokens=8), autosave=False)
    try:
        list(session.ask("Name a fruit.")[1])
        session.switch_model("other")
        events = session.ask("Name another.")[1]
        chunks = 0
        with pytest.raises(RuntimeError):
            for event in events:
                chunks += isinstance(event, TextChunk)
                if chunks == 2:  # the text shown before it is kept
                    events.throw(RuntimeError("the stream broke"))
        assert session.conversation.turns[-1].interrupted
        no_figures = "no figures for the last answer: it came with the conversation loaded, or an error cut it short\n"
        capsys.readouterr()
        say_stats(session)
        assert capsys.readouterr().err == no_figures
        session.switch_model(str(other))  # the same file, by its path: the answer's saved name is not the model's now
        assert session.conversation.turns[-1].details.model == "other" != session.conversation.model
        say_stats(session)
        assert capsys.readouterr().err == no_figures
    finally:
        session.loaded.close()


def test_stats_after_model_of_a_file_of_the_same_name_names_the_last_answer_s_model_by_its_path(
        tmp_path: Path, bundled_model: Path) -> None:
    """/stats after /model of another file of the same name (b/other.gguf after a/other.gguf) names the model that
    gave the last answer by its path, where it said that answer came from other.gguf, the name of the one in use."""
    first, second = tmp_path / "a" / "other.gguf", tmp_path / "b" / "other.gguf"
    for path in (first, second):
        path.parent.mkdir()
    first.symlink_to(bundled_model)
    shutil.copyfile(bundled_model, second)
    chat = Chat(tmp_path / "home", "-m", str(first), "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        chat.ask("Name a fruit.")
        chat.command(f"/model {second}", "now using")
        said = " ".join(chat.command_words("/stats", "from the model in use)").split())
        assert f"no answer from the model in use yet: the last answer came from {first} (/stats shows the figures " \
               "of answers from the model in use)" in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_stats_of_a_loaded_answer_after_model_of_the_file_that_gave_it_are_its_saved_figures(
        tmp_path: Path, bundled_model: Path) -> None:
    """A conversation saved on the bundled model, loaded while another file is in use, then /model of the bundled
    model again: /stats gives the saved answer's figures, from the model in use, where it said the model in use had
    not answered yet and that the last answer came from it."""
    other = tmp_path / "other.gguf"
    shutil.copyfile(bundled_model, other)
    chat = Chat(tmp_path / "home", "-m", str(bundled_model), "--temperature", "0", "--no-markdown", "-n", "5")
    try:
        chat.ask("Name a fruit.")
        chat.command("/save notes", "notes")
        chat.command(f"/model {other}", "now using")
        chat.command("/reset", ">>>")
        chat.command("/load notes", "notes")
        chat.command(f"/model {bundled_model}", "now using")
        said = " ".join(chat.command_words("/stats", "tok/s").split())
        assert "the saved answer's figures" in said and "no answer from the model in use" not in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_the_answer_room_warning_on_a_chat_s_first_message_hints_the_command_that_resumes_it(tmp_path: Path) -> None:
    """The answer-room warning on a chat's first message, before the conversation is saved, hints the command that
    resumes it with a larger context, by the name the chat says it is saved as (it hinted a fresh chat, which drops
    the exchange about to be saved)."""
    home = tmp_path / "home"
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "200", "-c", "256", "--stop", ".")
    try:
        chat.ask("Tell me a long story about " + " and ".join(f"a cat named Tom{i}" for i in range(20)) + ".")
        said = " ".join(chat.transcript.getvalue().replace("\r", "").split())
        hinted = re.search(r"so the answer may end early: a context of [\d,]+ or more[^:]*: /exit, then "
                           r"`localgen chat --resume NAME --no-markdown -c (\d+)` with the NAME the chat says it is "
                           r"saved as", said)
        assert hinted, said
        chat.child.sendcontrol("d")
        chat.child.expect(r"conversation saved as (\S+);")
        name = chat.child.match[1]
        chat.child.expect(pexpect.EOF)
    finally:
        end_chat(chat)
    again = Chat(home, "--resume", name, "-c", hinted[1], "--no-markdown")
    try:
        started = " ".join(again.transcript.getvalue().split())
        assert f"resumed {name}: " in started and "1 exchange" in started, started
        assert again.quit() == 0
    finally:
        end_chat(again)


def test_the_context_hints_of_a_chat_that_cannot_be_saved_say_to_start_it_again(tmp_path: Path) -> None:
    """A chat whose start said it cannot be saved (a file stands where its conversations go) is told, by the
    answer-room warning on its first message and by the hint to a message too long, to start again with a larger
    context, as there is nothing to resume (both hinted `localgen chat --resume NAME` by the name the chat says it is
    saved as, which it never says); Ctrl-D says no such name."""
    home = tmp_path / "home"
    blocker = home / "data" / "conversations"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("in the way")
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "200", "-c", "256", "--stop", ".")
    try:
        chat.child.sendline("Tell me a long story about " + " and ".join(f"a cat named Tom{i}" for i in range(20)) +
                            ".")
        chat.sync()
        chat.child.sendline("Tell me a story about " + " and ".join(f"a cat named Tom{i}" for i in range(60)) + ".")
        chat.sync()
        said = " ".join(chat.transcript.getvalue().replace("\r", "").split())
        assert f"this chat cannot be saved: {blocker} is a file, where a folder should be" in said, said
        again = (r"a context of ([\d,]+) or more: /exit, then start the chat again with `localgen chat -m smollm2-135m "
                 r"--temperature 0 -n 200 --stop \. --no-markdown -c (\d+)`, as this chat cannot be saved, so there is "
                 r"nothing to resume")
        warned = re.search(r"so the answer may end early: " + again, said)
        refused = re.search(r"this message needs \d+ tokens .*?\(hint: shorten the message; " + again, said)
        assert warned and refused and "--resume" not in said, said
        for found in (warned, refused):
            assert found[1].replace(",", "") == found[2], found[0]
        chat.child.sendcontrol("d")
        chat.child.expect(pexpect.EOF)
        assert "saved as" not in chat.transcript.getvalue(), chat.transcript.getvalue()
    finally:
        end_chat(chat)


def test_model_beyond_the_context_of_a_chat_with_no_exchange_says_its_options_are_not_saved(
        tmp_path: Path, bundled_model: Path) -> None:
    """/model of a model whose largest context is smaller than that of a chat with no exchange yet (-s, --temperature
    and -n given) says to start the chat again with the options it started with and the model and context, as
    nothing of it is saved to resume (it gave a bare `localgen chat -m … -c 1024`, which drops those options)."""
    from tests.gguf_builders import copy_with_metadata

    small = tmp_path / "small.gguf"
    copy_with_metadata(bundled_model, small, set_values={"llama.context_length": 1024})
    chat = Chat(tmp_path / "home", "-s", "Be brief.", "--temperature", "0", "--no-markdown", "-n", "3", "-c", "4096")
    try:
        said = " ".join(chat.command_words(f"/model {small}", "saved to resume)").split())
        assert f"(hint: a context of 1,024 or less: /exit, then start the chat again with `localgen chat -m {small} " \
               f"-s 'Be brief.' --temperature 0 -n 3 --no-markdown -c 1024`, as it has no exchange saved to resume)" \
            in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_model_beyond_the_context_of_a_chat_whose_first_save_failed_hints_resuming_it_once_saved(
        tmp_path: Path, bundled_model: Path) -> None:
    """/model of a model whose largest context is smaller than the chat's, where the chat's first exchange could not
    be saved, hints resuming it by the name the chat says it is saved as (it hinted a fresh chat, which drops the
    exchange); the chat saves it as it ends, once it can."""
    from tests.gguf_builders import copy_with_metadata

    small = tmp_path / "small.gguf"
    copy_with_metadata(bundled_model, small, set_values={"llama.context_length": 1024})
    home = tmp_path / "home"
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "3", "-c", "4096")
    folder = home / "data" / "conversations"
    try:
        folder.rename(aside := tmp_path / "aside")
        folder.write_text("in the way")
        chat.child.sendline("Hi")
        chat.expect_words("saves it with the next one")
        chat.sync()
        said = " ".join(chat.command_words(f"/model {small}", "saved as").split())
        assert f"(hint: a context of 1,024 or less: /exit, then `localgen chat --resume NAME -m {small} " \
               "--no-markdown -c 1024` " \
               "with the NAME the chat says it is saved as" in said, said
        folder.unlink()
        aside.rename(folder)
        chat.child.sendcontrol("d")
        chat.child.expect(r"conversation saved as (\S+);")
        chat.child.expect(pexpect.EOF)
    finally:
        end_chat(chat)



def test_model_beyond_the_context_of_a_chat_that_cannot_be_saved_says_to_start_it_again(
        tmp_path: Path, bundled_model: Path) -> None:
    """/model of a model whose largest context is smaller than that of a chat whose start said it cannot be saved,
    after an exchange, says to start the chat again with its options and the model and context, as there is nothing
    to resume (it hinted `localgen chat --resume NAME` by the name the chat says it is saved as, which it never
    says)."""
    from tests.gguf_builders import copy_with_metadata

    small = tmp_path / "small.gguf"
    copy_with_metadata(bundled_model, small, set_values={"llama.context_length": 1024})
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "conversations").write_text("in the way")
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "3", "-c", "4096")
    try:
        chat.child.sendline("Hi")
        chat.sync()
        chat.command_words(f"/model {small}", "1,024 or less:")
        said = " ".join(chat.transcript.getvalue().rpartition("/model")[2].split())
        assert f"(hint: a context of 1,024 or less: /exit, then start the chat again with `localgen chat -m {small} " \
               f"--temperature 0 -n 3 --no-markdown -c 1024`, as this chat cannot be saved, so there is nothing to " \
               "resume)" in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)

OLDER = "".join(f"\n# 2026-01-01 10:00:00\n+old {i}\n" for i in range(100))


@pytest.mark.parametrize(("older", "header"), [(OLDER, "\n# 2026-01-01 10:00:01\n"), ("", "\n# 2026-01-01 10:00:01\n"),
                                               ("", "# 2026-01-01 10:00:01\n"), ("", "")])
def test_a_history_left_as_one_huge_entry_is_not_looked_through_again(tmp_path: Path, older: str, header: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A history whose newest entry alone is longer than a trim reads, with older entries before it or none, with
    prompt-toolkit's header or none: the trim keeps that entry alone, and the next start, nothing appended since,
    maps nothing (it mapped the whole file and searched it at every start); the entry reads back as it was written,
    and an entry appended after it is kept."""
    import mmap

    from prompt_toolkit.history import FileHistory

    from localgen.history_bound import READ_BYTES, check_and_trim_history

    history = tmp_path / "history"
    line = "+pasted text\n"
    paste = header + line * (READ_BYTES // len(line) + 1_000)
    history.write_text(older + paste)
    check_and_trim_history(history)
    trimmed = history.read_bytes()
    assert trimmed.endswith(paste.removeprefix(header).encode()) and b"+old" not in trimmed
    mapped: list[int] = []
    real_mmap = mmap.mmap
    monkeypatch.setattr(mmap, "mmap", lambda *args, **kwargs: mapped.append(1) or real_mmap(*args, **kwargs))
    check_and_trim_history(history)
    assert not mapped, "the file was mapped and searched again"
    assert history.read_bytes() == trimmed
    assert list(FileHistory(str(history)).load_history_strings()) == [paste.removeprefix(header)[1:-1]
                                                                     .replace("\n+", "\n")]
    with history.open("a") as file:
        file.write("\n# 2026-01-01 10:00:02\n+later\n")
    check_and_trim_history(history)
    assert history.read_text().endswith("\n# 2026-01-01 10:00:02\n+later\n")
