"""Conversations and chat templates: messages rendered in a sandbox, then tokenized."""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache, wraps
from types import FrameType
from typing import TYPE_CHECKING, Any

from localgen.errors import LocalgenError, TemplateError

if TYPE_CHECKING:
    from jinja2 import Environment, Template

    from localgen.engine import Engine

TEMPLATE_TIME_LIMIT_S = 2.0
TEMPLATE_OUTPUT_LIMIT_CHARS = 4 * 1024 * 1024  # plus twice the messages' own length
TEMPLATE_SOURCE_LIMIT_CHARS = 1024 * 1024
TEMPLATE_MEMORY_LIMIT_BYTES = 512 * 1024 * 1024
TEMPLATE_INT_LIMIT_BITS = 100_000
TEMPLATE_HINT = "pass a working one with --chat-template FILE (or a `template` override in models.toml), or use --raw"


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: str
    content: str

    def to_dict(self) -> dict[str, str]:
        """The {role, content} dict chat templates expect."""
        return {"role": self.role, "content": self.content}


class _TemplateRaised(Exception):
    """A template called raise_exception()."""


class _TemplateTimeout(BaseException):
    """A template ran past its time limit (a BaseException, so no `except Exception` inside Jinja swallows it)."""


class _OutputTooLarge(Exception):
    """A template's output grew past its size limit."""


class _TooLarge(Exception):
    """A template asked for a string, number or sequence too large to build."""


_LIMITS = threading.local()  # the size limit of the render running in this thread
_RLIMIT_TURN = threading.Lock()  # one render at a time sets and restores the process's memory limit
_FORMAT_WIDTH = re.compile(r"%[-#0 +]*(?:\*|\d{7,})|%[-#0 +]*\d*\.(?:\*|\d{7,})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _raise_exception(message: str) -> None:
    """The raise_exception() helper that Hugging Face chat templates call."""
    raise _TemplateRaised(message)


def _strftime_now(fmt: str) -> str:
    """The strftime_now() helper some templates use for today's date."""
    return datetime.now().strftime(fmt)


def _size_limit() -> int:
    """The largest string or sequence the current render may build."""
    return int(getattr(_LIMITS, "chars", TEMPLATE_OUTPUT_LIMIT_CHARS))


def _refuse(what: str) -> None:
    """Stop a template that asked for something too large."""
    raise _TooLarge(what)


def _length(value: object) -> int:
    """The length of a string or sequence, else 0."""
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else 0


def _check_binop(operator: str, left: object, right: object) -> None:
    """Refuse arithmetic with a huge result: string repetition, giant integers, huge % widths."""
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "*":
        count = right if isinstance(right, int) else left if isinstance(left, int) else 1
        if max(_length(left), _length(right)) * max(int(count), 0) > _size_limit():
            _refuse("a repetition larger than the output limit")
        if ints and int(left).bit_length() + int(right).bit_length() > TEMPLATE_INT_LIMIT_BITS:
            _refuse("a product of huge integers")
    elif operator == "**":
        if ints and abs(int(left)) > 1 and int(right) * int(left).bit_length() > TEMPLATE_INT_LIMIT_BITS:
            _refuse("a huge power")
    elif operator == "+":
        if _length(left) + _length(right) > _size_limit():
            _refuse("a concatenation larger than the output limit")
    elif operator == "%" and isinstance(left, str) and _FORMAT_WIDTH.search(left):
        _refuse("a %-format with a huge width")


def _check_arguments(args: Sequence[object], kwargs: dict[str, Any]) -> None:
    """Refuse widths and counts beyond the output limit (center(10**9), batch(10**9), tojson(indent=10**9))."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and abs(value) > _size_limit():
            _refuse(f"a width or count of {value:,}")


def _checked_filter(func: Callable[..., Any]) -> Callable[..., Any]:
    """A filter whose width and count arguments are checked first."""
    skip = 2 if getattr(func, "jinja_pass_arg", None) is not None else 1  # the context, then the value

    @wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _check_arguments(args[skip:], kwargs)
        return func(*args, **kwargs)

    return checked


@lru_cache(maxsize=1)
def _environment() -> Environment:
    """Jinja2's immutable sandbox, with size checks on the operators, filters and methods that can explode."""
    from jinja2.runtime import Context
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedSandbox(ImmutableSandboxedEnvironment):
        """The immutable sandbox, refusing operations whose result would be huge."""

        intercepted_binops = frozenset({"*", "**", "+", "%"})

        def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
            _check_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(getattr(__obj, "__self__", None), (str, bytes, list, tuple)):
                _check_arguments(args, kwargs)  # 'x'.center(10**9), 'x'.zfill(10**9), ...
            return super().call(__context, __obj, *args, **kwargs)

    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters = {name: _checked_filter(func) for name, func in env.filters.items()}
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    return env


@lru_cache(maxsize=8)
def _compile(source: str) -> Template:
    """Compile a chat template in the bounded sandbox (call it under _guarded: folding runs template code)."""
    return _environment().from_string(source)


def _one_line(text: object, limit: int = 200) -> str:
    """Text from a template, safe for one terminal line: no control characters, at most limit characters."""
    flat = " ".join(_CONTROL.sub(" ", str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _address_space() -> tuple[int, int, int] | None:
    """(current size, soft limit, hard limit) of this process's address space, where Linux tells us."""
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as handle:
            size = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError, IndexError):
        return None
    return size, soft, hard


def _run_guarded(work: Callable[[], str], deadline: float, max_chars: int) -> str:
    """Run template code with a deadline checked on every Python line it runs, and a cap on new memory.

    The memory cap is the process's: renders take turns (a chat renders on two threads while a message is typed),
    so that each restores the limit it found, not one another render set.
    """
    with _RLIMIT_TURN:
        return _run_capped(work, deadline, max_chars)


def _run_capped(work: Callable[[], str], deadline: float, max_chars: int) -> str:
    """_run_guarded's work, with the process's memory limit to itself."""
    import resource

    def trace(frame: FrameType, event: str, arg: object) -> Callable[..., object] | None:
        if time.monotonic() > deadline:
            raise _TemplateTimeout
        return trace if frame.f_code.co_filename == "<template>" else None  # every line of template code

    space = _address_space()
    capped = False
    if space is not None:
        size, soft, hard = space
        cap = size + TEMPLATE_MEMORY_LIMIT_BYTES
        if (soft == resource.RLIM_INFINITY or soft > cap) and (hard == resource.RLIM_INFINITY or hard >= cap):
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))  # a huge allocation raises MemoryError
            capped = True
    previous = sys.gettrace()
    _LIMITS.chars = max_chars
    sys.settrace(trace)
    try:
        return work()
    finally:
        sys.settrace(previous)
        _LIMITS.chars = TEMPLATE_OUTPUT_LIMIT_CHARS
        if capped and space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (space[1], space[2]))


