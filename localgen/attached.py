"""What a prompt is made of, named where a refusal of it names it: the files attached (-f, /file), stdin, the prompt
and the system prompt."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from localgen.chat import compose_user_message
from localgen.conversation_turn import Attachment, Turn
from localgen.inputs import InputFile
from localgen.stdin_names import STDIN_NAME
from localgen.typed_paths import FILE_OPTION
from localgen.units import alternatives, counted, times

NAMED_FILES = 3  # a refusal of a prompt names this many of its files, and counts the rest


class AttachedText(str):
    """A file's text attached to a chat message, with the file it was read from (-f or /file), for a refusal of the
    message to name it, and the characters the file's text has (where the text is its part of a saved message,
    whose CRs and newlines about it may be fewer)."""

    file: InputFile
    characters: int
    given: int  # how often its file was attached: /file of it again counts

    def __new__(cls, text: str, file: InputFile, *, characters: int | None = None) -> AttachedText:
        """The text, knowing its file (and its characters, where the text is not the file's as read)."""
        attached = super().__new__(cls, text)
        attached.file = file
        attached.characters = len(text) if characters is None else characters
        attached.given = 1
        return attached


class TypedText(str):
    """Stdin read as the prompt (`run -`): composed after the files as an attachment is, but recorded as what was
    typed, not as a file attached."""


def prompt_parts(files: Sequence[InputFile], *, system: bool, stdin: bool = False, prompt: bool = False) -> str:
    """The texts a prompt is made of, as an error that refuses them names them after the tokens they take: the -f
    files ("-f -" for stdin among them; a chat's /file ones as /file FILE), piped stdin, the prompt and the system
    prompt, those given ('with -f a.txt, stdin, the prompt and the system prompt'; a chat's message: its files); ''
    without files, stdin or a system prompt (the prompt alone is what "the prompt" means already). The first
    NAMED_FILES files are named, the rest counted ('-f a.txt, -f b.txt, -f c.txt, 1,497 more files and the prompt'):
    the line stays short however many files there are."""
    if not (files or stdin or system):
        return ""
    shown = files if len(files) <= NAMED_FILES + 1 else files[:NAMED_FILES]  # one more is as short as its count
    named = [*(f"{'-f' if file.option == FILE_OPTION else file.option} {as_given(file)}" for file in shown),
             *[counted(len(files) - len(shown), "more file")] * (len(shown) < len(files)),
             *["stdin"] * stdin, *["the prompt"] * prompt, *["the system prompt"] * system]
    return f"with {alternatives(named, 'and')}"


def as_given(file: InputFile) -> str:
    """The file as its option was given it: stdin as "-" (or the name that stood for it, /dev/stdin)."""
    return (file.typed or STDIN_NAME) if file.path is None else file.name


def with_attached(attachments: Sequence[str]) -> str:
    """prompt_parts for the files attached to a chat message (those of its texts that know their file and add text)."""
    return prompt_parts([text.file for text in attachments if isinstance(text, AttachedText) and text.strip()],
                      system=False)


def attached_files(attachments: Sequence[str]) -> tuple[Attachment, ...]:
    """The files attached to a chat message as its exchange records them: each one that adds text, by the name it
    was given (stdin as -), with its size in characters and that of its part of the message (as_sent)."""
    return tuple(Attachment(as_given(text.file), text.characters, len(as_sent(text))) if isinstance(text, AttachedText)
                 else Attachment("(text)", len(text), len(as_sent(text))) for text in attachments if text.strip())


def question_turn(typed: str, attachments: Sequence[str]) -> Turn:
    """The exchange a message starts, its answer to come: the attachments and what was typed after them composed
    (chat.compose_user_message), the files that add text named with their sizes, and what was typed (stdin read as
    the prompt too: TypedText) kept apart, where there were files (a chat's, run --conversation's and a plain
    run's alike)."""
    files = [text for text in attachments if not isinstance(text, TypedText)]
    said = "\n\n".join(part.strip() for part in [*(text for text in attachments if isinstance(text, TypedText)), typed]
                    if part.strip())
    return Turn(user=compose_user_message(typed, attachments), attached=attached_files(files),
                typed=said if files else None)


def texts_in_record(turn: Turn) -> list[str] | None:
    """The texts of the files turn's message carried, as a saved exchange gives them: its message cut where each
    file's part of it ends (the sizes the exchange records as sent), each as a text that /file's would be sent as
    (as_sent) and that names its file with its characters; None where the exchange was saved before localgen
    recorded those sizes, or its message does not hold the parts they give (changed by hand)."""
    if not turn.attached or any(file.sent is None for file in turn.attached):
        return None
    texts: list[str] = []
    start, user = 0, turn.user
    for file in turn.attached:
        end = start + (file.sent or 0)
        part = user[start:end]
        text = part.replace("\r\n", "\r\r\n")  # as_sent makes CRLF LF: the message's own CRLFs come back so
        if end > len(user) or not part.strip() or as_sent(text) != part or user[end:end + 2] not in ("\n\n", ""):
            return None
        texts.append(text if file.name == "(text)" else
                     AttachedText(text, _file_named(file.name), characters=file.characters))
        start = end + 2
    return texts


def _file_named(name: str) -> InputFile:
    """The file a saved exchange names as attached (- for stdin), as /file attaches it (its path as named: only its
    name is said)."""
    return InputFile(FILE_OPTION) if name == "-" else InputFile("/file", Path(name), name)


def as_sent(text: str) -> str:
    """A file's text as a message carries it (chat.compose_user_message: its CRLFs LF, the newlines about it gone)."""
    return compose_user_message(None, [text])


def attached_already(text: str, attachments: Sequence[str]) -> bool:
    """Whether a message would carry text already among attachments, as sent (a file read again whose CRLFs the
    text kept for it no longer holds)."""
    return attached_before(text, attachments) is not None


def attached_before(text: str, attachments: Sequence[str]) -> str | None:
    """The attachment a message would carry text as already, as sent (attached_already), or None."""
    sent = as_sent(text)
    return next((other for other in attachments if as_sent(other) == sent), None)


def first_with_text(texts: list[str]) -> list[int]:
    """The indices of the texts that hold some text, each the first with it (the ones once_each keeps that count)."""
    return [index for index, text in enumerate(texts) if text.strip() and text not in texts[:index]]


def once_each(texts: list[str], names: list[str], warnings: list[str]) -> list[str]:
    """The attachments' texts less a repeated one (-f a.txt -f a.txt), with a warning for each file left out, one
    however often it was given: a file given again, however its path is typed (./n.txt, n.txt: _same_file), counted
    under the path it was first given as, or a file with the text of one attached before, named; run -f, chat -f and
    /file attach a text once; names are their files' (an empty one is warned about already)."""
    kept: list[str] = []
    attached_as: dict[str, int] = {}  # each text attached: the index of the one that attached it
    left_out: list[tuple[int, int]] = []  # each text left out and the one attached before it with its text
    for index, text in enumerate(texts):
        if text.strip() and text in attached_as:
            left_out.append((index, attached_as[str(text)]))
        else:
            kept.append(text)
            attached_as.setdefault(str(text), index)
    said: set[object] = set()  # a file given again is said once, and so is a name of another file with its text

    def given_again(first: int, other: int) -> bool:
        """Whether texts other and first are one file's (a piped text and a file that cannot be told apart: by name)."""
        one, two = texts[first], texts[other]
        if isinstance(one, AttachedText) and isinstance(two, AttachedText):
            return _same_file(one.file, two.file)
        return names[first] == names[other]

    for index, first in left_out:
        again = given_again(first, index)
        key = first if again else names[index]
        if key not in said:
            said.add(key)
            given = 1 + sum(of == first and given_again(first, other) for other, of in left_out) if again else 1
            warnings.append(left_out_warning(names[first], names[first], given) if again else
                            left_out_warning(names[index], names[first], 1))
    return kept


def left_out_warning(name: str, first: str, given: int) -> str:
    """The warning for the file name left out of a message as its text is attached already: given `given` times
    (first is name), or with the text of the file first attached before (run -f, chat -f and /file say it alike)."""
    return (f"{name} was given {times(given)}: it is attached once" if first == name else
            f"{name} has the same text as {first}: it is not attached again")


def attached_again_warning(text: AttachedText, attachments: Sequence[str]) -> str | None:
    """left_out_warning for /file's text where it is among attachments already (its file attached again, however its
    path is typed: counted under the path it was first given as), else None."""
    first = attached_before(text, attachments)
    if first is None:
        return None
    if not isinstance(first, AttachedText):  # a text whose file a saved exchange does not name: a run's piped text
        return left_out_warning(text.file.name, "the piped text", 1)
    if not _same_file(first.file, text.file):
        return left_out_warning(text.file.name, first.file.name, 1)
    first.given += 1
    return left_out_warning(first.file.name, first.file.name, first.given)  # by the path it was first given as


def _same_file(first: InputFile, second: InputFile) -> bool:
    """Whether two attached files are one, however their paths were typed (n.txt, ./n.txt, a link to it); by name
    where either is stdin or cannot be found."""
    if first.path is not None and second.path is not None:
        with contextlib.suppress(OSError):
            return os.path.samefile(first.path, second.path)
    return first.name == second.name


class SentFiles:
    """The texts of the files each message this chat sent carried, by the message they made, for /undo to attach
    them again (a /regen's question is the same message)."""

    def __init__(self) -> None:
        """None sent yet."""
        self._sent: dict[str, list[str]] = {}

    def remember(self, turn: Turn, attachments: list[str], turns: Sequence[Turn]) -> None:
        """Keep the attachments the message of turn carries (none: nothing to keep), and only those of the messages
        still among turns (the conversation's)."""
        if attachments:
            self._sent[turn.user] = list(attachments)
        self.keep_only(turns)

    def keep_only(self, turns: Sequence[Turn]) -> None:
        """Forget the files of the messages no longer among turns (undone, or of a conversation left: none)."""
        kept = {turn.user for turn in turns if turn.attached}
        self._sent = {user: texts for user, texts in self._sent.items() if user in kept}

    def taken_back(self, turn: Turn, attached: list[str]) -> list[str] | None:
        """The files turn's message carried (as this chat sent them, or as its saved exchange gives them:
        texts_in_record), then those attached since (attached) but for a text among them already, as the message
        has it (a file's CRs aside); None where it carried none, or the record gives no texts for them."""
        sent = self._sent.get(turn.user) if turn.attached else None
        if sent is None and turn.attached:
            sent = texts_in_record(turn)
        if sent is None:
            return None
        return [*sent, *(text for text in attached if not attached_already(text, sent))]
