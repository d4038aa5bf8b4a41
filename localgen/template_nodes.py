"""Which of a chat template's expressions its code can leave to Jinja's own: a comparison whose operands walk no
shared part, a difference of numbers (the others are measured first, in template_compare)."""

from __future__ import annotations

from typing import TypeGuard

from jinja2 import nodes

LONG_STRING = 256  # characters compared in about the time of one item walked (1 MB: 18 us, 3,200 items)
_NUMERIC_FILTERS = frozenset({"length", "count", "int", "float", "abs", "round", "wordcount"})  # they give a number


def is_long(value: object) -> TypeGuard[str]:
    """True for a string of over LONG_STRING characters, whose comparison with another is weighed by them."""
    return isinstance(value, str) and len(value) > LONG_STRING


def compared_at_once(node: nodes.Compare) -> bool:
    """True where a comparison (each of a chain's) walks no shared part: an operand is a constant, from the
    template's own text (m['role'] == 'user'), or a comparison's, test's or `not`'s boolean or a `~`'s string; for
    `in`, the item is one of those but a `~`'s string or a constant list, tuple, dict or long string (compared with
    every item of the container), or the container a constant list, tuple or string."""
    left = node.expr
    for operand in node.ops:
        if operand.op in ("in", "notin"):
            constant = operand.expr.value if isinstance(operand.expr, nodes.Const) else None
            value = getattr(left, "value", None)  # a constant's: a long string is compared with each item too
            scalar = isinstance(left, (nodes.Compare, nodes.Test, nodes.Not)) or (
                isinstance(left, nodes.Const) and not isinstance(value, (list, tuple, dict))
                and not is_long(value))
            if not (scalar or isinstance(constant, (list, tuple, str))):  # a dict hashes the item
                return False
        elif not (_plain_value(left) or _plain_value(operand.expr)):
            return False
        left = operand.expr
    return True


def _plain_value(node: nodes.Expr) -> bool:
    """True for an expression whose value is compared in one step, or walks no more than the template's text."""
    return isinstance(node, (nodes.Const, nodes.Compare, nodes.Test, nodes.Not, nodes.Concat))


def numeric(node: nodes.Expr) -> bool:
    """True for an expression whose value is a number (or an error): a number written in the template, a length or
    a conversion to a number, or a sum, difference, quotient or power with one of those."""
    if isinstance(node, nodes.Const):
        return type(node.value) in (int, float, bool)
    if isinstance(node, nodes.Filter):
        return node.name in _NUMERIC_FILTERS
    if isinstance(node, (nodes.Add, nodes.Sub, nodes.Div, nodes.FloorDiv, nodes.Pow)):  # not *: [x] * 2
        return numeric(node.left) or numeric(node.right)
    return isinstance(node, (nodes.Neg, nodes.Pos)) and numeric(node.node)
