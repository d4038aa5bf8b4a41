"""A chat conversation: its messages, its context budget, and its JSON format (conversation_store saves it)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path

from localgen.chat import Message
from localgen.conversation_json import LONE_SURROGATE, TurnTexts, holds_lone_surrogates, plain, record_bytes
from localgen.conversation_names import AUTOMATIC_NAME, check_name, command_words
from localgen.conversation_turn import AnswerDetails as AnswerDetails  # (imported from here too)
from localgen.conversation_turn import Turn, turn_from_json, unknown_fields, with_extra
from localgen.conversation_turn import checked_details as checked_details
from localgen.errors import ContextOverflowError, LocalgenError
from localgen.fit import fewest_tokens, text_bytes
from localgen.units import iso_time

FORMAT_VERSION = 1
_NOT_SAVED = frozenset({"on_disk", "as_left", "link_target"})  # what this process knows of its file
NO_SYSTEM_PROMPT = ("none", "off")  # chat's /system WORD and run's -s WORD: no system prompt given, the template's own
_NO_FILE_NAME_BYTE = re.compile("[\ud800-\udc7f\udd00-\udfff]")  # lone surrogates but surrogateescape's \udcXX


def asks_for_no_system_prompt(text: str | None) -> bool:
    """Whether a system prompt given (chat's and run's -s, chat's /system) is the word none or off: no system prompt
    given, the template's own."""
    return text is not None and text.strip().lower() in NO_SYSTEM_PROMPT


def _now() -> str:
    """The current time as an ISO 8601 string."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ForeignFormatError(LocalgenError):
    """A saved conversation in a format this localgen does not read (another version wrote it): kept, never damaged."""

    def __init__(self, message: str, hint: str | None = None, *, format_version: int) -> None:
        super().__init__(message, hint)
        self.format_version = format_version


class MessageTooLongError(ContextOverflowError):
    """A last exchange too long for the context even alone; tokens: what its prompt takes, counted, or (counted
    False) at least so many by its size."""

    def __init__(self, message: str, *, tokens: int, counted: bool) -> None:
        super().__init__(message)
        self.tokens = tokens
        self.counted = counted


class DamagedConversationError(LocalgenError):
    """A saved conversation file that cannot be read back (not JSON, wrong shape, not UTF-8); name is its own, and
    removable says whether `conversations rm` deletes what is there (a folder it does not)."""

    def __init__(self, message: str, hint: str | None = None, *, name: str, removable: bool = True) -> None:
        super().__init__(message, hint)
        self.name = name
        self.removable = removable

    def left_untouched(self, other: str | None = None) -> DamagedConversationError:
        """This error with a command line's hint: how to delete what is there, and (other) how to go on with
        another conversation."""
        remove = f"move it away or delete it (`localgen {command_words('conversations rm', self.name)}`)" \
            if self.removable else "move that folder away"
        hint = f"it was left untouched: {remove}" + (f", or go on with another: {other}" if other else "")
        return DamagedConversationError(self.message, hint=hint, name=self.name, removable=self.removable)


@dataclass
class Conversation:
    """The system prompt and the exchanges of one chat, plus what to save with it."""

    name: str
    system: str | None = None
    turns: list[Turn] = field(default_factory=list)
    model: str | None = None
    settings: dict[str, object] = field(default_factory=dict)
    created: str = field(default_factory=_now)
    updated: str = field(default_factory=_now)
    context_start: int = 0  # turns before this index are kept but no longer sent to the model
    ctx_size: int | None = None  # the --ctx-size the chat was given (None: the model's default), for --resume
    on_disk: bool = field(default=False, repr=False)  # its file is ours to overwrite (saved or loaded)
    as_left: bytes | None = field(default=None, repr=False, compare=False)  # its file as it last read or wrote it
    link_target: Path | None = field(default=None, repr=False, compare=False)  # a link's file: saves go there
    extra: dict[str, object] = field(default_factory=dict, repr=False)  # fields localgen does not know, kept as read

    def __post_init__(self) -> None:
        self._turn_texts = TurnTexts()  # each exchange's text as last written (not a field: never saved or copied)

    @classmethod
    def new(cls, *, system: str | None, model: str | None) -> Conversation:
        """A fresh conversation with a time-stamped name."""
        return cls(name=datetime.now().strftime(AUTOMATIC_NAME), system=system, model=model)

    def messages(self, turns: list[Turn] | None = None) -> list[Message]:
        """The messages a template sees: system, then each exchange in context (an unanswered last turn ends it)."""
        result = [Message("system", self.system)] if self.system is not None else []  # "": the template's none
        for turn in self.in_context() if turns is None else turns:
            result.append(Message("user", turn.user))
            if turn.answer is not None:
                result.append(Message("assistant", turn.answer))
        return result

    def texts(self) -> list[str]:
        """Its system prompt and the texts of every exchange, those out of the context too (a larger context than
        the last one brings them back)."""
        return [message.content for message in self.messages(self.turns)]

    def in_context(self) -> list[Turn]:
        """The exchanges the model sees: those from context_start on, and always the last one (earlier ones stay
        saved, out of context)."""
        return self.turns[min(self.context_start, max(len(self.turns) - 1, 0)):]

    def fit(self, count_tokens: Callable[[list[Message]], int], budget: int, longest_token: int,
            made_of: str = "") -> int:
        """Make the prompt fit budget tokens by moving context_start past old exchanges; return how many left
        (longest_token: the bytes of the vocabulary's longest token, for fit.fewest_tokens).

        Nothing is deleted: earlier exchanges stay in the conversation (and its file), out of the model's context.
        When it must move, context_start moves far enough at once to bring the prompt down to about half the budget,
        so that the turns after it extend the same prompt and reuse the KV cache instead of shifting it every turn.
        When the last exchange cannot fit even alone, nothing changes and MessageTooLongError is raised: at once,
        before anything is counted, where its size alone shows it (fewest_tokens_alone); its message names made_of,
        what the message holds (attached.prompt_parts: 'with /file notes.txt').
        """
        start = max(0, min(self.context_start, len(self.turns) - 1))  # the last turn is always in context
        least = self.fewest_tokens_alone(longest_token)
        if least > budget:  # a tokenizer would spend seconds on a long text to say so
            raise self._overflow(least, budget, counted=False, made_of=made_of)

        def tokens_from(first: int) -> int:
            return count_tokens(self.messages(self.turns[first:]))

        def fewest_from(first: int) -> int:  # by size alone: a long history is not tokenized where it cannot fit
            return fewest_tokens(sizes[first], longest_token)

        sizes = self._suffix_bytes()
        if fewest_from(start) <= budget and tokens_from(start) <= budget:
            self.context_start = start
            return 0
        last = len(self.turns) - 1
        alone = tokens_from(last)
        if alone > budget:
            raise self._overflow(alone, budget, counted=True, made_of=made_of)
        limit = budget // 2 if alone <= budget // 2 else budget
        low = start + 1
        while low < last and fewest_from(low) > limit:
            low += 1
        first = _first_at_most(tokens_from, low, last, limit)
        self.context_start = first
        return first - start

    def _suffix_bytes(self) -> list[int]:
        """For each turn, the UTF-8 bytes of the messages from it to the end, the system prompt's included: a bound
        by size alone where the chat template copies each message (one that drops earlier answers' reasoning, as
        Qwen3's does, makes more of an old exchange leave the context than had to, never a prompt that overflows)."""
        sizes = [text_bytes(self.system)]
        for turn in reversed(self.turns):
            sizes.append(sizes[-1] + text_bytes(turn.user, turn.answer))
        return sizes[::-1]

    def fewest_tokens_alone(self, longest_token: int) -> int:
        """The fewest tokens the last exchange and the system prompt can take however they tokenize (by their size,
        as run bounds its prompt: fit.fewest_tokens)."""
        return fewest_tokens(text_bytes(*(message.content for message in self.messages(self.turns[-1:]))),
                             longest_token)

    def _overflow(self, tokens: int, budget: int, *, counted: bool, made_of: str) -> MessageTooLongError:
        """The error for a last exchange that needs tokens (counted, or at least so many) where budget are free."""
        needs = ("this message and the system prompt need", "them") if self.system else ("this message needs", "it")
        return MessageTooLongError(  # the chat session adds the help that applies there (ChatSession._make_room)
            f"{needs[0]} {'' if counted else 'at least '}{tokens:,} tokens{f' {made_of},' if made_of else ''} but only "
            f"{budget:,} are free for {needs[1]} in the context", tokens=tokens, counted=counted)

    def to_json(self, *, touch: bool = True) -> str:
        """The conversation as readable JSON (touch: updated now, as when saving)."""
        return self.json_bytes(touch=touch).decode("utf-8")

    def json_bytes(self, *, touch: bool = True) -> bytes:
        """to_json's text in UTF-8, as its file holds it (each exchange's text is kept from the last time)."""
        saved = (item.name for item in fields(self) if item.name not in _NOT_SAVED)
        record = {"format": FORMAT_VERSION, **{name: None if name == "turns" else plain(getattr(self, name))
                                               for name in saved}}
        return record_bytes(with_extra(record | ({"updated": _now()} if touch else {})),
                            self._turn_texts.texts(self.turns))

    @classmethod
    def from_json(cls, text: str, source: Path, *, name: str | None = None) -> Conversation:
        """Parse a saved conversation, refusing anything malformed (name: the one it goes by, its file's, whatever
        valid name it records; without it, the recorded one)."""
        with _damage_in(source):
            if not text.strip():
                raise ValueError("the file is empty")
            parsed = parsed_json(text)
        return cls.from_parsed(parsed, source, name=name, text=text)

    @classmethod
    def from_parsed(cls, parsed: object, source: Path, *, name: str | None = None,
                    text: str | None = None) -> Conversation:
        """A saved conversation from its file's JSON value (parsed_json's), refusing anything malformed as
        from_json does (text: the file's, where known, so that one without a lone surrogate is not walked for
        them)."""
        with _damage_in(source):
            data = parsed if text is not None and not _may_hold_lone_surrogates(text) else \
                _without_lone_surrogates(parsed)
            _check_format(data, source)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            if data.get("format") != FORMAT_VERSION:
                raise ValueError("no 'format'" if "format" not in data else "unknown format")
            if not isinstance(data["turns"], list):
                raise ValueError("'turns' is not a list")
            turns = [turn_from_json(t) for t in data["turns"]]
            if any(turn.answer is None for turn in turns):  # a conversation never saves a question without answer
                raise ValueError("a turn has no answer")
            system, model = data.get("system"), data.get("model")
            settings_ = _stored_settings(data.get("settings") or {})
            if not all(v is None or isinstance(v, str) for v in (system, model)):
                raise ValueError("'system' and 'model' must be text")
            if model is not None and not model.strip():  # a model is recorded by name or path, or not at all
                raise ValueError("'model' is empty")
            _check_settings(settings_)
            start, ctx_size = data.get("context_start", 0), data.get("ctx_size")
            if not isinstance(start, int) or isinstance(start, bool) or start < 0:
                raise ValueError("'context_start' is not a turn index")
            _check_ctx_size(ctx_size)
            recorded = check_name(str(data["name"]))  # one no conversation can have: by hand, or worse
            return cls(name=recorded if name is None else name, system=system, turns=turns, model=model,
                       settings=settings_, context_start=min(start, max(len(turns) - 1, 0)), ctx_size=ctx_size,
                       **_times(data, source),
                       extra=unknown_fields(data, cls, also_known=frozenset({"format"})))


@contextlib.contextmanager
def _damage_in(source: Path) -> Iterator[None]:
    """Say what is malformed in the saved conversation source as a DamagedConversationError (another version's
    format stays a ForeignFormatError)."""
    try:
        yield
    except ForeignFormatError:
        raise
    except (ValueError, KeyError, TypeError, RecursionError, LocalgenError) as exc:
        reason = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) else \
            "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise DamagedConversationError(f"{source} is not a valid saved conversation ({reason})",
                                       hint="it was left untouched; start a new chat or load another",
                                       name=source.stem) from exc


def _times(data: dict, source: Path) -> dict[str, str]:
    """When a saved conversation started and was last saved; where its file does not say, the latest time known
    for it (its recorded update, else the file's own time), never the time it was read."""
    try:
        written = iso_time(source.stat().st_mtime) or _now()
    except OSError:
        written = _now()
    updated = str(data.get("updated", written))
    return {"created": str(data.get("created", updated)), "updated": updated}


def parsed_json(text: str) -> object:
    """The JSON value of a saved file's text; a ValueError that says in words where and why it is not JSON (nested
    deeper than the parser goes too: every reader of saved files takes it as damage)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except json.JSONDecodeError as exc:
        if "\0" in text and exc.pos < len(text.rstrip()):
            raise ValueError("it holds NUL bytes: binary data, not JSON") from None
        if _ends_early(text, exc):  # a save cut short (a full disk, a copy stopped), or a bracket left out
            raise ValueError("its JSON ends before it is complete") from None
        what = exc.msg.removesuffix(" at").removesuffix(" starting")  # Python's "Invalid control character at"
        raise ValueError(f"not JSON at line {exc.lineno}, column {exc.colno}: {what[0].lower()}{what[1:]}") from None


def _ends_early(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether JSON text fails only for ending too soon: at its end, in a string never closed, or in a value cut off
    with nothing after it (tru, 1., \\u12)."""
    if exc.msg.startswith("Extra data"):  # a whole value, then more: not cut short
        return False
    rest = text[exc.pos:].rstrip()
    return not rest or exc.msg.startswith("Unterminated string") or not re.search(r'[\s{}\[\],:"]', rest)


def _check_format(data: object, source: Path) -> None:
    """Refuse, as kept rather than damaged, a conversation another localgen version saved in another format."""
    found = data.get("format") if isinstance(data, dict) else None
    if isinstance(found, int) and not isinstance(found, bool) and found != FORMAT_VERSION:
        raise ForeignFormatError(f"{source} is in conversation format {found}, which this localgen does not read "
                                 f"(it reads format {FORMAT_VERSION})",
                                 hint="it was left untouched for the localgen version that wrote it; go on with "
                                      "another conversation", format_version=found)


def _first_at_most(tokens_from: Callable[[int], int], low: int, high: int, limit: int) -> int:
    """The smallest first turn in [low, high] whose prompt takes at most limit tokens (tokens_from(high) does).

    A binary search: the prompt only shrinks as its first turn moves later, so a long chat takes a few renders.
    """
    while low < high:
        middle = (low + high) // 2
        if tokens_from(middle) <= limit:
            high = middle
        else:
            low = middle + 1
    return high


def _may_hold_lone_surrogates(text: str) -> bool:
    """Whether JSON text's values may hold a lone surrogate: by a \\uXXXX escape (its \\ud at least), or in the text
    itself where it was not read as UTF-8 (a quick look: the walk over every value takes 10 times as long)."""
    return "\\ud" in text or "\\uD" in text or holds_lone_surrogates(text)


def _without_lone_surrogates(value: object, *, path: bool = False) -> object:
    """Parsed JSON with each half of a UTF-16 pair written alone (\\ud83c: no character, and no UTF-8 for it) as
    U+FFFD, as other text that is not valid becomes; but for a model's path (path: a "model" value), whose file
    name's bytes that are not UTF-8 stay surrogateescape's \\udcXX, which os.fsencode turns back into those bytes."""
    if isinstance(value, str):
        return (_NO_FILE_NAME_BYTE if path else LONE_SURROGATE).sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(key): _without_lone_surrogates(item, path=key == "model")
                for key, item in value.items()}
    return value


