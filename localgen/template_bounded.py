"""Jinja's filters, str.format, range() and ~ for chat templates, each checking the size of what it would build
against the render's budget first: they write the same text as Jinja's own, or refuse."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Callable, Iterable
from functools import lru_cache, update_wrapper, wraps
from types import BuiltinMethodType, MethodType
from typing import TYPE_CHECKING, Any

from jinja2 import compiler, nodes, pass_environment
from jinja2.compiler import CodeGenerator
from markupsafe import Markup

from localgen.template_budget import (
    TEMPLATE_OUTPUT_LIMIT_CHARS,
    TextMeter,
    TooLarge,
    check_arguments,
    check_format_field,
    check_printf,
    check_replace,
    check_size,
    joined_items,
    refuse,
    text_size,
)
from localgen.template_nodes import compared_at_once, numeric

if TYPE_CHECKING:
    from jinja2 import Environment
    from jinja2.compiler import Frame
    from jinja2.nodes import EvalContext

# Jinja's internals below are read where they are used (or with a fallback), so that one renamed in a later Jinja
# breaks only what uses it, never every render
_optimizeconst = getattr(compiler, "optimizeconst", lambda visit: visit)  # without it, `~` is not folded
_MAX_RANGE = 100_000  # jinja2.sandbox.MAX_RANGE's value, where it has none

# the filters that write their value (and arguments) as text with str(), in one C call
_WRITING_FILTERS = frozenset({"capitalize", "center", "e", "escape", "forceescape", "format", "indent", "lower",
                              "pprint", "replace", "safe", "string", "striptags", "title", "trim", "truncate",
                              "upper", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr"})


def bounded_filters(filters: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """Jinja's filters with the size checks: widths and counts on all, the text of those that write one."""
    own = {**filters, "replace": _replace(filters["replace"]), "indent": _indent(filters["indent"]),
           "format": _format(filters["format"]), "join": _join(filters["join"]), "wordwrap": _wordwrap,
           "sum": _sum}
    return {name: _checked_filter(name, func) for name, func in own.items()}


def _checked_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """A filter whose width and count arguments are checked first, and, where it writes its value or arguments as
    text, their text measured first."""
    skip = 2 if getattr(func, "jinja_pass_arg", None) is not None else 1  # the context, then the value
    writes = name in _WRITING_FILTERS

    @wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        check_arguments(args[skip:], kwargs)
        if writes and not (len(args) == skip and not kwargs and type(args[-1]) is str):  # a string is written
            text_size(*args[skip - 1:], *kwargs.values(), what=f"|{name}'s text")
        return func(*args, **kwargs)

    return checked


def _replace(original: Callable[..., str]) -> Callable[..., str]:
    """|replace, refusing a replacement that expands the text past the limit."""

    @wraps(original)
    def replace(eval_ctx: EvalContext, s: object, old: object, new: object, count: int | None = None) -> str:
        check_replace(str(s), str(old), str(new), -1 if count is None else count, what="|replace's text")
        return original(eval_ctx, s, old, new, count)

    return replace


