"""A chat template cannot compare, hash or sort nested values sharing their parts (a list doubled 30 times: [x, x]),
which Python walks in one C call a part at each time it is reached, 2**30 times (no time limit stops it): the items
such a call would walk are counted first, each shared part once, and one past the render's limit is refused in one
line, while every comparison that fits gives what Jinja gives."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from localgen import template_sandbox
from localgen.chat import Message
from tests.conftest import run_localgen
from tests.gguf_builders import tiny_model
from tests.test_template_budget import _jinja, _outcome, _render, _render_in_child

# two lists, and two tuples, alike and distinct, each of 2**30 ones in 30 steps
DOUBLED = ("{% set ns = namespace(a=[1], b=[1], t=(1,), u=(1,)) %}{% for i in range(30) %}"
           "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% set ns.t = (ns.t, ns.t) %}"
           "{% set ns.u = (ns.u, ns.u) %}{% endfor %}")
DEEP = {  # each took over 25 s, in one C call
    "eq": "{{ ns.a == ns.b }}",
    "ne": "{{ ns.a != ns.b }}",
    "lt": "{{ ns.a < ns.b }}",
    "gteq": "{{ ns.a >= ns.b }}",
    "chain": "{{ 1 < 2 < 3 and ns.a <= ns.b <= ns.a }}",
    "tuples-eq": "{{ ns.t == ns.u }}",
    "dicts-eq": "{{ {'k': ns.a} == {'k': ns.b} }}",
    "in-list": "{{ ns.a in [ns.b] }}",
    "not-in-list": "{{ ns.a not in [1, ns.b] }}",
    "in-tuple": "{{ ns.t in (ns.u,) }}",
    "in-iterator": "{{ ns.a in [ns.b]|map('list') }}",
    "list-index": "{{ [ns.b].index(ns.a) }}",
    "list-count": "{{ [ns.b].count(ns.a) }}",
    "tuple-index": "{{ (ns.b,).index(ns.a) }}",
    "sort": "{{ [ns.a, ns.b]|sort|length }}",
    "sort-by-attribute": "{{ [{'k': ns.a}, {'k': ns.b}]|sort(attribute='k')|length }}",
    "max": "{{ [ns.a, ns.b]|max|length }}",
    "min": "{{ [ns.a, ns.b]|min|length }}",
    "unique": "{{ [ns.t]|unique|list|length }}",
    "groupby": "{{ [{'k': ns.a}, {'k': ns.b}]|groupby('k')|list|length }}",
    "dictsort": "{{ dict(a=ns.a, b=ns.b)|dictsort(by='value')|length }}",
    "selectattr-equalto": "{{ [{'k': ns.a}]|selectattr('k', 'equalto', ns.b)|list|length }}",
    "test-eq": "{{ ns.a is eq(ns.b) }}",
    "test-ne": "{{ ns.a is ne(ns.b) }}",
    "test-lessthan": "{{ ns.a is lessthan(ns.b) }}",
    "test-in": "{{ ns.a is in([ns.b]) }}",
    "select-in": "{{ [ns.a]|select('in', [ns.b])|list|length }}",
    "loop-changed": "{% for x in [ns.a, ns.b] %}{{ loop.changed(x) }}{% endfor %}",
    "dict-key": "{{ {ns.t: 1}|length }}",
    "in-dict": "{{ ns.t in {1: 2} }}",
    "in-dict-keys": "{{ ns.t in {1: 2}.keys() }}",
    "getitem": "{{ {1: 2}[ns.t] is defined }}",
    "slice-key": "{{ {}[ns.t:] is defined }}",  # a slice hashes as its bounds' tuple, from Python 3.12
    "slice-keys": "{% set d = {'a': 1} %}{{ d[ns.t:ns.u] is defined }}",
    "map-attribute": "{{ [{}]|map(attribute=ns.t)|list }}",  # Jinja's attribute getter: environment.getitem
    "selectattr": "{{ [{}]|selectattr(ns.t)|list }}",
    "rejectattr": "{{ [{}]|rejectattr(ns.t)|list }}",
    "sum-attribute": "{{ [{}]|sum(attribute=ns.t) }}",
    "join-attribute": "{{ [{}]|join(attribute=ns.t) }}",
    "dict-get": "{{ {1: 2}.get(ns.t) }}",
    "dict-fromkeys": "{{ {}.fromkeys([ns.t])|length }}",
    "dict-of-pairs": "{{ dict([(ns.t, 1)])|length }}",
    "namespace-of-pairs": "{{ namespace([(ns.t, 1)]) is defined }}",
    "difference": "{{ ({}.keys() - [ns.t])|length }}",
    "difference-reflected": "{{ ([ns.t] - {}.keys())|length }}",
    "isdisjoint": "{{ {}.keys().isdisjoint([ns.t]) }}",
    "set-union": "{{ ({}.keys() - []).union([1], [ns.t])|length }}",
    "long-string-in": "{% set t = 'x' * 1000000 %}{{ (t ~ 'y') in [t ~ 'z'] * 1000000 }}",  # 1 MB compared 10**6 times
    "attr": "{{ {}|attr(ns.t) }}",  # looked up in the classes' attribute dicts
    "long-strings-eq": "{% set t = 'x' * 1000000 %}{% set a = [t ~ 'z'] * 100000 %}{{ a == [t ~ 'z'] * 100000 }}",
    "long-strings-count": "{% set t = 'x' * 1000000 %}{{ ([t ~ 'z'] * 100000).count(t ~ 'y') }}",
    "long-strings-nested": "{% set t = 'x' * 1000000 %}{{ [[1]] + [t ~ 'z'] * 100000 == [[1]] + [t ~ 'z'] * 100000 }}",
    "fromkeys-one-hash": "{% set P = 2305843009213693951 %}{{ {}.fromkeys(range(0, P * 100000, P))|length }}",  # 50 s
    "difference-one-hash": "{% set P = 2305843009213693951 %}{{ (range(0, P * 100000, P)|list) - {}.keys() }}",
}


@pytest.mark.skipif(sys.platform == "win32", reason="renders in a forked child")
@pytest.mark.parametrize("name", list(DEEP))
def test_a_comparison_or_hash_of_shared_nested_values_is_refused_before_it_runs(name: str) -> None:
    ended = _render_in_child(DOUBLED + DEEP[name])  # fails past its guard: one C call no time limit stops
    message = ended["message"]
    assert message.startswith("evil: the chat template tried to compare or hash something too large and was "
                              "stopped: "), message
    limit = template_sandbox.TEMPLATE_OUTPUT_LIMIT_CHARS + 2 * len("hi")
    assert message.endswith(f" walking over {limit:,} items, shared ones counted each time"), message
    assert "\n" not in message and len(message) < 200, message
    assert "--chat-template FILE" in ended["hint"]


SHALLOW = ("{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(8) %}{% set ns.a = [ns.a, ns.a] %}"
           "{% set ns.b = [ns.b, ns.b] %}{% endfor %}")  # 256 ones each: compared at once
ORDINARY = [
    "{{ messages[0]['role'] == 'user' }} {{ 1 != 2 }} {{ 'a' < 'b' }} {{ 2 >= 2.0 }} {{ none == none }} "
    "{{ [1, [2]] == [1, [2]] }} {{ (1, 2) < (1, 3) }} {{ [1, 2] <= [1] }} {{ {'a': [1]} == {'a': [1]} }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 < 2 in [2] }} {{ 'a' in 'cat' not in 'x' }} {{ 1 == 1.0 != 2 }}",
    "{% set a, b = [[1]], [[2]] %}{{ a < b <= b }} {{ a < b > a }} {{ b < a < raise_exception('evaluated') }} "
    "{{ a in [a] in [[a]] }} {{ b not in [a] in [[b]] }} {{ messages|length > 0 < messages|length }}",  # chains
    "{{ 'role' in messages[0] }} {{ 'x' not in messages[0] }} {{ [1] in [[1], 2] }} {{ (1,) in {(1,): 2} }} "
    "{{ [2] in [[1], [2]]|map('list') }} {{ 'at' in 'cat' }} {{ 3 in range(5) }} {{ [1] in {}.values() }}",
    "{{ [[2], [1, 0], [1]]|sort }} {{ [(2, 'b'), (1, 'a')]|sort(reverse=true) }} {{ ['b', 'A', 'a']|sort }} "
    "{{ [{'k': [2]}, {'k': [1]}]|sort(attribute='k') }} {{ [[1], [3], [2]]|max }} {{ [(1,), (0, 5)]|min }}",
    "{{ [(1,), (1,), (2,)]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} "
    "{{ [{'k': (1,)}, {'k': (1,)}]|unique(attribute='k')|list }}",
    "{{ [{'k': (1,)}, {'k': (1,)}, {'k': (0,)}]|groupby('k') }} {{ {'b': [1], 'a': [2]}|dictsort }} "
    "{{ {'b': [2], 'a': [1]}|dictsort(by='value', reverse=true) }}",
    "{{ [[1], [2]]|select('eq', [1])|list }} {{ [[1], [2]]|reject('in', [[2]])|list }} {{ [1] is eq([1]) }} "
    "{{ [1] is lessthan([2]) }} {{ [1] is in([[1]]) }} {{ (1,) is in({(1,): 0}) }} {{ [1] is sameas([1]) }}",
    "{{ [[1], [2]].index([2]) }} {{ ([1], [1]).count([1]) }} {{ {(1,): 'v'}.get((1,)) }} {{ {}.fromkeys([(1,)]) }} "
    "{{ dict([((1,), 2)]) }} {{ dict([[(1,), 2]], z=3) }} {{ namespace([('a', [1])]).a }} {{ dict(a=1) }}",
    "{% set k = (1, 2) %}{{ {k: 'a', 'b': k}[k] }} {{ {k: 1, k: 2} }} {{ {(1, 2): 1}[k] }} {{ {'x': 1}['x'] }}",
    "{% for x in [[1], [1], [2]] %}{{ loop.changed(x) }}{% endfor %}",
    "{{ messages[-1:] }} {{ 'abc'[1:] }} {{ [1, 2, 3][::2] }} {{ [1, 2, 3][:-1] }} {{ 'abc'[::-1] }} {{ (1, 2)[1:9] }}"
    " {% set n = 1 %}{{ [1, 2, 3][n:n + 1] }} {{ messages[0]['content'][:1] }}",  # slices
    "{{ {}[1:] }}", "{{ [1][(1,):] }}",  # their errors
    "{{ ({'a': 1, 'b': 2}.keys() - ['a'])|list }} {{ (['a', 'c'] - {'a': 1}.keys())|list }} {{ {'a': 1}.keys() - {} }}"
    " {{ {'a': 1}.keys().isdisjoint(['b']) }} {{ ({(1,): 1}.items() - [((1,), 1)])|list }} "
    "{{ ({'a': 1}.keys() - []).union(['b'], [(1,)])|length }} {{ messages|length - 1 }} {{ -(2 - 3.5) - 1 }}",
    "{% for m in messages %}{{ (messages|length - 1) - loop.index0 }} {{ loop.length - loop.index }}{% endfor %}",
    SHALLOW + "{{ ns.a == ns.b }} {{ ns.a < ns.b }} {{ ns.a in [ns.b] }} {{ [ns.a, ns.b]|sort|length }} "
    "{{ ns.a == ns.a }} {{ [ns.a].index(ns.b) }}",
    "{% set ns = namespace(x=[], y=[]) %}{% for i in range(900) %}{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}"
    "{% endfor %}{{ ns.x == ns.y }} {{ ns.x < ns.y }} {{ ns.x in [ns.y] }} {{ [ns.x, ns.y]|sort|length }}",  # deep
    DOUBLED + "{{ [ns.a, ns.b, 1] == [ns.b, ns.a] }} {{ [[ns.a, 1], 2] != [[ns.b], 2] }} {{ ns.t == (1,) }}",  # at once
    DOUBLED + "{{ [1, ns.a] == [2, ns.b] }} {{ (ns.a, 1, ns.a) < (ns.a, 2, ns.b) }} {{ ('x', ns.t) != ('y', ns.u) }} "
    "{{ {'a': 1, 'b': ns.a} == {'a': 2, 'b': ns.b} }} {{ {'a': 1, 'b': ns.a} == {'c': 1, 'b': ns.b} }}",
    DOUBLED + "{{ [[1, 2], ns.a] == [[1, 3], ns.b] }} {{ ([1], ns.a) < ([2], ns.b) }}",  # unequal before the shared
    DOUBLED + "{{ {'a': [1], 'b': ns.a} == {'a': [2], 'b': ns.b} }}",
    DOUBLED + "{{ [('a'|safe), ns.a] == [('b'|safe), ns.b] }}",  # Markup: a string
    DOUBLED + "{{ {(1, ns.a): 1} }}", DOUBLED + "{{ {(ns.a, ns.t): 1} }}",  # unhashable at once: the list's TypeError
    "{% set n = namespace(x=()) %}{% for i in range(3000) %}{% set n.x = (n.x,) %}{% endfor %}{{ {n.x: 1}|length }}"
    " {{ {(n.x, n.x): 2}[(n.x, n.x)] }}",  # a key nested 3,000 deep, as Python hashes it
    DOUBLED + "{{ [ns.a]|sort|length }} {{ [ns.a]|max|length }} {{ [ns.a, ns.a]|sort|length }}"
    " {{ {'k': ns.a, 'j': ns.b}|dictsort|length }} {{ [{}, {}]|groupby('k', default=ns.a)|length }}",  # keys compared
    DOUBLED + "{{ [ns.a, 1]|sort }}",  # Python's TypeError, at once
    "{% set big = range(3000)|list %}{% set items = [{'n': 'b', 'd': big}, {'n': 'a', 'd': big}] * 100 %}"
    "{{ (items|sort(attribute='n'))[0].n }} {{ items|groupby('n')|length }} {{ (items|max(attribute='n')).n }}",
    "{{ [1] < 'a' }}", "{{ {} < {} }}", "{{ {[1]: 2} }}", "{{ [1] in {} }}", "{{ [1] in 'abc' }}",  # their errors
    "{{ {}.fromkeys([1, 1.0, true, 2, 2305843009213693952] * 3)|length }} {{ ([1, 1, 2] * 9)|unique|list }} "
    "{{ ({1: 2}.keys() - [1, 2305843009213693952, 0.5])|list }} {{ {}.fromkeys(range(50000))|length }}",  # numbers
    "{% set t = 'x' * 1000 %}{{ (t ~ 'y') in [t ~ 'z'] * 100 }} {{ 'user' ~ '' in ['a', 'user'] }} "
    "{{ t in [t, 1] }} {{ (t ~ 'y') not in (t ~ 'y', t) }} {{ messages[0]['content'] ~ '' in ['Hi'] }}",  # strings
    "{{ messages|attr('x') is defined }} {{ 'a'|attr('upper') is defined }} {{ {}|attr('items') is defined }}",
    "{{ {}|attr((1, 2)) }}",
    "{% set t = 'x' * 1000 %}{{ [t ~ 'z'] * 100 == [t ~ 'z'] * 100 }} {{ ([t ~ 'y'] * 50).count(t ~ 'y') }} "
    "{{ [t, [1]] == [t ~ '', [1]] }} {{ [t] * 9 < [t ~ ''] * 9 }} {{ ['a' * 300] != ['a' * 299 ~ 'b'] }}",
    "{{ dict([[1]]) }}", "{{ [[1]]|unique|list }}", "{{ [[1], 'a']|sort }}", "{{ [1].index([2]) }}",
    "{{ {(1,): 1}[[1]] }}", "{{ [1] - [2] }}", "{{ {}.keys() - 1 }}", "{{ {}.keys() - [[1]] }}",
]


@pytest.mark.parametrize("template", ORDINARY)
def test_an_ordinary_comparison_gives_what_jinja_gives(template: str) -> None:
    messages = [Message("user", "Hi")]
    assert _outcome(_render, template, messages) == _outcome(_jinja, template, messages)


def test_a_shared_value_compared_with_itself_is_compared_at_once() -> None:
    """Python compares a value with itself without walking it: no refusal for what takes no time."""
    assert _render(DOUBLED + "{{ ns.a == ns.a }} {{ ns.a in [1, ns.a, ns.b] }} {{ ns.a is sameas(ns.a) }}") == \
        "True True True"


@pytest.mark.parametrize(("depth", "refused"), [(8, False), (9, True)])
def test_a_comparison_walking_up_to_the_limit_runs_and_one_past_it_is_refused(
        depth: int, refused: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two lists doubled 8 times are compared in 767 steps (511 lists, 256 ones), within a limit of 1,004; doubled 9
    times, in 1,535."""
    monkeypatch.setattr(template_sandbox, "TEMPLATE_OUTPUT_LIMIT_CHARS", 1000)
    template = DOUBLED.replace("range(30)", f"range({depth})") + "{{ ns.a == ns.b }}"
    outcome = _outcome(_render, template, [Message("user", "hi")])
    assert outcome == ("evil: the chat template tried to compare or hash something too large and was stopped: == "
                       "walking over 1,004 items, shared ones counted each time" if refused else "True"), outcome


