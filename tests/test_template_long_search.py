"""A chat template's searches, comparisons and sorts of long strings (over 256 characters), alone or inside lists
and dicts, and of dicts whose number keys share a hash, are measured with their characters and collisions counted,
and refused past the render's limit in a fraction of its time, where each ran for seconds in one C call."""

from __future__ import annotations

import sys

import pytest

from localgen import template_sandbox
from localgen.chat import Message
from tests.test_template_budget import _jinja, _outcome, _render, _render_in_child

LONG = "{% set t = 'x' * 1000000 %}"  # 1 MB: compared in about 18 us, the time of 3,906 items walked
REFUSED_CPU_S = 0.5  # a refusal's measure: a quarter of the render's 2 s time limit (0.02-0.1 s here, idle)
STOPPED_SEARCH_CPU_S = 0.25  # a search measured to its end took 0.36 s idle for 1,000,000 strings; stopped, 0.04 s


def _refusal_in_child(template: str) -> tuple[str, float]:
    """Render in a forked child, killed past HANG_GUARD_S: its error message and the CPU seconds it took."""
    ended = _render_in_child(template)
    return str(ended["message"]), float(ended["cpu_s"])


def _assert_refused(template: str, cpu_s: float = REFUSED_CPU_S) -> None:
    """The template is refused as walking past the render's limit, in well under its time limit."""
    message, cpu = _refusal_in_child(template)
    limit = template_sandbox.TEMPLATE_OUTPUT_LIMIT_CHARS + 2 * len("hi")
    assert message.endswith(f" walking over {limit:,} items, shared ones counted each time"), message
    assert cpu < cpu_s, f"refused after {cpu:.2f} s of CPU"


NESTED_SEARCHES = {  # each ran about 30 s in one C call
    "list-in": LONG + "{{ [t ~ 'y'] in [[t ~ 'z']] * 1000000 }}",
    "list-index": LONG + "{{ ([[t ~ 'z']] * 1000000 + [[t ~ 'y']]).index([t ~ 'y']) }}",
    "list-count": LONG + "{{ ([[t ~ 'z']] * 1000000).count([t ~ 'y']) }}",
    "dict-in": LONG + "{{ {'c': t ~ 'y'} in [{'c': t ~ 'z'}] * 1000000 }}",
    "dict-count": LONG + "{{ ([{'c': t ~ 'z'}] * 1000000).count({'c': t ~ 'y'}) }}",
    "nested-list-in": LONG + "{{ [[1], t ~ 'y'] in [[[1], t ~ 'z']] * 1000000 }}",
}


@pytest.mark.skipif(sys.platform == "win32", reason="renders in a forked child")
@pytest.mark.parametrize("name", list(NESTED_SEARCHES))
def test_a_search_for_a_list_or_dict_of_long_strings_weighs_their_characters(name: str) -> None:
    _assert_refused(NESTED_SEARCHES[name])


SEARCHES_THAT_FIT = [
    LONG + "{{ [t ~ 'y'] in [[t ~ 'z']] * 100 }} {{ {'c': t} in [{'c': t ~ ''}] * 100 }} "
    "{{ ([[t ~ 'z']] * 100 + [[t ~ 'y']]).index([t ~ 'y']) }} {{ ([[t ~ 'y']] * 100).count([t ~ 'y']) }}",
]


@pytest.mark.parametrize("template", SEARCHES_THAT_FIT)
def test_a_search_of_long_strings_within_the_limit_gives_what_jinja_gives(template: str) -> None:
    messages = [Message("user", "hi")]
    assert _outcome(_render, template, messages) == _outcome(_jinja, template, messages)


STRING_SEARCHES = {  # each counted every candidate first: 0.36 s of CPU here, 1 s elsewhere, 2 s under load
    "in": LONG + "{{ (t ~ 'y') in [t ~ 'z'] * 1000000 }}",
    "index": LONG + "{{ ([t ~ 'z'] * 1000000).index(t ~ 'y') }}",
    "count": LONG + "{{ ([t ~ 'z'] * 1000000).count(t ~ 'y') }}",
}


@pytest.mark.skipif(sys.platform == "win32", reason="renders in a forked child")
@pytest.mark.parametrize("name", list(STRING_SEARCHES))
def test_a_search_for_a_long_string_stops_measuring_once_past_the_limit(name: str) -> None:
    _assert_refused(STRING_SEARCHES[name], STOPPED_SEARCH_CPU_S)


