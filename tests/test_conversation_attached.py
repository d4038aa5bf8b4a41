"""The files attached to a chat message, as its saved exchange names them: kept apart from what was typed, so that
listings and transcripts show `[doc.txt] Summarize` rather than the document; files saved before read as they were."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from localgen.conversation import Conversation, DamagedConversationError, Turn
from localgen.conversation_store import conversations_dir, let_go, load_conversation, save_conversation
from localgen.conversation_turn import Attachment
from localgen.session import ChatSession
from tests.conftest import run_localgen

pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)
DOCUMENT = "The quarterly report says revenue grew by ten percent.\n" * 40


def _attached_turn() -> Turn:
    return Turn(user=f"{DOCUMENT.strip()}\n\nSummarize", answer="Revenue grew.",
                attached=(Attachment("docs/report.txt", len(DOCUMENT)),), typed="Summarize")


def _save(name: str, *turns: Turn) -> Path:
    conversation = Conversation(name=name, turns=list(turns), model="smollm2-135m")
    path = save_conversation(conversation)
    let_go(conversation)
    return path


def test_an_exchange_keeps_its_attached_files_apart_from_what_was_typed() -> None:
    record = json.loads(_save("report", _attached_turn()).read_text())["turns"][0]
    assert record["attached"] == [{"name": "docs/report.txt", "characters": len(DOCUMENT)}]
    assert record["typed"] == "Summarize" and record["user"].endswith("\n\nSummarize")
    loaded = load_conversation("report").turns[0]
    assert loaded.attached == (Attachment("docs/report.txt", len(DOCUMENT)),) and loaded.typed == "Summarize"
    assert loaded.headline() == "[report.txt] Summarize"


def test_a_file_saved_before_attachments_were_named_reads_and_saves_as_it_was() -> None:
    old = {"format": 1, "name": "older", "turns": [{"user": "Hi there", "answer": "Hello."}]}
    path = conversations_dir() / "older.json"
    conversations_dir().mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(old))
    conversation = load_conversation("older")
    assert conversation.turns[0].attached == () and conversation.turns[0].headline() == "Hi there"
    save_conversation(conversation)
    turn = json.loads(path.read_text())["turns"][0]
    assert "attached" not in turn and "typed" not in turn


@pytest.mark.parametrize("attached", ['"doc.txt"', '[{"name": "doc.txt"}]', '[{"name": 1, "characters": 3}]',
                                      '[{"name": "doc.txt", "characters": -1}]'])
def test_attached_files_of_the_wrong_shape_make_the_file_damaged(attached: str) -> None:
    conversations_dir().mkdir(parents=True, exist_ok=True)
    (conversations_dir() / "odd.json").write_text(
        f'{{"format": 1, "name": "odd", "turns": [{{"user": "x", "answer": "y", "attached": {attached}}}]}}')
    with pytest.raises(DamagedConversationError, match="'attached' is not a list of files"):
        load_conversation("odd")
    listed = run_localgen("conversations")
    assert "(damaged: a turn's 'attached' is not a list of files" in listed.out, listed.out


def test_listing_and_show_name_the_attached_file_instead_of_its_text() -> None:
    """The listing's first message was the document's first words, and show printed the whole document as the
    user's turn."""
    _save("report", _attached_turn(), Turn("And costs?", "Flat."))
    listed = run_localgen("conversations")
    assert listed.returncode == 0 and "\t[report.txt] Summarize\n" in listed.out, listed.out
    shown = run_localgen("conversations", "show", "report")
    assert "## user\n\n[report.txt] Summarize\n\n## assistant\n\nRevenue grew." in shown.out, shown.out
    assert "quarterly report" not in shown.out and "## user\n\nAnd costs?\n" in shown.out
    assert json.loads(run_localgen("conversations", "--json").out)[0]["first_message"] == "[report.txt] Summarize"