def _failure(exc: BaseException, model_name: str, hint: str) -> TemplateError:
    """The user-facing error for a template that failed to compile or render."""
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import SecurityError

    if isinstance(exc, TemplateSyntaxError):
        what = f"is not valid Jinja: {_one_line(exc.message)} (line {exc.lineno})"
    elif isinstance(exc, _TemplateRaised):
        what = f"refused the messages: {_one_line(exc)}"
    elif isinstance(exc, _TemplateTimeout):
        what = f"took over {TEMPLATE_TIME_LIMIT_S:g} s and was stopped"
    elif isinstance(exc, _OutputTooLarge):
        what = f"output exceeds {exc.args[0]:,} characters"
    elif isinstance(exc, _TooLarge):
        what = f"tried to build something too large and was stopped: {exc}"
    elif isinstance(exc, SecurityError):
        what = f"failed a sandbox check: {_one_line(exc)}"
    elif isinstance(exc, MemoryError):
        what = f"needs over {TEMPLATE_MEMORY_LIMIT_BYTES // 2**20} MiB of memory and was stopped"
    elif isinstance(exc, (RecursionError, SyntaxError)):
        what = "is nested or recursive too deeply"
    else:
        what = f"failed: {type(exc).__name__}: {_one_line(exc)}"
    return TemplateError(f"{_one_line(model_name)}: the chat template {what}", hint=hint)


