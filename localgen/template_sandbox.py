"""Chat templates rendered in a sandbox: Jinja's, with limits on time, memory, output and the sizes it builds."""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from types import FrameType
from typing import TYPE_CHECKING, Any, ClassVar

from localgen.errors import TemplateError
from localgen.template_budget import (
    TEMPLATE_OUTPUT_LIMIT_CHARS,
    TooLarge,
    check_binop,
    check_method,
    set_size_limit,
    size_limit,
    text_size,
)

if TYPE_CHECKING:
    from jinja2 import Environment, Template

    from localgen.chat import Message

TEMPLATE_TIME_LIMIT_S = 2.0  # of the rendering thread's CPU time: a busy machine or a render's turn waited counts none
TEMPLATE_SOURCE_LIMIT_CHARS = 1024 * 1024
TEMPLATE_MEMORY_LIMIT_BYTES = 512 * 1024 * 1024
TEMPLATE_HINT = "pass a working one with --chat-template FILE (or a `template` override in models.toml), or use --raw"


class TemplateStopped(TemplateError):
    """A chat template stopped at the sandbox's time or memory limit: a render of the same messages may pass another
    time, on a machine less busy."""


class _TemplateRaised(Exception):
    """A template called raise_exception()."""


class _TemplateTimeout(BaseException):
    """A template ran past its time limit (a BaseException, so no `except Exception` inside Jinja swallows it)."""


class _OutputTooLarge(Exception):
    """A template's output grew past its size limit."""


_RLIMIT_TURN = threading.Lock()  # one render at a time sets and restores the process's memory limit
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_LOOP_CONTROL = re.compile(r"^'(break|continue)' (?:outside|not properly in) loop")


def _raise_exception(message: str) -> None:
    """The raise_exception() helper that Hugging Face chat templates call."""
    raise _TemplateRaised(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | str | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """The tojson filter as transformers gives chat templates: json.dumps' text, keys in their order and characters
    as they are (Jinja's own sorts keys and escapes <, >, & and ' for HTML), what a model was trained on; written
    piece by piece, so that the time and output limits stop a huge one (json.dumps' C encoder runs unchecked)."""
    encoder = json.JSONEncoder(ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    return _joined(encoder.iterencode(value))


def _finalize(value: Any) -> Any:
    """A {{ value }}'s value as it is, its text measured first where str() would write it in one C call (a list, a
    dict, a namespace)."""
    if not isinstance(value, str):
        text_size(value, what="the text of a value written out")
    return value


def _joined(pieces: Iterator[str]) -> str:
    """The pieces joined, stopping at the render's output limit."""
    return "".join(_bounded(pieces, size_limit()))


def _strftime_now(fmt: str) -> str:
    """The strftime_now() helper some templates use for today's date."""
    return datetime.now().strftime(fmt)


def render_day(source: str) -> str | None:
    """Today's date where a chat template writes the date (it calls strftime_now), else None: the day a render of it
    holds for."""
    return datetime.now().date().isoformat() if "strftime_now" in source else None


@lru_cache(maxsize=1)
def _environment() -> Environment:
    """Jinja2's immutable sandbox as transformers makes it for chat templates (loop controls, its {% generation %}
    tag and tojson filter), with size checks on the operators, filters and methods that can explode."""
    from jinja2.runtime import Context
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from localgen import template_bounded as bounded
    from localgen import template_compare as compare

    class BoundedSandbox(ImmutableSandboxedEnvironment):
        """The immutable sandbox, refusing operations whose result would be huge, or whose comparisons and hashes
        would walk too long."""

        intercepted_binops = frozenset({"*", "**", "+", "%", "//"})
        code_generator_class = bounded.BoundedCodeGenerator
        checked_concat = staticmethod(bounded.checked_concat)
        concat = staticmethod(bounded.block_text)
        checked_compare = staticmethod(compare.checked_compare)
        checked_in = staticmethod(compare.checked_in)
        checked_chain = staticmethod(compare.checked_chain)
        checked_dict = staticmethod(compare.checked_dict)
        checked_difference = staticmethod(compare.checked_difference)
        checked_slice = staticmethod(compare.checked_slice)

        def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
            check_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(getattr(__obj, "__self__", None), (str, bytes, list, tuple, int)):
                args = check_method(__obj, args, kwargs)  # 'x'.center(10**9), s.replace('x', s), ...
            args = compare.check_compared_arguments(__obj, args)  # [a].index(b), dict(pairs), loop.changed(a)
            return super().call(__context, __obj, *args, **kwargs)

        constant_getitem = ImmutableSandboxedEnvironment.getitem  # m['role']: a constant key hashes at once

        def getitem(self, obj: Any, argument: Any) -> Any:
            """obj[argument] as the sandbox's, a mapping's key hashed measured first (a subscript's, an attribute=
            argument's: |map, |selectattr, |sum, |join look items up through it)."""
            if type(argument) not in (str, int):
                compare.check_key(obj, argument)
            return super().getitem(obj, argument)

        def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
            return bounded.bounded_str_format(self, value)

    bounded.measure_concat_folding()
    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, autoescape=False, finalize=_finalize,
                         extensions=["jinja2.ext.loopcontrols", _generation_tag()])
    filters = bounded.bounded_filters({**env.filters, "tojson": _tojson})
    env.filters = {name: compare.compared_filter(name, func) for name, func in filters.items()}
    env.tests = compare.compared_tests(env.tests)
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now, range=bounded.bounded_range)
    return env


