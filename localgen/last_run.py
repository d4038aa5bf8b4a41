"""The last plain `localgen run`: its one exchange kept, unsaved, so that `run --continue` can go on with it (as a
new saved conversation) when it is newer than every saved conversation."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from localgen.config import settings
from localgen.conversation import Conversation, DamagedConversationError, ForeignFormatError
from localgen.conversation_lock import ConversationBusyError, hold, release
from localgen.conversation_store import latest_conversation, list_conversations, save_conversation
from localgen.errors import LocalgenError, read_failure
from localgen.events import Event
from localgen.links import broken_link
from localgen.storage import atomic_write_text
from localgen.text_cut import one_line

if TYPE_CHECKING:
    from localgen.runner import LoadedModel, ModelOptions

LAST_RUN_FILE = "last-run.json"  # in the data folder, beside (not among) the saved conversations
LOCK_NAME = "last-run"  # held while a run --continue turns the last run into a saved conversation
ASKED_CHARS = 40  # of the last run's message, as the note that goes on with it shows it
LOCK_WAIT_S = 5.0  # that takes milliseconds: another --continue waits for it this long at most


def last_run_path() -> Path:
    """Where the last plain run's exchange is kept."""
    return settings().data_dir / LAST_RUN_FILE


def last_run_keeper(loaded: LoadedModel, options: ModelOptions, system: str | None, typed: str,
                    attachments: Sequence[str], warn: Callable[[str], None]
                    ) -> Callable[[Iterator[Event]], Iterator[Event]] | None:
    """What keeps the answer to the message typed after the attachments as the last run (its files named with their
    sizes, as a chat's turn names them: attached.question_turn), from the model's own stream (its exact text,
    reasoning included), once it has streamed, replacing the one before (which stays when this one gets no answer:
    Ctrl-C before any text, an error); an answer cut short is kept as far as it came, marked interrupted. None when
    nothing is kept: for a model without a chat template (a plain completion), or with LOCALGEN_NO_LAST_RUN set (the
    record kept before is removed now). A failure to keep it is warned about: the answer is the user's all the
    same."""
    if settings().no_last_run:
        with contextlib.suppress(OSError):
            last_run_path().unlink()
        return None
    if not loaded.prompt_format.is_chat:
        return None
    from localgen.answer_record import recorded
    from localgen.attached import question_turn
    from localgen.session import model_reference

    def kept(events: Iterator[Event]) -> Iterator[Event]:
        conversation = Conversation.new(system=system, model=model_reference(loaded.resolved))
        conversation.ctx_size = options.ctx_size  # as a conversation records -c, for the run that continues it
        turn = question_turn(typed, attachments)
        try:
            yield from recorded(events, turn, conversation.model)
        finally:
            if turn.answer is not None:
                conversation.turns.append(turn)
                _keep(conversation, warn)

    return kept


def _keep(conversation: Conversation, warn: Callable[[str], None]) -> None:
    """Write the last run's record over the one before (atomically); warn when it cannot be written, with the
    setting that keeps none (a read-only home would have every run warn)."""
    try:
        atomic_write_text(last_run_path(), conversation.to_json())
    except LocalgenError as exc:
        hint = f"{exc.hint}; " if exc.hint else ""
        warn(f"this run is not kept for `localgen run --continue`: {exc.message} ({hint}LOCALGEN_NO_LAST_RUN=1 keeps "
             "none, and warns no more)")


@dataclass(frozen=True)
class LastRun:
    """The last plain run's record as read (text) and the conversation it makes, not saved yet."""

    conversation: Conversation
    text: str


def newest_last_run(named: str = "--conversation NAME") -> LastRun | None:
    """The last plain run's record, read and checked, when it is newer than every saved conversation; None when
    there is none, or a saved conversation is newer (named: the option that names a saved one, for a hint). Nothing
    is saved or held: take_last_run does that once the run is about to answer."""
    path = last_run_path()
    if not _is_newest(path):
        return None
    text = _read(path)
    try:
        conversation = Conversation.from_json(text, path)
    except (DamagedConversationError, ForeignFormatError) as exc:
        raise LocalgenError(f"the last run cannot be continued: {exc.message}",
                            hint=f"it was left untouched; delete {path} to continue the latest saved "
                                 f"conversation instead, or go on with one: {named}") from None
    return LastRun(conversation, text)