def _stored_settings(saved: object) -> object:
    """Saved settings as a session keeps them: -1 for seed or max_tokens (as -n takes it) is none."""
    from localgen.params import stored_setting

    return {k: stored_setting(k, v) for k, v in saved.items()} if isinstance(saved, dict) else saved


def _check_ctx_size(ctx_size: object) -> None:
    """A saved 'ctx_size' is absent (the model's default) or one that --ctx-size takes."""
    from localgen.params import MAX_CONTEXT_LIMIT, MIN_CONTEXT

    if ctx_size is None:
        return
    if not isinstance(ctx_size, int) or isinstance(ctx_size, bool):
        raise ValueError("'ctx_size' is not a context size")
    if not MIN_CONTEXT <= ctx_size <= MAX_CONTEXT_LIMIT:
        raise ValueError(f"'ctx_size' is not a context size: {ctx_size:,} is outside {MIN_CONTEXT}.."
                         f"{MAX_CONTEXT_LIMIT:,} tokens")


def _check_settings(saved: object) -> None:
    """Saved sampling settings and stop strings must be ones a chat could have used."""
    from localgen.params import CHAT_SETTINGS, STOP_SETTING, GenerationLimits, SamplingParams, check_stop_strings

    if not isinstance(saved, dict):
        raise ValueError("'settings' is not an object")
    stops = saved.get(STOP_SETTING, [])
    if not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops):
        raise ValueError(f"setting '{STOP_SETTING}' is not a list of stop strings")
    check_stop_strings(tuple(stops))  # UsageError (a LocalgenError) for an empty one
    values = {k: v for k, v in saved.items() if k in CHAT_SETTINGS and v is not None}
    for key, value in values.items():
        whole = CHAT_SETTINGS[key] is int
        if not isinstance(value, int if whole else (int, float)) or isinstance(value, bool):
            raise ValueError(f"setting '{key}' is not a {'whole ' if whole else ''}number")
    GenerationLimits(max_tokens=values.pop("max_tokens", None))  # UsageError (a LocalgenError) when out of range
    SamplingParams(**values)
