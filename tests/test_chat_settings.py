"""How a chat reads a typed setting's value: quoted as well as bare, and a hint with a typical value of that
setting."""

from __future__ import annotations

import re

import pytest

from localgen.chat_settings import SETTING_NAMES, parse_setting
from localgen.errors import UsageError
from localgen.params import SETTING_EXAMPLES as EXAMPLES
from localgen.params import GenerationLimits, SamplingParams


@pytest.mark.parametrize("typed", ['"0.4"', "'0.4'", '" 0.4 "', " 0.4 "])
def test_a_quoted_value_is_the_value(typed: str) -> None:
    assert parse_setting("temperature", typed) == 0.4
    assert parse_setting("top_k", typed.replace("0.4", "7")) == 7


def test_a_value_quoted_on_one_side_only_is_refused() -> None:
    with pytest.raises(UsageError, match=re.escape("""'"0.4' is not a valid value for temperature""")):
        parse_setting("temperature", '"0.4')


@pytest.mark.parametrize("key", SETTING_NAMES)
def test_the_hint_of_a_value_that_is_no_number_gives_one_that_setting_takes(key: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_setting(key, "abc")
    assert refused.value.hint == f"e.g. /set {key} {EXAMPLES[key]}"
    value = parse_setting(key, EXAMPLES[key])
    if key == "max_tokens":
        GenerationLimits(max_tokens=value)  # type: ignore[arg-type]
    else:
        SamplingParams(**{key: value})  # in range: no UsageError


@pytest.mark.parametrize(("key", "typed", "hint"), [
    ("temperature", "0,7", "the decimal point is '.': /set temperature 0.7"),
    ("top_p", '"0,95"', "the decimal point is '.': /set top_p 0.95"),
    ("min_p", ",05", "the decimal point is '.': /set min_p .05"),
    ("repeat_penalty", "1,15", "the decimal point is '.': /set repeat_penalty 1.15"),
    ("max_tokens", "1,000", "write it without separators: /set max_tokens 1000"),
    ("seed", "4,096", "write it without separators: /set seed 4096"),
    ("top_k", "4,5", "e.g. /set top_k 40"),  # no guess for what a whole number is not
])
def test_a_number_with_a_decimal_or_thousands_comma_is_told_how_to_write_it_as_the_command_line_is(
        key: str, typed: str, hint: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_setting(key, typed)
    assert refused.value.hint == hint, refused.value.hint


def test_the_min_p_example_is_a_typical_min_p() -> None:
    assert parse_setting("min_p", EXAMPLES["min_p"]) <= 0.1, "a typical min-p, not a top-p's"