@dataclass(frozen=True)
class Continued:
    """The conversation a run or a chat goes on with; when it is the last plain run's (last_run), it is saved as a
    conversation only once the run is about to answer, or the chat has started, so that one refused before that
    leaves no trace."""

    conversation: Conversation
    last_run: LastRun | None = None

    @property
    def is_new(self) -> bool:
        """Whether the run starts this conversation (it then gets the model's system prompt, as a plain run does)."""
        return not self.conversation.on_disk and self.last_run is None


def take_last_run(last_run: LastRun, say: Callable[[str], None], again: str = "run again: --continue",
                  this: str = "run") -> Conversation:
    """Save the last run newest_last_run read as a new conversation, held by this process (said on stderr, with the
    name it is saved under), and forget its record; refused when the record has changed since (another run
    continued it or a newer plain run replaced it), so that two runs never make two conversations of it (this: the
    run or chat starting, as the error names it)."""
    path = last_run_path()
    with _held():
        if not _is_newest(path) or _read(path) != last_run.text:
            raise LocalgenError(f"the last run changed while this {this} was starting: another run continued it or "
                                "replaced it", hint=f"{again} then goes on with the newest conversation")
        save_conversation(last_run.conversation)  # a name of its own: chat-YYYYMMDD-HHMMSS from when it ran, or -2...
    _forget(path, last_run.text)
    turns = last_run.conversation.turns
    asked = f' "{one_line(turns[0].headline(), ASKED_CHARS)}"' if turns else ""
    say(f"localgen: continuing the last run{asked}, now saved as conversation '{last_run.conversation.name}'")
    return last_run.conversation


def latest_to_resume(warn: Callable[[str], None]) -> Continued:
    """What `chat --resume` alone reopens, as `run --continue` goes on with it: the last plain run when it is newer
    than every saved conversation (read now; take_last_run saves it once the chat has started), else the latest
    saved conversation, held (conversation_store.latest_conversation, which warns of those it passes over)."""
    last_run = newest_last_run(named="--resume NAME")
    if last_run is None:
        return Continued(latest_conversation(warn))
    return Continued(last_run.conversation, last_run)


def _is_newest(path: Path) -> bool:
    """Whether the last run's record is there and newer than every saved conversation."""
    saved = list_conversations()
    try:
        kept = path.stat().st_mtime
    except FileNotFoundError as exc:
        if broken_link(path) is not None:  # a link to a file not there: named, not taken for no run kept
            raise read_failure(path, exc) from exc
        return False
    except OSError as exc:
        raise read_failure(path, exc, hint="check the permissions of its folder") from exc
    return not saved or kept > saved[0][1]


def _read(path: Path) -> str:
    """The text of the last run's record."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise LocalgenError(f"cannot read {path}, the last run's record: {why}",
                            hint="delete it to continue the latest saved conversation instead") from exc


@contextlib.contextmanager
def _held() -> Iterator[None]:
    """Hold the last run for this process while it becomes a saved conversation (two runs continuing it at once
    would make two): another run waits for that, LOCK_WAIT_S at most."""
    folder = settings().data_dir
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            newly = hold(folder, LOCK_NAME, hint="")
            break
        except ConversationBusyError:
            if time.monotonic() > deadline:
                raise ConversationBusyError("another localgen run is saving the last run as a conversation"
                                            ) from None  # (a run's hint for a busy conversation is added)
            time.sleep(0.05)
    try:
        yield
    finally:
        if newly:
            release(folder, LOCK_NAME)


def _forget(path: Path, text: str) -> None:
    """Remove the last run's record, now a saved conversation, unless a newer plain run has replaced it meanwhile.

    It is moved aside first (atomically): a record written after that is never touched, and one written between
    the save and the move is moved back. A record left behind (a crash, a folder that refuses) is older than the
    conversation made of it, so --continue passes it over.
    """
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        os.rename(path, aside)
    except OSError:
        return
    try:
        if aside.read_text(encoding="utf-8") != text:  # a later plain run's: it stays the last run
            os.link(aside, path)  # unless a later one still is there already
    except (OSError, UnicodeDecodeError):
        pass
    finally:
        with contextlib.suppress(OSError):
            aside.unlink()
