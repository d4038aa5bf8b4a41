"""The warning for the keywords a schema's grammar leaves unheld: those no grammar can hold said so, each with why, the
others named together as ones llama-cpp-python's converter ignores."""

from __future__ import annotations

from typing import Any

from localgen.json_schema_objects import names_may_repeat

_NO_GRAMMAR_HOLDS = {  # why a grammar, which reads the answer once from left to right, cannot hold each
    "uniqueItems": "a grammar cannot compare an array's items with each other, so one may repeat",
    "not": "a grammar cannot leave out the values another schema allows",
    "minProperties": 'a grammar cannot keep a name it does not list from repeating, as in {"a": 1, "a": 2}, which a '
                     "parser reads as one property",
}
_REMEDIES = {"minProperties": "check the answer, or list the names it needs (properties and required, or "
                              "propertyNames' enum)"}


def unheld_warnings(ignored: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One-line warnings for the keywords a grammar leaves unheld, given with the schema objects that hold each."""
    ignored = {key: nodes for key, nodes in ignored.items() if key != "uniqueItems" or any(map(_may_repeat, nodes))}
    alone = [key for key, nodes in ignored.items() if key in _NO_GRAMMAR_HOLDS and (
        key != "minProperties" or all(names_may_repeat(node) for node in nodes))]
    rest = sorted(key for key in ignored if key not in alone)
    warnings = [f"the JSON schema's {key} cannot be enforced ({_NO_GRAMMAR_HOLDS[key]}): "
                f"{_REMEDIES.get(key, 'check the answer')}" for key in sorted(alone)]
    if rest:
        them = "them" if len(rest) > 1 else "it"
        warnings.insert(0, f"the JSON schema's {', '.join(rest)} cannot be enforced (llama-cpp-python's converter "
                           f"ignores {them}): check the answer")
    return warnings


def _may_repeat(schema: dict[str, Any]) -> bool:
    """Whether an array's uniqueItems asks for something an answer can break: it is not false, and the array may hold
    two items (its maxItems is not 0 or 1)."""
    most = schema.get("maxItems")
    return schema["uniqueItems"] is not False and not (isinstance(most, int) and not isinstance(most, bool)
                                                       and most <= 1)