def _generation_tag() -> type:
    """transformers' {% generation %}...{% endgeneration %} tag (its AssistantTracker, which marks the assistant's
    text for training), rendering its body as transformers does when nothing is tracked."""
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.parser import Parser
    from jinja2.runtime import Macro

    class GenerationTag(Extension):
        """{% generation %}BODY{% endgeneration %}: BODY, rendered in a block of its own as transformers' is."""

        tags: ClassVar[set[str]] = {"generation"}

        def parse(self, parser: Parser) -> nodes.Node:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Macro) -> str:
            return str(caller())

    return GenerationTag


@lru_cache(maxsize=8)
def _compile(source: str) -> Template:
    """Compile a chat template in the bounded sandbox (call it under _guarded: folding runs template code)."""
    return _environment().from_string(source)


def one_line(text: object, limit: int = 200) -> str:
    """Text from a template, safe for one terminal line: no control characters (spaces, not a listing's ^K: an error
    quotes a template's words to say where it failed, not to show them as written), at most limit characters."""
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
    """Run template code with a deadline of the thread's CPU time checked on every Python line it runs, and a cap on
    new memory.

    The memory cap is the process's: renders take turns (a chat renders on two threads while a message is typed),
    so that each restores the limit it found, not one another render set. The sandbox is made first, untraced:
    jinja2's import and the sandbox's making run no template code, and take twice as long traced (22 ms CPU: 40).
    """
    _environment()
    with _RLIMIT_TURN:
        return _run_capped(work, deadline, max_chars)


def _run_capped(work: Callable[[], str], deadline: float, max_chars: int) -> str:
    """_run_guarded's work, with the process's memory limit to itself."""
    import resource

    look_again = [time.monotonic() + deadline - time.thread_time()]  # no sooner can the CPU time reach it

    def trace(frame: FrameType, event: str, arg: object) -> Callable[..., object] | None:
        if time.monotonic() > look_again[0]:  # a cheap clock every line; the thread's own only past this
            left = deadline - time.thread_time()
            if left <= 0:
                raise _TemplateTimeout
            look_again[0] = time.monotonic() + left
        return trace if frame.f_code.co_filename == "<template>" else None  # every line of template code

    space = _address_space()
    capped = False
    if space is not None:
        size, soft, hard = space
        cap = size + TEMPLATE_MEMORY_LIMIT_BYTES
        if (soft == resource.RLIM_INFINITY or soft > cap) and (hard == resource.RLIM_INFINITY or hard >= cap):
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))  # a huge allocation raises MemoryError
            capped = True
    def rearm(unraisable: sys.UnraisableHookArgs) -> None:
        """Trace again where a finalizer (a gc callback, a closed generator) swallowed the timeout, as Python then
        drops the tracer: the render's next line stops it."""
        if unraisable.exc_type is _TemplateTimeout:
            sys.settrace(trace)
        else:
            previous_hook(unraisable)

    previous, previous_hook = sys.gettrace(), sys.unraisablehook
    set_size_limit(max_chars)
    sys.settrace(trace)
    sys.unraisablehook = rearm
    try:
        return work()
    finally:
        sys.settrace(previous)
        sys.unraisablehook = previous_hook
        set_size_limit(None)
        if capped and space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (space[1], space[2]))


