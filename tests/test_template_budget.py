"""A chat template cannot build a huge string in one C call (str() of a shared list, |join, %, .format, |replace,
|indent, |wordwrap, |sum, ...), where the time limit, checked between Python lines, cannot stop it: what each would
build is measured against the render's size limit first, and a template asking for more is refused in one line,
while every template that fits writes what Jinja writes."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace
from markupsafe import Markup

from localgen import template_sandbox
from localgen.chat import Message, ReasonedMessage
from localgen.errors import TemplateError
from localgen.gguf_reader import read_gguf
from localgen.template_budget import int_chars, text_size
from localgen.template_sandbox import render_template, template_variables
from tests.conftest import run_localgen
from tests.gguf_builders import copy_with_metadata, tiny_model
from tests.test_gpt_oss import GPT_OSS_TEMPLATE
from tests.test_template_families import CHATML, GEMMA2, GENERATION, LOOP_CONTROLS, MISTRAL01, PHI3_FIRST, TOJSON
from tests.test_templates import QWEN_LIKE
from tests.test_think_switch import DEEPSEEK_V31, GPT_OSS, QWEN3

BIG = "{% set s = 'x' * 4000000 %}"  # 4 MB: within the output limit alone
SHARED = "{% set r = range(100000)|list %}{% set b = [r] * 1000 %}"  # 1,000 copies of one list: 600 MB as text
DOUBLED = "{% set ns = namespace(x=[1]) %}{% for i in range(26) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}"

HOSTILE = {
    "string": SHARED + "{{ b|string|length }}",
    "tilde": SHARED + "{{ (b ~ '')|length }}",
    "written-out": DOUBLED + "{{ ns.x }}",  # 2**26 ones in 26 steps
    "namespace-written-out": SHARED + "{{ namespace(b=b) }}",
    "dict-values-written-out": SHARED + "{{ {'b': b}.values() }}",
    "join-of-lists": SHARED + "{{ b|join(',')|length }}",
    "join-long-separator": BIG + "{{ range(100000)|join(s)|length }}",
    "join-method": BIG + "{{ s.join('abcdefghij' * 1000)|length }}",
    "join-of-generated-texts": SHARED + "{{ b|map('string')|join|length }}",  # 600 KB each
    "join-method-of-generated-texts": SHARED + "{{ ''.join(b|map('string'))|length }}",
    "percent-mapping": BIG + "{{ ('%(a)s' * 600000 % {'a': s})|length }}",
    "percent-list": SHARED + "{{ ('%s' % [b])|length }}",
    "percent-star-width": "{{ ('%*s' * 1000 % ((1000000, 'x') * 1000))|length }}",
    "format-filter": BIG + "{{ ('%(a)s' * 600000)|format(a=s)|length }}",
    "str-format": BIG + "{{ ('{0}' * 1000000).format(s)|length }}",
    "str-format-list": SHARED + "{{ '{}'.format(b)|length }}",
    "str-format-repr": SHARED + "{{ '{!r}'.format(b)|length }}",
    "str-format-width": "{{ ('{:>1000000}' * 1000).format(*range(1000))|length }}",
    "format-map": BIG + "{{ ('{a}' * 1000000).format_map({'a': s})|length }}",
    "repetition": "{{ ('x' * 10**9)|length }}",
    "center": "{{ 'x'|center(10**9) }}",
    "indent": "{{ ('x\n' * 1000000)|indent(1000)|length }}",
    "indent-string": BIG + "{{ ('x\n' * 1000000)|indent(s)|length }}",
    "replace": BIG + "{{ s|replace('x', 'x' * 100)|length }}",
    "replace-method": BIG + "{{ s.replace('x', s)|length }}",
    "range": "{{ range(10**9)|length }}",
    "range-to-list": "{{ range(10**9)|list|length }}",
    "range-beyond-c": "{{ range(10**30)|length }}",
    "wordwrap": BIG + "{{ ('x ' * 1000)|wordwrap(1, wrapstring=s)|length }}",
    "sum-of-lists": "{{ ([[0] * 50] * 100000)|sum(start=[])|length }}",  # quadratic: minutes
    "expandtabs": "{{ ('\t' * 1000000).expandtabs(4000)|length }}",
    "translate": BIG + "{{ s.translate({120: s})|length }}",
    "escape": SHARED + "{{ b|e|length }}",
    "upper": SHARED + "{{ b|upper|length }}",
    "replace-argument": SHARED + "{{ 'x'|replace('x', b)|length }}",
    "int-to-bytes": "{{ (5).to_bytes(400000000, 'big')|length }}",
    "format-filter-short-texts": "{% set s = 'x' * 1000 %}{{ ('%(a)s' * 100000)|format(a=s)|length }}",
    "big-ints-written-out": "{% set b = [10**4299] * 30000 %}{{ b }}",  # str() of each: 18 s in all
    "distinct-big-ints-string": "{% set b = (range(10**4299, 10**4299 + 10000)|list) * 10 %}{{ b|string|length }}",
    "cyclic-namespace": "{% set X = namespace() %}{% set Y = [X, 'x' * 4000000] %}{% set X.y = Y %}"
                        "{% set root = [Y] + [X] * 20 %}{{ (root|string)|length }}",  # 84 MB
    "constant-tilde": "{{ (" + " ~ ".join(["('x'|center(1000000))"] * 5) + ")|length }}",  # folded when compiled
    "set-block": BIG + "{% set x %}{% for i in range(100) %}{{ s }}{% endfor %}{% endset %}{{ x|length }}",
    "macro": BIG + "{% macro m() %}{% for i in range(100) %}{{ s }}{% endfor %}{% endmacro %}{{ m()|length }}",
    "caller": BIG + "{% macro m() %}{{ caller()|length }}{% endmacro %}"
                    "{% call m() %}{% for i in range(100) %}{{ s }}{% endfor %}{% endcall %}",
    "filter-block": BIG + "{% filter length %}{% for i in range(100) %}{{ s }}{% endfor %}{% endfilter %}",
    "huge-int-division": "{{ (('f' * 800000)|int(base=16) // ('f' * 400000)|int(base=16)) > 0 }}",  # 9 s
}
HUGE_INT = "{% set a = ('f' * 4000000)|int(base=16) %}{{ a }}"  # its powers of ten: 3 s in two C calls
# The render's time limit in the child: the refusals checked come first, idle in milliseconds, and on a busy machine
# (load 15-20 on 2 CPUs) the 2 s limit of wall-clock time stopped renders before them.
CHILD_TIME_LIMIT_S = 15.0
HANG_GUARD_S = 2 * CHILD_TIME_LIMIT_S  # a refusal takes milliseconds; one C call, minutes


def _render(template: str, messages: list[Message] | None = None, **variables: Any) -> str:
    return render_template(template, messages or [Message("user", "hi")], bos_token="<s>", eos_token="</s>",
                           model_name="evil", variables=variables)


def _render_in_child(template: str) -> dict[str, Any]:
    """Render in a forked child under CHILD_TIME_LIMIT_S, killed past HANG_GUARD_S (a C call the time limit cannot
    stop) or when the test stops: how it ended (message, hint) and the CPU seconds it took (cpu_s)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(read)
        template_sandbox.TEMPLATE_TIME_LIMIT_S = CHILD_TIME_LIMIT_S
        started = time.process_time()
        try:
            _render(template)
            ended: dict[str, Any] = {"message": "rendered", "hint": ""}
        except TemplateError as error:
            ended = {"message": error.message, "hint": error.hint or ""}
        except BaseException as error:
            ended = {"message": f"{type(error).__name__}: {error}", "hint": ""}
        ended["cpu_s"] = time.process_time() - started
        os.write(write, json.dumps(ended).encode())
        os._exit(0)
    os.close(write)
    try:
        poller = select.poll()
        poller.register(read, select.POLLIN)
        if not poller.poll(HANG_GUARD_S * 1000):
            pytest.fail(f"still rendering after {HANG_GUARD_S:g} s, in one call no time limit stops")
        with os.fdopen(read, "rb", closefd=False) as pipe:
            return dict(json.loads(pipe.read()))
    finally:
        os.close(read)
        with contextlib.suppress(ProcessLookupError):  # a child still rendering (a failure, a Ctrl-C) ends here
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