def test_a_deep_comparison_in_a_chat_template_file_ends_the_run_in_one_line(tmp_path: Path) -> None:
    template = tmp_path / "deep.jinja"
    template.write_text(DOUBLED + "{% for m in messages %}{{ m.content }}{% endfor %}{{ ns.a == ns.b }}")
    model = tiny_model(tmp_path / "tiny.gguf")
    result = run_localgen("run", "-m", str(model), "--chat-template", str(template), "-n", "1", "hi", timeout=60)
    assert result.returncode == 1 and result.stdout == b"", result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert "deep.jinja: the chat template tried to compare or hash something too large and was stopped: == " \
           "walking over" in lines[0], lines[0]
    assert "Traceback" not in result.err




@pytest.mark.parametrize(("template", "checked"), [
    ("{{ [0, 0] in l }}", True), ("{{ (0, 0) not in l }}", True), ("{{ {'a': 0} in l }}", True),
    ("{{ 1 < [0] in l }}", True),  # a list written in the template, compared with each of l's items
    ("{{ a ~ b in l }}", True),  # a string built, maybe long
    ("{{ 'user' in l }}", False), ("{{ 0 in l }}", False), ("{{ none in l }}", False), ("{{ x in [0, 1] }}", False),
])
def test_only_a_string_number_or_none_written_on_the_left_of_in_is_compared_at_once(template: str,
                                                                                       checked: bool) -> None:
    """[0, …, 0] in l compares the list with every item of l: 4,000 zeros in a list of 4,000,000 took 9.4 s in one
    C call, taken as compared at once; measured, each item is compared in its own call, which the time limit stops."""
    code = template_sandbox._environment().compile(template, raw=True)
    assert ("environment.checked_in(" in code or "environment.checked_chain(" in code) == checked, code