def _indent(original: Callable[..., str]) -> Callable[..., str]:
    """|indent, refusing an indent that, on every line, passes the limit."""

    @wraps(original)
    def indent(s: str, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
        text = str(s)
        lines = len(text.splitlines()) + 1
        check_size(len(text) + lines * (len(width) if isinstance(width, str) else max(width, 0)), "|indent's text")
        return original(s, width, first, blank)

    return indent


def _format(original: Callable[..., str]) -> Callable[..., str]:
    """|format, refusing a %-format that writes too much."""

    @wraps(original)
    def format_(value: str, *args: Any, **kwargs: Any) -> str:
        if not (args and kwargs):  # both: Jinja refuses them
            check_printf(str(value), kwargs or args)
        return original(value, *args, **kwargs)

    return format_


def _join(original: Callable[..., str]) -> Callable[..., str]:
    """|join, measuring the items' text and the separators before joining them."""

    @wraps(original)
    def join(eval_ctx: EvalContext, value: Iterable[Any], d: str = "", attribute: str | int | None = None) -> str:
        if attribute is not None:
            from jinja2.filters import make_attrgetter

            value = map(make_attrgetter(eval_ctx.environment, attribute), value)
        separator = text_size(d, what="|join's separator")
        return original(eval_ctx, joined_items(separator, value, what="|join's text"), d)

    return join


@pass_environment
def _wordwrap(environment: Environment, s: str, width: int = 79, break_long_words: bool = True,
              wrapstring: str | None = None, break_on_hyphens: bool = True) -> str:
    """Jinja's |wordwrap, the wrapped lines counted before they are joined."""
    wrapstring = environment.newline_sequence if wrapstring is None else wrapstring
    paragraphs = [textwrap.wrap(line, width=width, expand_tabs=False, replace_whitespace=False,
                                break_long_words=break_long_words, break_on_hyphens=break_on_hyphens)
                  for line in s.splitlines()]
    separators = sum(max(len(lines) - 1, 0) for lines in paragraphs) + max(len(paragraphs) - 1, 0)
    chars = sum(len(line) for lines in paragraphs for line in lines)
    check_size(chars + separators * len(wrapstring), "|wordwrap's text")
    return wrapstring.join([wrapstring.join(lines) for lines in paragraphs])


@pass_environment
def _sum(environment: Environment, iterable: Iterable[Any], attribute: str | int | None = None,
         start: Any = 0) -> Any:
    """Jinja's |sum, adding lists or tuples in one pass (sum() copies the total so far at every step), their total
    length checked first."""
    if attribute is not None:
        from jinja2.filters import make_attrgetter

        iterable = map(make_attrgetter(environment, attribute), iterable)
    if not isinstance(start, (list, tuple)):
        return sum(iterable, start)
    items = list(iterable)
    same = list(itertools.takewhile(lambda item: isinstance(item, type(start)), items))
    check_size(len(start) + sum(map(len, same)), f"|sum's {type(start).__name__}", "items")
    return sum(items[len(same):], type(start)(itertools.chain(start, *same)))


def bounded_range(*args: int) -> range:
    """The sandbox's range(), refused with the size it asked for past MAX_RANGE numbers."""
    from jinja2 import sandbox

    largest = getattr(sandbox, "MAX_RANGE", _MAX_RANGE)
    numbers = range(*args)
    try:
        count = len(numbers)
    except OverflowError:  # more than fits in a C ssize_t
        count = largest + 1
    if count > largest:
        refuse(f"a range of {count:,} numbers, over the {largest:,} allowed")
    return numbers


def checked_concat(parts: tuple[Any, ...]) -> tuple[Any, ...]:
    """The parts of a `~` concatenation, their text measured before str() writes it."""
    text_size(*parts, what="a ~ concatenation")
    return parts


def block_text(pieces: Iterable[str]) -> str:
    """The text of a block ({% set %}...{% endset %}, a macro's, caller()'s, {% filter %}'s), its pieces measured
    before they are joined."""
    pieces = list(pieces)
    text_size(*pieces, what="a block's text")
    return "".join(pieces)


def measure_concat_folding() -> None:
    """Make Jinja's folding of a constant `~` concatenation at compile time measure its parts' text first in the
    bounded sandbox, leaving one too large to build for the render to refuse where it reaches it (Jinja folds a
    `~` inside any constant expression through Concat.as_const, and allows no node class of one's own). Where a
    later Jinja has no Concat.as_const, there is nothing to patch; where the environment cannot be told, no `~` of
    the bounded sandbox is folded."""
    original = getattr(getattr(nodes, "Concat", None), "as_const", None)
    if original is None or getattr(original, "measured", False):
        return

    def as_const(self: nodes.Concat, eval_ctx: EvalContext | None = None) -> str:
        environment = getattr(eval_ctx if eval_ctx is not None else self, "environment", None)
        if environment is None:  # folded the bounded sandbox's way or not at all
            raise nodes.Impossible
        if not hasattr(environment, "checked_concat"):  # another environment's template
            return original(self, eval_ctx)
        parts = [node.as_const(eval_ctx) for node in self.nodes]
        try:
            text_size(*parts, what="a ~ concatenation")
        except TooLarge:
            raise nodes.Impossible from None
        return "".join(map(str, parts))

    as_const.measured = True  # type: ignore[attr-defined]
    nodes.Concat.as_const = as_const  # type: ignore[method-assign]


class BoundedCodeGenerator(CodeGenerator):
    """Jinja's code generator, sending a `~` concatenation's parts through checked_concat first, a comparison through
    checked_compare, checked_in or checked_chain, a dict literal's keys through checked_dict, a slice through
    checked_slice and a difference through checked_difference (those that can walk a shared part), and folding
    constant output only up to the output limit in all (Jinja joins adjacent ones into one constant, kept with the
    compiled template)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._folded_chars = 0
        if self.optimizer is not None:
            self.optimizer = _bounded_optimizer(self)

    def fold(self, chars: int) -> bool:
        """Count a constant of chars characters folded into the code, False (not to fold it) past the output
        limit in all: it is written when rendered instead, and measured there."""
        self._folded_chars += chars
        return self._folded_chars <= TEMPLATE_OUTPUT_LIMIT_CHARS

    def _output_child_to_const(self, node: nodes.Expr, frame: Frame, finalize: Any) -> str:
        text = super()._output_child_to_const(node, frame, finalize)
        if not self.fold(len(text)):
            raise nodes.Impossible
        return text

    @_optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        """A `~` concatenation as Jinja's, its parts sent through checked_concat first."""
        if frame.eval_ctx.volatile:
            func_name = "(markup_join if context.eval_ctx.volatile else str_join)"
        elif frame.eval_ctx.autoescape:
            func_name = "markup_join"
        else:
            func_name = "str_join"
        self.write(f"{func_name}(environment.checked_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(")))")

    @_optimizeconst
    def visit_Compare(self, node: nodes.Compare, frame: Frame) -> None:
        """A comparison through checked_compare or checked_in, a chain through checked_chain; one that walks no
        shared part as Jinja's."""
        if compared_at_once(node):
            super().visit_Compare(node, frame)
            return
        if len(node.ops) > 1:  # a chain: each operand after the first given as a function, evaluated when reached
            self.write("environment.checked_chain(")
            self.visit(node.expr, frame)
            for operand in node.ops:
                self.write(f", {operand.op!r}, lambda: ")
                self.visit(operand.expr, frame)
            self.write(")")
            return
        operand = node.ops[0]
        if operand.op in ("in", "notin"):
            self.write("(not environment.checked_in(" if operand.op == "notin" else "(environment.checked_in(")
        else:
            self.write(f"(environment.checked_compare({operand.op!r}, ")
        self.visit(node.expr, frame)
        self.write(", ")
        self.visit(operand.expr, frame)
        self.write("))")

    @_optimizeconst
    def visit_Sub(self, node: nodes.Sub, frame: Frame) -> None:
        """A difference through checked_difference (a set's hashes its items); one of numbers as Jinja's."""
        if numeric(node.left) or numeric(node.right):  # messages|length - 1, as Jinja's
            super().visit_Sub(node, frame)
            return
        self.write("environment.checked_difference(")
        self.visit(node.left, frame)
        self.write(", ")
        self.visit(node.right, frame)
        self.write(")")

    @_optimizeconst
    def visit_Getitem(self, node: nodes.Getitem, frame: Frame) -> None:
        """A slice (obj[a:b]) through checked_slice, whose bounds a mapping hashes (Jinja subscripts it directly), a
        constant's subscript (m['role']) through constant_getitem, unmeasured; another as Jinja's, through getitem."""
        if isinstance(node.arg, nodes.Const) and type(node.arg.value) in (str, int):
            self.write("environment.constant_getitem(")
            self.visit(node.node, frame)
            self.write(f", {node.arg.value!r})")
            return
        if not isinstance(node.arg, nodes.Slice):
            super().visit_Getitem(node, frame)
            return
        self.write("environment.checked_slice(")
        self.visit(node.node, frame)
        for bound in (node.arg.start, node.arg.stop, node.arg.step):
            self.write(", ")
            if bound is None:
                self.write("None")
            else:
                self.visit(bound, frame)
        self.write(")")

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        """A dict literal through checked_dict, which measures its keys' hashes; one of constant keys as Jinja's."""
        if all(isinstance(item.key, nodes.Const) for item in node.items):  # constant keys: a literal of its own
            super().visit_Dict(node, frame)
            return
        self.write("environment.checked_dict(")
        for item in node.items:
            self.write("(")
            self.visit(item.key, frame)
            self.write(", ")
            self.visit(item.value, frame)
            self.write("), ")
        self.write(")")