def render_template(source: str, messages: Sequence[Message], *, bos_token: str, eos_token: str,
                    add_generation_prompt: bool = True, model_name: str = "this model",
                    hint: str = TEMPLATE_HINT) -> str:
    """Render a chat template safely: sandboxed, and bounded in time, memory and output size.

    model_name names where the template came from in errors (the model, or a --chat-template file); hint
    says what to do about one.
    """
    _check_length(source, model_name, hint)
    context = {
        "messages": [m.to_dict() for m in messages],
        "bos_token": bos_token,
        "eos_token": eos_token,
        "add_generation_prompt": add_generation_prompt,
    }
    max_chars = TEMPLATE_OUTPUT_LIMIT_CHARS + 2 * sum(len(m.content) for m in messages)
    deadline = time.monotonic() + TEMPLATE_TIME_LIMIT_S

    def work() -> str:
        return "".join(_bounded(_compile(source).generate(context), max_chars))

    try:
        return _run_guarded(work, deadline, max_chars)
    except (Exception, _TemplateTimeout) as exc:  # a hostile or broken template must never crash the process
        raise _failure(exc, model_name, hint) from None


def _check_length(source: str, model_name: str, hint: str) -> None:
    """Refuse a chat template too long to be one."""
    if len(source) > TEMPLATE_SOURCE_LIMIT_CHARS:
        raise TemplateError(f"{_one_line(model_name)}: the chat template is {len(source):,} characters long "
                            f"(limit {TEMPLATE_SOURCE_LIMIT_CHARS:,})", hint=hint)


def check_template(source: str, *, model_name: str, hint: str) -> None:
    """Refuse now a chat template that render_template would refuse for its length or its syntax."""
    _check_length(source, model_name, hint)
    try:
        _run_guarded(lambda: _compile(source), time.monotonic() + TEMPLATE_TIME_LIMIT_S, TEMPLATE_OUTPUT_LIMIT_CHARS)
    except (Exception, _TemplateTimeout) as exc:
        raise _failure(exc, model_name, hint) from None


def _bounded(pieces: Iterator[str], max_chars: int) -> Iterator[str]:
    """Pass template output through, stopping at the size limit."""
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > max_chars:
            raise _OutputTooLarge(max_chars)
        yield piece


@dataclass(frozen=True)
class PromptFormat:
    """How messages become prompt text for one model: its template, or plain completion."""

    template: str | None
    bos_token: str
    eos_token: str
    adds_bos: bool
    model_name: str  # where the template came from, for errors
    template_hint: str = TEMPLATE_HINT
    control_tokens: frozenset[str] = frozenset()  # texts the tokenizer reads as control tokens (<|im_end|>, ...)

    @property
    def is_chat(self) -> bool:
        """True when messages go through a chat template."""
        return self.template is not None

    @classmethod
    def for_engine(cls, engine: Engine, *, override: str | None, raw: bool, model_name: str,
                   template_hint: str = TEMPLATE_HINT, control_tokens: frozenset[str] = frozenset()) -> PromptFormat:
        """The prompt format of a loaded model (override template wins; raw forces plain text)."""
        template = None if raw else (override or engine.chat_template())
        return cls(template=template, bos_token=engine.bos_text, eos_token=engine.eos_text,
                   adds_bos=engine.adds_bos, model_name=model_name, template_hint=template_hint,
                   control_tokens=control_tokens)

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """Messages as prompt text: the template's output, or the non-empty texts joined by blank lines."""
        if self.template is None:
            return "\n\n".join(m.content for m in messages if m.content)
        text = render_template(self.template, messages, bos_token=self.bos_token, eos_token=self.eos_token,
                               add_generation_prompt=add_generation_prompt, model_name=self.model_name,
                               hint=self.template_hint)
        if not text and any(m.content for m in messages):
            raise TemplateError(f"{_one_line(self.model_name)}: the chat template turns the messages into no text",
                                hint=self.template_hint)
        return text

    def left_out_warning(self, text: str, messages: Sequence[Message]) -> str | None:
        """A warning when the rendered prompt text lacks the text of the last user message (stripped, not empty): the
        chat template left it out, and the model does not see it; else None."""
        last = next((m.content.strip() for m in reversed(messages) if m.role == "user"), "")
        if self.template is None or not last or last in text:
            return None
        return (f"{_one_line(self.model_name)}: the chat template left the message out of the prompt: the model does "
                f"not see it ({self.template_hint})")

    def default_system(self) -> str | None:
        """The system prompt the chat template writes where the messages carry none (SmolLM2's and Qwen's do),
        else None."""
        if self.template is None:
            return None
        system, user = "\ue000system\ue000", "\ue000user\ue000"  # private-use marks no template writes
        try:
            marked = self.render([Message("system", system), Message("user", user)], add_generation_prompt=False)
            plain = self.render([Message("user", user)], add_generation_prompt=False)
        except LocalgenError:
            return None
        opening, found, rest = marked.partition(system)
        between = rest.partition(user)[0]  # the system block's end and the user block's start
        if not found or not plain.startswith(opening) or between + user not in plain:
            return None
        return plain[len(opening):plain.index(between + user)].strip() or None

    def tokenize(self, engine: Engine, text: str) -> list[int]:
        """Tokenize rendered text (a template's control tokens read as such), adding BOS only when the model wants
        it and the text lacks it."""
        return engine.tokenize(text, add_special=self._needs_bos(text), parse_special=self.is_chat)

    def _needs_bos(self, text: str) -> bool:
        """Whether tokenizing text must add the BOS token."""
        return self.adds_bos and not (self.bos_token and text.startswith(self.bos_token))

    def prompt(self, engine: Engine, messages: Sequence[Message]) -> tuple[str, list[int]]:
        """The prompt text and tokens for messages.

        The template's own text is read with its control tokens; the messages' texts are not: a message or
        document that contains '<|im_end|>' gives the model those characters, not a turn's end. Before rendering,
        each control-token text inside a message is defused with a character the messages do not use (so the
        template still sees, trims or rewrites the message's real text); in the rendered prompt, each defused
        occurrence is tokenized on its own, as plain text.
        """
        pattern = _control_pattern(self.control_tokens) if self.is_chat else None
        if pattern is None or not any(pattern.search(m.content) for m in messages):
            text = self.render(messages)
            return text, self.tokenize(engine, text)
        mark = _unused_character(messages)
        defused = self.render([Message(m.role, pattern.sub(lambda found: found[0][0] + mark + found[0][1:],
                                                           m.content)) for m in messages])
        texts: list[str] = []
        tokens: list[int] = []
        for number, piece in enumerate(_defused_pattern(self.control_tokens, mark).split(defused)):
            template_text = number % 2 == 0  # the split alternates template text and a defused occurrence
            part = piece.replace(mark, "")  # a defused text a template cut short is left as plain characters
            add_bos = number == 0 and self._needs_bos(part)
            tokens += engine.tokenize(part, add_special=add_bos, parse_special=template_text)
            texts.append(part)
        return "".join(texts), tokens