def test_run_with_a_file_into_a_conversation_names_the_file_as_a_chat_does(tmp_path: Path) -> None:
    """run -f's files went into the turn's user text unnamed: the listing showed the document's first words."""
    document = tmp_path / "doc.txt"
    text = DOCUMENT[:len(DOCUMENT) // 10]  # four of its lines, 44 tokens for the model to read, where 440 took seconds
    document.write_text(text)
    ran = run_localgen("run", "-f", str(document), "--conversation", "rf", "Summarize", "-n", "2",
                       "--temperature", "0", "--seed", "1")
    assert ran.returncode == 0, ran.err
    turn = json.loads((conversations_dir() / "rf.json").read_text())["turns"][0]
    assert turn["user"] == f"{text.strip()}\n\nSummarize", "the model saw the file, then the prompt"
    assert turn["attached"] == [{"name": str(document), "characters": len(text), "sent": len(text.strip())}], turn
    assert turn["typed"] == "Summarize"
    listed = run_localgen("conversations", "list", "--json")
    assert json.loads(listed.out)[0]["first_message"] == f"[{document.name}] Summarize", listed.out


def _sent(question: str) -> Turn:
    return Turn(user=f"{DOCUMENT.strip()}\n\n{question}", answer="Yes.",
                attached=(Attachment("docs/report.txt", len(DOCUMENT), len(DOCUMENT.strip())),), typed=question)


def test_the_files_kept_for_undo_are_only_those_of_the_conversation_s_messages() -> None:
    """The files a chat keeps for /undo to attach again are those of the messages still in its conversation: one
    undone, or of a conversation left, is forgotten (they were kept for the chat's life), and /undo takes its files'
    texts from the saved exchange instead."""
    from localgen.attached import SentFiles, as_sent

    sent, turns = SentFiles(), []
    for question in ("One?", "Two?", "Three?"):
        turns.append(_sent(question))
        sent.remember(turns[-1], [DOCUMENT], turns[-1:])  # the earlier ones dropped from the conversation
    taken = [sent.taken_back(turn, []) for turn in turns]
    assert [texts is not None and [as_sent(text) for text in texts] == [DOCUMENT.strip()] for texts in taken] \
        == [True] * 3, taken
    assert [texts is not None and texts[0] is DOCUMENT for texts in taken] == [False, False, True]
    sent.keep_only([])
    again = sent.taken_back(turns[-1], [])
    assert again == [DOCUMENT.strip()] and again[0] is not DOCUMENT, again


@pytest.mark.parametrize(("files", "typed"), [
    ([("notes.txt", "The secret word is plum.\n")], "What is it?"),
    ([("a.txt", "one\n\ntwo\n"), ("b.txt", "three\n\n\nfour")], "    indented code"),
    ([("a.txt", "\n\npadded\n\n\n"), ("-", "from stdin\n")], ""),
    ([("a.txt", "one\r\ntwo\r\n")], "Sum it up\n\nin two words"),
    ([("a.txt", "one\n")], "\u00a0\tindented with a no-break space"),
    ([("notes.md", "# Notes\r\n\r\nplum\r\n"), ("a.csv", "a,b\r\n1,2\r\n\r\n"), ("b.csv", "x,y\r\n3,4\r\n")],
     "Join them."),
    ([("cr.txt", "one\r\r\ntwo\r\r\n"), ("~draft.txt", "\r\r\nthree\r")], "Count."),
    ([("spaces.txt", " " * 30_000 + "\n\nend\n")], " " * 30_000 + "\nq"),
])
def test_a_saved_message_s_files_come_back_as_sent(files: list[tuple[str, str]], typed: str) -> None:
    """The texts of the files a saved exchange's message carried, cut from it by the sizes it records them sent
    with, make that message and its record again, Windows line ends (and CRs before them) as sent; a ~ in a name
    is kept as the record gives it, not expanded."""
    from localgen.attached import AttachedText, attached_already, question_turn, texts_in_record
    from localgen.inputs import InputFile

    attached = [AttachedText(text, InputFile("-f") if name == "-" else InputFile("-f", Path(name), name))
                for name, text in files]
    sent = question_turn(typed, attached)
    _save("sent", replace(sent, answer="Yes."))
    loaded = load_conversation("sent").turns[0]
    texts = texts_in_record(loaded)
    assert texts is not None
    again = question_turn(typed, texts)
    assert (again.user, again.attached, again.typed) == (sent.user, sent.attached, sent.typed), texts
    assert all(attached_already(text, texts) for text in attached), "a file read again is attached already"


def test_a_file_attached_again_before_undo_of_a_saved_message_that_carried_it_goes_once() -> None:
    """/undo of a loaded conversation's message attaches its file once, where /file attached the same file again
    first: the text the record gives is the message's (its CRs gone), which the file read again holds too."""
    from localgen.attached import AttachedText, SentFiles, question_turn
    from localgen.inputs import InputFile

    read = AttachedText("one\r\ntwo\r\n", InputFile("/file", Path("crlf.txt"), "crlf.txt"))
    taken = SentFiles().taken_back(question_turn("Count them.", [read]), [read])
    assert taken is not None and len(taken) == 1, taken


def test_a_saved_message_s_files_are_cut_from_it_in_linear_time() -> None:
    """A message of many large files (and a line of many spaces, on which a search took seconds) is cut at once."""
    import time

    from localgen.attached import AttachedText, question_turn, texts_in_record
    from localgen.inputs import InputFile

    files = [AttachedText(f"file {index}: " + "a paragraph.\n\n" * 5000 + " " * 30_000 + "\n",
                          InputFile("/file", Path(f"{index}.txt"))) for index in range(5)]
    sent = question_turn(" " * 30_000 + "\nCompare them.", files)
    began = time.perf_counter()
    assert texts_in_record(sent) == [text.strip("\n") for text in files]
    assert time.perf_counter() - began < 0.5, "each file's part is cut where its size ends it"


@pytest.mark.parametrize("turn", [
    Turn(user="one\n\nq", attached=(Attachment("a.txt", 5),), typed="q"),  # saved before sizes were
    Turn(user="one\n\nq", attached=(Attachment("a.txt", 5, 3), Attachment("b.txt", 1)), typed="q"),
    Turn(user="changed by hand\n\nq", attached=(Attachment("a.txt", 5, 5),), typed="q"),
    Turn(user="text\n\nq", attached=(Attachment("a.txt", 5, 40),), typed="q"),
    Turn(user="\ntext\n\nq", attached=(Attachment("a.txt", 5, 5),), typed="q"),
    Turn(user="one\n\n  \n\nq", attached=(Attachment("a.txt", 3, 3), Attachment("b.txt", 2, 2)), typed="q"),
])
def test_a_saved_message_whose_record_does_not_give_its_files_gives_none_back(turn: Turn) -> None:
    """An exchange saved before the sizes of the files' parts were recorded, or whose message does not hold the
    parts they give (changed by hand), gives no texts: /undo says the files are not attached again."""
    from localgen.attached import texts_in_record

    assert texts_in_record(turn) is None


def test_each_file_s_part_of_the_message_is_saved_beside_its_size() -> None:
    """The record names each file's part of the message (sent) beside its characters, and a saved part of the
    wrong shape makes the file damaged; one saved without it reads as before."""
    from localgen.attached import AttachedText, question_turn
    from localgen.inputs import InputFile

    crlf = AttachedText("one\r\ntwo\r\n\n", InputFile("/file", Path("crlf.txt"), "crlf.txt"))
    record = json.loads(_save("sizes", question_turn("Count.", [crlf])).read_text())["turns"][0]
    assert record["attached"] == [{"name": "crlf.txt", "characters": 11, "sent": 7}], record
    conversations_dir().mkdir(parents=True, exist_ok=True)
    (conversations_dir() / "odd.json").write_text(json.dumps({"format": 1, "name": "odd", "turns": [
        {"user": "x\n\nq", "answer": "y", "attached": [{"name": "a", "characters": 1, "sent": "1"}]}]}))
    with pytest.raises(DamagedConversationError, match="'attached' is not a list of files"):
        load_conversation("odd")


def _loaded_session(model: Path) -> ChatSession:
    """A chat going on with a saved conversation of two exchanges, the last one's file recorded with its part."""
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model

    kept = Turn(user="draft text\n\nQ", answer="A", attached=(Attachment("~draft.txt", 11, 10),), typed="Q")
    _save("kept", Turn("Hi", "Hello."), kept)
    options = ModelOptions(model=str(model), ctx_size=512, threads=1)
    return ChatSession(load_model(options), options, load_conversation("kept"), SamplingParams(temperature=0.0),
                       GenerationLimits(max_tokens=8))


def _saved_turns() -> int:
    return len(json.loads((conversations_dir() / "kept.json").read_text())["turns"])


def test_undo_drops_the_exchange_from_the_chat_and_its_file_together(bundled_model: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """/undo works out the files it attaches again before it drops the exchange (a failure there left it gone from
    the chat, still on file), and a Ctrl-C amid it waits until the file holds the change too."""
    import signal

    from localgen.attached import SentFiles
    from localgen.errors import UsageError

    session = _loaded_session(bundled_model)
    try:
        def failing(*_: object) -> None:
            raise UsageError("cannot read the files")

        with monkeypatch.context() as patched:
            patched.setattr(SentFiles, "taken_back", failing)
            with pytest.raises(UsageError):
                session.undo()
        assert (len(session.conversation.turns), _saved_turns(), session.attachments) == (2, 2, [])
        bring_back = session._bring_back_earlier

        def interrupted() -> None:
            signal.raise_signal(signal.SIGINT)
            bring_back()

        monkeypatch.setattr(session, "_bring_back_earlier", interrupted)
        session.undo()
        assert (len(session.conversation.turns), _saved_turns(), session.attachments) == (1, 1, ["draft text"])
    finally:
        session.loaded.close()
        let_go(session.conversation)