def _bounded_optimizer(generator: BoundedCodeGenerator) -> Any:
    """Jinja's constant folder, counting each constant it folds into the generator's and folding none past the
    output limit in all (each {{ 'x'|center(4000000) }} a 4 MB constant in the code)."""
    from jinja2.optimizer import Optimizer

    class BoundedOptimizer(Optimizer):
        def generic_visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> nodes.Node:
            folded = super().generic_visit(node, *args, **kwargs)
            if folded is node or not isinstance(folded, nodes.Const):
                return folded
            try:
                chars = text_size([folded.value], what="a constant")
            except Exception:  # too large, an int past str()'s digits: left for the render
                chars = TEMPLATE_OUTPUT_LIMIT_CHARS + 1
            return folded if generator.fold(chars) else node

    return BoundedOptimizer(generator.environment)


def undeclared_variables(tree: nodes.Template) -> set[str]:
    """jinja2.meta.find_undeclared_variables without folding constants, so that no template code runs: folding
    wrote each {{ 'x'|center(4000000) }} and joined them (200 in a 5 KB template: 2 GB)."""
    from jinja2.meta import TrackingCodeGenerator

    class UnfoldingTracker(TrackingCodeGenerator):
        """Jinja's introspecting code generator, folding no constant (folding runs a template's filters)."""

        def __init__(self, environment: Environment) -> None:
            super().__init__(environment)
            self.optimizer = None

        def _output_child_to_const(self, node: nodes.Expr, frame: Frame, finalize: Any) -> str:
            raise nodes.Impossible

    tracker = UnfoldingTracker(tree.environment)  # type: ignore[arg-type]
    tracker.visit(tree)
    return tracker.undeclared_identifiers