def _unused_character(messages: Sequence[Message]) -> str:
    """A private-use character that no message contains."""
    for code in range(0xE000, 0xF900):
        if not any(chr(code) in m.content for m in messages):
            return chr(code)
    raise TemplateError("the messages use every private-use character", hint="send less unusual text")


@lru_cache(maxsize=8)
def _control_pattern(tokens: frozenset[str]) -> re.Pattern[str] | None:
    """A pattern finding any of the control tokens' texts (None when there are none)."""
    if not tokens:
        return None
    return re.compile("|".join(re.escape(token) for token in sorted(tokens, key=len, reverse=True)))


@lru_cache(maxsize=8)
def _defused_pattern(tokens: frozenset[str], mark: str) -> re.Pattern[str]:
    """A pattern that splits out control-token texts defused by mark after their first character (captured)."""
    defused = (re.escape(token[0] + mark + token[1:]) for token in sorted(tokens, key=len, reverse=True))
    return re.compile(f"({'|'.join(defused)})")


_LEADING_BLANK_LINES = re.compile(r"\A(?:[^\S\n]*\n)+")  # lines of nothing but spaces


def compose_user_message(instruction: str | None, attachments: Sequence[str], *, exact: bool = False) -> str:
    """Attachments (files, then stdin) first, then the instruction, separated by blank lines; CRLF line ends become
    LF. The instruction goes as typed, but for its blank lines before and its whitespace after: pasted code keeps the
    indentation of its first line, as Ollama keeps it.

    exact keeps every part byte for byte (a plain completion: a trailing newline or space is part of the text),
    adding only the newlines a blank line between two parts still needs.
    """
    if not exact:  # Windows line ends become \n, as a text-mode read makes them
        parts = [a.replace("\r\n", "\n").strip("\n") for a in attachments if a.strip()]
        if instruction and instruction.strip():
            parts.append(_LEADING_BLANK_LINES.sub("", instruction.rstrip()))
        return "\n\n".join(parts)
    text = ""
    for part in [*attachments, instruction or ""]:
        if part:
            text += ("" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n") + part
    return text