@pytest.mark.skipif(sys.platform == "win32", reason="renders in a forked child")
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_template_building_a_huge_string_in_one_call_is_refused_before_building_it(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each took seconds to minutes (|sum, the quadratic one, over 40 s), stopped only by the memory cap where at
    all; refused now in milliseconds, under a memory cap of 64 MiB that none of them reaches."""
    monkeypatch.setattr(template_sandbox, "TEMPLATE_MEMORY_LIMIT_BYTES", 64 * 2**20)
    ended = _render_in_child(HOSTILE[name])
    message = ended["message"]
    assert message.startswith("evil: the chat template tried to build something too large and was stopped: "), message
    assert "\n" not in message and len(message) < 200, message
    assert "--chat-template FILE" in ended["hint"]


@pytest.mark.skipif(sys.platform == "win32", reason="renders in a forked child")
def test_an_int_past_str_s_digits_fails_at_once_as_str_fails_it() -> None:
    """Its digits' count past int_max_str_digits is known from its bit length: str()'s ValueError comes at once,
    where two powers of ten of millions of digits came first (3 s: stopped by the time limit)."""
    ended = _render_in_child(HUGE_INT)
    assert "ValueError: Exceeds the limit (4300 digits) for integer string conversion" in ended["message"], ended


@pytest.mark.skipif(sys.platform == "win32", reason="renders in a forked child")
def test_an_int_of_more_digits_than_the_room_left_is_refused_without_a_power_of_ten() -> None:
    """Without int_max_str_digits, an int whose fewest digits pass the output limit is refused from its bit length,
    where two powers of ten of millions of digits were computed first (3 s: stopped by the time limit)."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        ended = _render_in_child(HUGE_INT)
    finally:
        sys.set_int_max_str_digits(limit)
    assert "too large and was stopped: " in ended["message"], ended


def test_the_refusal_names_what_was_too_large_and_the_limit() -> None:
    with pytest.raises(TemplateError) as info:
        _render(SHARED + "{{ b|join(',') }}")
    limit = template_sandbox.TEMPLATE_OUTPUT_LIMIT_CHARS + 2 * len("hi")
    assert info.value.message == ("evil: the chat template tried to build something too large and was stopped: "
                                  f"|join's text of over {limit:,} characters")
    with pytest.raises(TemplateError) as info:
        _render("{{ ([[0] * 50] * 100000)|sum(start=[]) }}")
    assert info.value.message.endswith(f"|sum's list of over {limit:,} items")
    with pytest.raises(TemplateError) as info:
        _render("{{ range(10**9)|list }}")
    assert info.value.message.endswith("a range of 1,000,000,000 numbers, over the 100,000 allowed")


def test_a_hostile_template_in_a_gguf_ends_the_run_in_one_line(tmp_path: Path) -> None:
    model = copy_with_metadata(tiny_model(tmp_path / "tiny.gguf"), tmp_path / "shared.gguf",
                               set_values={"tokenizer.chat_template": SHARED + "{{ b }}"})
    started = time.monotonic()
    result = run_localgen("run", "-m", str(model), "hi", "-n", "4", "-c", "256", timeout=60)
    elapsed = time.monotonic() - started
    assert result.returncode == 1 and result.stdout == b"", result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert "shared.gguf: the chat template tried to build something too large and was stopped: the text of a value " \
           "written out of over" in lines[0], lines[0]
    assert "--chat-template FILE" in lines[0]
    assert elapsed < 20, f"{elapsed:.1f} s"


@pytest.mark.parametrize("count", [150, 300])
def test_a_text_up_to_the_limit_is_written_and_one_past_it_refused(count: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(template_sandbox, "TEMPLATE_OUTPUT_LIMIT_CHARS", 1000)
    size = len(str(list(range(count))))  # 690 and 1,490: the limit is 1,004
    template = f"{{{{ (range({count})|list)|string|length }}}}"
    if size <= 1004:
        assert _render(template) == str(size)
    else:
        with pytest.raises(TemplateError, match="too large"):
            _render(template)


# --- every template that fits writes what Jinja writes ---------------------------------------------------------

def _jinja(template: str, messages: list[Message], **variables: Any) -> str:
    """The text Jinja's own immutable sandbox writes, set up as localgen's (without its size checks)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, autoescape=False,
                                       extensions=["jinja2.ext.loopcontrols", template_sandbox._generation_tag()])
    env.filters["tojson"] = template_sandbox._tojson
    env.globals.update(raise_exception=template_sandbox._raise_exception)
    return env.from_string(template).render(messages=[m.to_dict() for m in messages], bos_token="<s>",
                                            eos_token="</s>", add_generation_prompt=True, **variables)


ORDINARY = [
    "{{ [1, 'a', {'b': (2,)}, none, 1.5, true, (), [], {}, 'q\"\\'\\n'] | string }}",
    "{{ {'k': [1]}.items() | string }} {{ {'k': 1}.keys() }} {{ {}.values() }} {{ ({'a': 1}.keys() - ['b']) }}",
    "{{ namespace(a=[1], b='x') }} {{ namespace() | string }} {{ messages }} {{ messages[0] | string }}",
    "{{ 'a' ~ [1, 2] ~ 3 ~ none ~ (1,) }}{% autoescape true %}{{ '<' ~ messages[0].content }}{% endautoescape %}",
    "{{ [1, 2, 3] | join(', ') }} {{ messages | join('|', attribute='role') }} {{ 'abc' | join('.') }}",
    "{{ '%s-%5d|%-4s|%.2f|%r|%x|%%|%c' % ('x', 3, 'y', 1.5, 'q', 255, 65) }}",
    "{{ '%(a)s+%(b)03d' % {'a': 'A', 'b': 7} }} {{ '%(a)s' % namespace(a=[1]) }}",
    "{{ '%*d' % (5, 3) }} {{ '%s' % [1, 2] }} {{ '%s' % messages[0] }} {{ '100%' }}",
    "{{ '%*d' % ('a', 3) }}", "{{ '%.*f' % (1.5, 2.0) }}", "{{ '%*d' % namespace() }}",  # % says '* wants int'
    "{{ '%s and %s' | format('a', 'b') }} {{ '%(x)s' | format(x='k') }}",
    "{{ '{0:>5}|{1!r}|{0!s}|{x:.3f}|{2:,}|{2:#x}'.format('a', [1], 1234567, x=2.5) }}",
    "{{ '{a}-{b[0]}'.format_map({'a': 1, 'b': [2]}) }} {{ '{:{w}}|'.format('z', w=4) }} {{ '{}'.format(messages) }}",
    "{{ 'a b c d' | wordwrap(3) }}|{{ 'a b c d\n\ne f' | wordwrap(3, wrapstring='<br>') }}|"
    "{{ ('word ' * 30) | wordwrap(20, false) }}|{{ '' | wordwrap }}|{{ 'long-hyphenated-word' | wordwrap(5) }}",
    "{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb\n\nc' | indent(2, true, true) }}|{{ 'a\nb' | indent('> ') }}",
    "{{ 'aXbX' | replace('X', '--') }} {{ 'aXbX' | replace('X', '', 1) }} {{ 'aXb'.replace('X', 'yy') }}",
    "{{ 'ab'.replace('', '-') }} {{ 'aXbXc'.replace('X', '--', 1) }} {{ 1234 | replace(2, 'two') }}",
    "{{ [[1], [2, 3]] | sum(start=[]) }} {{ [(1,), (2,)] | sum(start=()) }} {{ [1, 2] | sum }} "
    "{{ [{'n': [1]}, {'n': [2]}] | sum(attribute='n', start=[]) }} {{ [] | sum(start=[]) }}",
    "{{ [0.5, 1] | sum(start=1) }} {{ [[1], (2,)] | sum(start=[]) }}",
    "{{ range(3) | list }} {{ range(1, 10, 3) | list }} {% for i in range(2) %}{{ i }}{% endfor %}",
    "{{ ', '.join(['a', 'b']) }} {{ '-'.join(range(3) | map('string')) }} {{ 'a\tb'.expandtabs(4) }}",
    "{{ 'abc'.translate({97: 'AA', 98: none}) }} {{ 'x'.center(9, '*') }} {{ 'x' | center(9) }}",
    "{{ [1, 2] | e }} {{ [1] | upper }} {{ {'a': 1} | pprint }} {{ messages | length }} {{ [3, 1] | sort }}",
    "{{ ('<b>{}</b>' | safe).format('<i>') }} {% autoescape true %}{{ ('<b>%s</b>' | safe) % '<i>' }} "
    "{{ ['<a>', '<b>' | safe] | join('<br>' | safe) }} {{ 'a<' | replace('<', '&') }}{% endautoescape %}",
    "{{ 'x' * 3 }} {{ [1] * 2 }} {{ 2 ** 10 }} {{ 'a' + 'b' }} {{ messages[0].content | trim | title }}",
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2 ** 300 // 3 }} {{ 2 ** 300 % 7 }} {{ 'a' ~ 'b' ~ 3 ~ [1] ~ none }}",
    "{% set x %}a{{ 1 }}b{% endset %}{{ x }} {% macro m(a) %}[{{ a }}{{ caller() if caller }}]{% endmacro %}"
    "{{ m(2) }}{% call m(3) %}c{{ 4 }}{% endcall %}{% filter upper %}d{{ 'e' }}{% endfilter %}"
    "{% autoescape true %}{% set y %}<{{ '&' }}{% endset %}{{ y }}{{ m('<') }}{% endautoescape %}",
    "{{ [10**4299, -10**300, 2**1000] }} {{ 10**4299 }} {{ [2**1000, 10**77] | join(',') }} {{ '%s' % [10**100] }}",
    "{{ [10**4305, 1] }}",  # past str()'s 4,300 digits: its ValueError
    "{{ ''.join([['x' * 1000] * 5000]) }}", "{{ '-'.join(['a', 1, 'b']) }}",  # str.join's TypeError, not measured
    "{{ [1, (10**4400,)] | string }}",
    "{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}|{{ ns|string }}|{{ [ns, ns] ~ '' }}",
    "{% set ns = namespace(a=1) %}{% set ns.me = [ns] %}{{ ns }}|{{ '%s' % ns }}|{{ '{}'.format(ns.me) }}",
    "{% set X = namespace() %}{% set Y = [X, 'x' * 4] %}{% set X.y = Y %}{% set root = [Y] + [X] * 3 %}"
    "{{ root }}|{{ root|string|length }}|{{ X }}|{{ [X, Y, {'r': root}] }}",
    "{% set X = namespace() %}{% set Y = [X] %}{% set X.y = Y %}{% set n = namespace(l=Y) %}"
    + "{% set n.l = [n.l, n.l] %}" * 17 + "{{ n.l|string|length }}",  # a shared list with a cycle: 4 MB of text
    "{% set ns = namespace(x=[]) %}{% for i in range(900) %}{% set ns.x = [ns.x] %}{% endfor %}"
    "{{ ns.x|string|length }} {{ (ns.x ~ '')|length }} {{ [ns.x]|join|length }}",  # Jinja's str() reaches ~990
]


def _outcome(render: Any, template: str, messages: list[Message]) -> str:
    """What a render writes, or how it fails: its exception's type and text, as localgen's error gives them."""
    try:
        return str(render(template, messages))
    except TemplateError as error:
        return error.message.removeprefix("evil: the chat template failed: ")
    except Exception as error:  # Jinja's own
        return f"{type(error).__name__}: {error}"


@pytest.mark.parametrize("template", ORDINARY)
def test_every_bounded_filter_method_and_operator_writes_what_jinja_writes(template: str) -> None:
    messages = [Message("user", "Hi <there> & 'you'")]
    assert _outcome(_render, template, messages) == _outcome(_jinja, template, messages)


FAMILIES = {"chatml": CHATML, "gemma2": GEMMA2, "mistral-v0.1": MISTRAL01, "phi3-first": PHI3_FIRST,
            "qwen3": QWEN3, "qwen-like": QWEN_LIKE, "gpt-oss": GPT_OSS_TEMPLATE, "gpt-oss-switch": GPT_OSS,
            "deepseek-v3.1": DEEPSEEK_V31, "loop-controls": LOOP_CONTROLS, "generation": GENERATION, "tojson": TOJSON}


@pytest.mark.parametrize("variables", [{}, {"enable_thinking": False, "thinking": True, "reasoning_effort": "low"}])
@pytest.mark.parametrize("family", [*FAMILIES, "bundled"])
def test_real_families_prompts_are_what_jinja_writes(family: str, variables: dict[str, Any],
                                                     bundled_model: Path) -> None:
    template = FAMILIES.get(family) or read_gguf(bundled_model).chat_template
    assert template is not None
    turns = [Message("user", "Why is the sky blue? <b>'Rayleigh'</b> & \"more\"\n\n  indented"),
             ReasonedMessage("assistant", "Scattering.", reasoning="Think of light."), Message("user", "And red?")]
    messages = [Message("system", "Be brief. {not a format} %s"), *turns]
    try:
        expected = _jinja(template, messages, **variables)
    except Exception:  # no system role: Gemma 2's, Mistral v0.1's
        messages = turns
        expected = _jinja(template, messages, **variables)
    assert _render(template, messages, **variables) == expected


# --- the measure -------------------------------------------------------------------------------------------------

def _self_holding() -> Namespace:
    ns = Namespace(a=1)
    ns["me"] = ns  # as {% set ns.me = ns %} sets it
    return ns


def _cycles() -> list[object]:
    """A namespace holding a list that holds it, written as one, the other, and both inside another list."""
    held = Namespace()
    holder = [held, "x" * 40]
    held["y"] = holder
    return [holder, held, [holder] + [held] * 3, [held] + [holder] * 3, {"a": held, "b": (holder,)}]


def _shared_cycles() -> list[object]:
    """Containers met again inside and outside a cycle, where a size measured with its '[...]' holds or not."""
    first, second = [], []
    first.append(second)
    second.append(first)
    held = Namespace()
    holder = [held]
    held["y"] = holder
    knot = [first, second]
    knot.append(knot)
    return [[second, second, first], [first, second, first, [second]], [holder, held, holder, [holder, held]],
            [held, holder, [held]], [knot, first, [knot, second]], {"k": knot, "f": first, "s": [second, knot]}]


VALUES = [[], (), {}, set(), frozenset(), (1,), [1, "a", None, 1.5, True], {"k": [1, (2, 3)], 4: {}}, {1, 2},
          frozenset({"a"}), {"a": 1}.keys(), {"a": [1]}.values(), {"a": (1, "b")}.items(), {}.items(),
          Namespace(a=[1], b="x"), Namespace(), _self_holding(), "q'\"\\\n\x00é😀", Markup("<b>"), [Markup("<b>")],
          [["shared"]] * 3, 10**40, -0.0, float("inf"), [[[]]], [{"a": {"b": ["c"]}}], ("a", ("b", ("c",))),
          *_cycles(), *_shared_cycles(),
          10**4299, -(10**300), [2**1000, -(10**999), "a"], [10**77, 10**78 - 1, True, 1.5, None]]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_the_measure_of_a_value_s_text_is_its_length(value: object) -> None:
    assert text_size(value, what="v") == len(str(value))


@pytest.mark.parametrize("exponent", [0, 1, 18, 19, 76, 77, 78, 300, 4298, 4299])
def test_an_int_s_digits_are_counted_without_writing_them(exponent: int) -> None:
    for value in (10**exponent - 1, 10**exponent, 10**exponent + 1, 2**(3 * exponent + 1)):
        for signed in (value, -value):
            if len(str(signed)) <= sys.get_int_max_str_digits():
                assert int_chars(signed) == len(str(signed)), signed


def test_an_int_past_str_s_digits_is_refused_as_str_refuses_it() -> None:
    for value in (10**4300, -(10**4300), 10**5000, 16**10**5):
        with pytest.raises(ValueError) as measured:
            int_chars(value)
        with pytest.raises(ValueError) as written:
            str(value)
        assert str(measured.value) == str(written.value)


def test_constant_output_is_folded_into_the_code_only_up_to_the_output_limit() -> None:
    """Jinja folded each constant below into a 4 MB one and joined the adjacent ones: 120 MB of code, kept with the
    compiled template (1.2 s and 460 MB at its peak to compile); what passes the limit is written when rendered."""
    template = "{{ 'x'|center(4000000) }}" * 30
    environment = template_sandbox._environment()
    tracemalloc.start()
    try:
        code = environment.compile(template, raw=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(code) < 2 * template_sandbox.TEMPLATE_OUTPUT_LIMIT_CHARS, f"{len(code):,} characters"
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB"
    assert _render("{{ 'x'|center(5) }}" * 3) == "  x    x    x  "


def test_finding_a_template_s_variables_runs_none_of_its_code() -> None:
    """Jinja's introspection folded constants, untraced and with no memory cap: it wrote each 4 MB text below and
    joined them all (200 of them in a 5 KB template: 2 GB)."""
    template = "{{ 'x'|center(4000000) }}" * 30 + "{% if add_generation_prompt %}{{ enable_thinking }}{% endif %}"
    tracemalloc.start()
    try:
        assert template_variables(template) == {"add_generation_prompt", "enable_thinking"}
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20, f"{peak / 2**20:.0f} MiB"


RENAMED_INTERNALS = """
import jinja2.filters, jinja2.meta, jinja2.sandbox
for module, name in [(jinja2.meta, "TrackingCodeGenerator"), (jinja2.filters, "make_attrgetter"),
                     (jinja2.sandbox, "SandboxedFormatter"), (jinja2.sandbox, "SandboxedEscapeFormatter"),
                     (jinja2.sandbox, "MAX_RANGE")]:
    delattr(module, name)
from localgen.chat import Message
from localgen.template_sandbox import render_template, template_variables
template = "{% for m in messages %}{{ m.role ~ ':' ~ m.content }}|{% endfor %}{{ range(2)|join(',') }}"
print(render_template(template + "{{ 'a' ~ 'b' }}", [Message("user", "hi")], bos_token="", eos_token="",
                      model_name="m", variables={}))
print(sorted(template_variables(template + "{{ enable_thinking }}")))
"""


def test_a_jinja_internal_renamed_breaks_what_uses_it_alone() -> None:
    """Jinja's internals (its introspection's code generator, its formatters, MAX_RANGE) are read where they are
    used, so a later Jinja without one still renders every template that does not need it, where importing
    localgen's template code failed, and every render with it."""
    done = subprocess.run([sys.executable, "-c", RENAMED_INTERNALS], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "user:hi|0,1ab\n[]\n"  # the think switch's variables: none found, as for invalid Jinja