def _bounded_formatter(base: type[Any]) -> type[Any]:
    """The sandbox's str.format formatter class, measuring each field before it is written."""

    class BoundedFormatter(base):  # type: ignore[misc, valid-type]
        """A formatter refusing fields whose text, with what came before, would pass the render's limit."""

        def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
            self._meter = TextMeter(".format()'s text")
            self._meter.add(len(format_string))
            return super().vformat(format_string, args, kwargs)  # type: ignore[no-any-return]

        def convert_field(self, value: Any, conversion: str | None) -> Any:
            if conversion in ("r", "s", "a"):  # str() or repr(), in one C call
                text_size(value if conversion == "s" else [value], what=".format()'s text")
            return super().convert_field(value, conversion)

        def format_field(self, value: Any, format_spec: str) -> Any:
            check_format_field(self._meter, value, format_spec)
            return super().format_field(value, format_spec)

    return BoundedFormatter


@lru_cache(maxsize=1)
def _formatters() -> tuple[type[Any], type[Any]]:
    """The bounded formatter classes, for a str and for a Markup."""
    from jinja2.sandbox import SandboxedEscapeFormatter, SandboxedFormatter

    return _bounded_formatter(SandboxedFormatter), _bounded_formatter(SandboxedEscapeFormatter)


def bounded_str_format(environment: Environment, value: Any) -> Callable[..., str] | None:
    """The sandbox's wrap_str_format with the bounded formatter: a str's format or format_map method, wrapped."""
    if not isinstance(value, (MethodType, BuiltinMethodType)) or value.__name__ not in ("format", "format_map"):
        return None
    template = value.__self__
    if not isinstance(template, str):
        return None
    is_format_map = value.__name__ == "format_map"
    plain, escaping = _formatters()
    formatter = escaping(environment, escape=template.escape) if isinstance(template, Markup) else plain(environment)

    def wrapper(*args: Any, **kwargs: Any) -> str:
        if is_format_map:
            if kwargs:
                raise TypeError("format_map() takes no keyword arguments")
            if len(args) != 1:
                raise TypeError(f"format_map() takes exactly one argument ({len(args)} given)")
            kwargs, args = args[0], ()
        return type(template)(formatter.vformat(template, args, kwargs))

    return update_wrapper(wrapper, value)