def test_a_search_of_a_long_chat_for_one_of_its_messages_is_measured_up_to_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """messages.index(m) compares m with the messages before it, as Python does (it stops at an identical one): 600
    empty messages are 1,200 items in all, past a limit of 1,000, where the one at 1 is 2; all were counted first,
    and the search refused."""
    monkeypatch.setattr(template_sandbox, "TEMPLATE_OUTPUT_LIMIT_CHARS", 1000)
    messages = [Message("user" if i % 2 == 0 else "assistant", "") for i in range(600)]
    assert _render("{{ messages.index(messages[1]) }} {{ messages[2] in messages }}", messages) == "1 True"
    outcome = _outcome(_render, "{{ messages.count(messages[1]) }}", messages)  # count compares with all of them
    assert outcome.endswith(": .count() walking over 1,000 items, shared ones counted each time"), outcome


def test_each_message_of_a_long_chat_is_found_in_it_at_the_cost_of_python_s_search() -> None:
    """A message of strings alone is compared with any other in as many steps as it has: 1,000 messages each looked
    up in the chat measured at once, where each search measured every message first (1,000: over the 2 s limit)."""
    messages = [Message("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(1000)]
    text = _render("{% for m in messages %}{% if m in messages %}.{% endif %}{{ messages.index(m) }}{% endfor %}",
                   messages)
    assert text == "".join(f".{i}" for i in range(1000))