FOUND_FIRST = [  # each refused, where Python stops at the first item, identical or equal
    LONG + "{% set u = t ~ 'y' %}{{ u in [u] + [t ~ 'z'] * 2000 }} {{ ([u] + [t ~ 'z'] * 2000).index(u) }}",
    LONG + "{% set u = t ~ 'y' %}{{ u in [t ~ 'y'] + [t ~ 'z'] * 2000 }} {{ ([t ~ 'y'] + [t ~ 'z'] * 2000).index(u) }}",
]  # .count() compares with all of them: 7,800,000 items, refused


@pytest.mark.parametrize("template", FOUND_FIRST)
def test_a_search_for_a_long_string_is_measured_up_to_the_first_identical_or_equal_one(template: str) -> None:
    messages = [Message("user", "hi")]
    assert _outcome(_render, template, messages) == _outcome(_jinja, template, messages)


ONE_HASH = ("{% set P = 2 ** 61 - 1 %}{% set L = range(0, 2000 * P, P)|list %}{% set d1 = {}.fromkeys(L) %}"
            "{% set d2 = {}.fromkeys(L) %}")  # 2,000 ints of one hash: each lookup compares it with the others
COLLIDING = {  # each ran 20 to 34 s in one C call
    "dicts-eq": ONE_HASH + "{{ [d1] * 1000 == [d2] * 1000 }}",
    "keys-eq": ONE_HASH + "{{ [d1.keys()] * 1000 == [d2.keys()] * 1000 }}",
    "items-eq": ONE_HASH + "{{ [d1.items()] * 300 == [d2.items()] * 300 }}",  # their tuples: 3,600,000 items
    "dicts-count": ONE_HASH + "{{ ([d2] * 1000).count(d1) }}",
}


@pytest.mark.skipif(sys.platform == "win32", reason="renders in a forked child")
@pytest.mark.parametrize("name", list(COLLIDING))
def test_comparing_dicts_or_key_views_counts_their_number_keys_of_one_hash(name: str) -> None:
    _assert_refused(COLLIDING[name])


def test_dicts_of_number_keys_of_one_hash_compared_once_give_what_jinja_gives() -> None:
    template = ONE_HASH.replace("2000 * P", "1000 * P") + (  # 1,000 keys: 1,000,000 comparisons each
        "{{ d1 == d2 }} {{ d1.keys() == d2.keys() }} {{ [d1] == [d2] }} {{ [d2].index(d1) }} "
        "{{ d1 in [d2] * 1000 }}")  # Python stops at the first equal one
    messages = [Message("user", "hi")]
    assert _outcome(_render, template, messages) == _outcome(_jinja, template, messages) == "True True True 0 True"


LONG_SORTS = {  # 2.7 s: stopped by the time limit, 0.7 s past it, in one C call
    "lists": LONG + "{% set a = [t ~ 'y'] %}{% set b = [t ~ 'z'] %}{{ ([b, a] * 20000)|sort|length }}",
    "strings": LONG + "{{ ([t ~ 'z', t ~ 'y'] * 20000)|sort|length }}",
}


@pytest.mark.skipif(sys.platform == "win32", reason="renders in a forked child")
@pytest.mark.parametrize("name", list(LONG_SORTS))
def test_a_sort_weighs_its_keys_long_strings(name: str) -> None:
    _assert_refused(LONG_SORTS[name])


def test_a_short_sort_of_long_strings_gives_what_jinja_gives() -> None:
    template = LONG + ("{% set a = [t ~ 'y'] %}{% set b = [t ~ 'z'] %}{{ ([b, a] * 20)|sort|length }} "
                       "{{ ([t ~ 'z', t ~ 'y'] * 20)|sort|length }} {{ [t ~ 'z', t ~ 'y']|max|length }}")
    messages = [Message("user", "hi")]
    assert _outcome(_render, template, messages) == _outcome(_jinja, template, messages) == "40 40 1000001"


@pytest.mark.skipif(sys.platform == "win32", reason="renders in a forked child")
def test_long_markup_strings_compared_are_weighed_as_strings() -> None:
    """Markup compares as str does: 200,000 of 1 MB alike ran 3.6 s in one C call, taken as compared at once."""
    _assert_refused(LONG + "{% set a = (t ~ 'y')|safe %}{% set b = (t ~ 'y')|safe %}{{ [a] * 200000 == [b] * 200000 }}")


@pytest.mark.skipif(sys.platform == "win32", reason="renders in a forked child")
def test_dicts_whose_values_are_such_dicts_stop_measuring_once_past_the_limit() -> None:
    """Each value past the limit was compared to learn whether the walk ended there: 2 s, stopped by the time limit."""
    _assert_refused(ONE_HASH + "{% set o1 = {}.fromkeys(L, d1) %}{% set o2 = {}.fromkeys(L, d2) %}{{ o1 == o2 }}")