def _failure(exc: BaseException, model_name: str, hint: str) -> TemplateError:
    """The user-facing error for a template that failed to compile or render."""
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import SecurityError

    loop_control = _LOOP_CONTROL.search(exc.msg or "") if isinstance(exc, SyntaxError) else None
    if isinstance(exc, TemplateSyntaxError):
        what = f"is not valid Jinja: {one_line(exc.message)} (line {exc.lineno})"
    elif loop_control is not None:  # Python's, compiling the template: the Jinja parser lets it through
        what = (f"is not valid Jinja: {{% {loop_control[1]} %}} outside a loop in its own block (a macro's, "
                "{% call %}'s or {% generation %}'s body is one)")
    elif isinstance(exc, _TemplateRaised):
        what = f"refused the messages: {one_line(exc)}"
    elif isinstance(exc, _TemplateTimeout):
        what = f"took over {TEMPLATE_TIME_LIMIT_S:g} s of CPU time and was stopped"
    elif isinstance(exc, _OutputTooLarge):
        what = f"output exceeds {exc.args[0]:,} characters"
    elif isinstance(exc, TooLarge):
        what = f"tried to {exc.attempt} and was stopped: {exc}"
    elif isinstance(exc, SecurityError):
        what = f"failed a sandbox check: {one_line(exc)}"
    elif isinstance(exc, MemoryError):
        what = f"needs over {TEMPLATE_MEMORY_LIMIT_BYTES // 2**20} MiB of memory and was stopped"
    elif isinstance(exc, (RecursionError, SyntaxError)):
        what = "is nested or recursive too deeply"
    else:
        what = f"failed: {type(exc).__name__}: {one_line(exc)}"
    error = TemplateStopped if isinstance(exc, (_TemplateTimeout, MemoryError)) else TemplateError
    return error(f"{one_line(model_name)}: the chat template {what}", hint=hint)


def render_template(source: str, messages: Sequence[Message], *, bos_token: str, eos_token: str,
                    add_generation_prompt: bool = True, model_name: str = "this model",
                    hint: str = TEMPLATE_HINT, variables: Mapping[str, object] | None = None) -> str:
    """Render a chat template safely: sandboxed, and bounded in time, memory and output size.

    model_name names where the template came from in errors (the model, or a --chat-template file); hint
    says what to do about one; variables are more the template may read (enable_thinking, ...).
    """
    _check_length(source, model_name, hint)
    context = {
        **(variables or {}),
        "messages": [m.to_dict() for m in messages],
        "bos_token": bos_token,
        "eos_token": eos_token,
        "add_generation_prompt": add_generation_prompt,
    }
    max_chars = TEMPLATE_OUTPUT_LIMIT_CHARS + 2 * sum(len(m.content) for m in messages)
    deadline = time.thread_time() + TEMPLATE_TIME_LIMIT_S

    def work() -> str:
        return "".join(_bounded(_compile(source).generate(context), max_chars))

    try:
        return _run_guarded(work, deadline, max_chars)
    except (Exception, _TemplateTimeout) as exc:  # a hostile or broken template must never crash the process
        raise _failure(exc, model_name, hint) from None


def _check_length(source: str, model_name: str, hint: str) -> None:
    """Refuse a chat template too long to be one."""
    if len(source) > TEMPLATE_SOURCE_LIMIT_CHARS:
        raise TemplateError(f"{one_line(model_name)}: the chat template is {len(source):,} characters long "
                            f"(limit {TEMPLATE_SOURCE_LIMIT_CHARS:,})", hint=hint)


def check_template(source: str, *, model_name: str, hint: str) -> None:
    """Refuse now a chat template that render_template would refuse for its length or its syntax."""
    _check_length(source, model_name, hint)
    try:
        _run_guarded(lambda: _compile(source), time.thread_time() + TEMPLATE_TIME_LIMIT_S, TEMPLATE_OUTPUT_LIMIT_CHARS)
    except (Exception, _TemplateTimeout) as exc:
        raise _failure(exc, model_name, hint) from None


@lru_cache(maxsize=8)
def template_variables(source: str) -> frozenset[str]:
    """The variables a chat template reads that it does not set itself (none where it is too long or not valid
    Jinja: rendering it says why): one it only sets, in an {% if %} as everywhere, is not read. Parsed untraced:
    parsing, and tracking variables with no constant folded, run no template code (compiling folds constants, which
    does), and take a third of the time traced (Qwen3's template: 32 ms, 86 traced)."""
    from jinja2 import nodes

    from localgen.template_bounded import undeclared_variables

    if len(source) > TEMPLATE_SOURCE_LIMIT_CHARS:
        return frozenset()
    try:
        tree = _environment().parse(source)
        read = {name.name for name in tree.find_all(nodes.Name) if name.ctx == "load"}
        return frozenset(undeclared_variables(tree) & read)  # Jinja counts one set in a branch as read
    except Exception:  # not valid Jinja, or nested too deeply (RecursionError)
        return frozenset()


def _bounded(pieces: Iterator[str], max_chars: int) -> Iterator[str]:
    """Pass template output through, stopping at the size limit."""
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > max_chars:
            raise _OutputTooLarge(max_chars)
        yield piece
