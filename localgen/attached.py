"""What a prompt is made of, named where a refusal of it names it: the files attached (-f, /file), stdin, the prompt
and the system prompt."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from localgen.chat import compose_user_message
from localgen.conversation_turn import Attachment, Turn
from localgen.inputs import InputFile
from localgen.stdin_names import STDIN_NAME
from localgen.typed_paths import FILE_OPTION, expand_user_path
from localgen.units import alternatives

SPLIT_TRIES = 100_000  # the ends of files' texts /undo tries in a saved message, to find the one split of it
_NOT_BLANK = re.compile(r"\S")
_SPACES_AT_END = re.compile(r"[^\S\n]+\Z")  # those of a line's end (a no-break space too), not its newline


class AttachedText(str):
    """A file's text attached to a chat message, with the file it was read from (-f or /file), for a refusal of the
    message to name it."""

    file: InputFile

    def __new__(cls, text: str, file: InputFile) -> AttachedText:
        """The text, knowing its file."""
        attached = super().__new__(cls, text)
        attached.file = file
        return attached


class TypedText(str):
    """Stdin read as the prompt (`run -`): composed after the files as an attachment is, but recorded as what was
    typed, not as a file attached."""


def prompt_parts(files: Sequence[InputFile], *, system: bool, stdin: bool = False, prompt: bool = False) -> str:
    """The texts a prompt is made of, as an error that refuses them names them after the tokens they take: the -f
    files ("-f -" for stdin among them; a chat's /file ones as /file FILE), piped stdin, the prompt and the system
    prompt, those given ('with -f a.txt, stdin, the prompt and the system prompt'; a chat's message: its files); ''
    without files, stdin or a system prompt (the prompt alone is what "the prompt" means already)."""
    if not (files or stdin or system):
        return ""
    named = [*(f"{'-f' if file.option == FILE_OPTION else file.option} {as_given(file)}" for file in files),
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
    was given (stdin as -), with its size in characters."""
    return tuple(Attachment(as_given(text.file) if isinstance(text, AttachedText) else "(text)", len(text))
                 for text in attachments if text.strip())


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
    """The texts of the files turn's message carried, as a saved exchange gives them: its message split where the one
    way to split it into its files' texts (compose_user_message joins them, each no longer than its characters, with
    a blank line) then what was typed gives; each padded with the newlines its characters count and compose drops
    (a file's CRs, the newlines about it), so that a message they go with again is sent and recorded as it was.
    None where no one split is found (a message changed by hand, files whose blank lines leave it open)."""
    typed, block = turn.typed or "", turn.user
    if typed:  # after a blank line, and the spaces before its first line
        block = _SPACES_AT_END.sub("", block[:-len(typed)]) if block.endswith(typed) else ""
        block = block[:-2] if block.endswith("\n\n") else ""
    ends = _one_split(block, [file.characters for file in turn.attached]) if turn.attached else None
    if ends is None:
        return None
    texts: list[str] = []
    for file, start, end in zip(turn.attached, [0, *(end + 2 for end in ends)], ends, strict=False):
        text = block[start:end] + "\n" * (file.characters - (end - start))
        texts.append(text if file.name == "(text)" else AttachedText(text, _file_named(file.name)))
    return texts


def _file_named(name: str) -> InputFile:
    """The file a saved exchange names as attached (- for stdin), as /file attaches it."""
    return InputFile(FILE_OPTION) if name == "-" else InputFile("/file", expand_user_path(name), name)


def _one_split(block: str, sizes: list[int]) -> list[int] | None:
    """Where each of the texts of sizes characters or fewer (at least one that is not blank, no newline at either
    end) that block joins with blank lines ends, where only one way of splitting it gives them; else None (also
    where SPLIT_TRIES ends are tried first, as files of many blank lines and Windows line ends can make them)."""
    after = [sum(sizes[index + 1:]) + 2 * (len(sizes) - 1 - index) for index in range(len(sizes))]  # the most
    # the texts after each one take, with the blank lines before them
    found: dict[tuple[int, int], list[list[int]]] = {}
    tries = iter(range(SPLIT_TRIES))

    def splits(index: int, start: int) -> list[list[int]]:
        """At most two ways of splitting block from start into the texts from index on."""
        if (index, start) not in found:
            last = index == len(sizes) - 1
            ends = iter([len(block)]) if last else _blank_lines(block, max(start, len(block) - after[index]),
                                                                start + sizes[index])
            ways: list[list[int]] = []
            for end in ends:
                if next(tries, None) is None:
                    raise _Undecided
                if not start < end <= start + sizes[index] or "\n" in (block[start], block[end - 1]) \
                        or not _NOT_BLANK.search(block, start, end):
                    continue
                ways += [[end]] if last else [[end, *rest] for rest in splits(index + 1, end + 2)]
                if len(ways) > 1:
                    break
            found[index, start] = ways[:2]
        return found[index, start]

    try:
        ways = splits(0, 0) if sizes else []
    except _Undecided:
        return None
    return ways[0] if len(ways) == 1 else None


class _Undecided(Exception):
    """Too many ways were tried to tell whether one split of a message into its files' texts is the only one."""


def _blank_lines(text: str, start: int, end: int) -> Iterator[int]:
    """Where a blank line's two newlines start in text, from start to end."""
    at = text.find("\n\n", start, end + 2)
    while at >= 0:
        yield at
        at = text.find("\n\n", at + 1, end + 2)


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
        carried = {compose_user_message(None, [text]) for text in sent}
        return [*sent, *(text for text in attached if compose_user_message(None, [text]) not in carried)]
