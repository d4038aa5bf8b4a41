"""--think and /think: a hybrid reasoning model's thinking turned on or off, or its effort set, through its chat
template's switch (Qwen3's enable_thinking, GPT-OSS's reasoning_effort), in tiny GGUFs carrying the real templates."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

from localgen import cli, cli_chat_flow, repl_terminal, runner
from localgen.chat import Message
from localgen.conversation import Conversation
from localgen.errors import ModelLoadError, UsageError
from localgen.params import GenerationLimits, SamplingParams
from localgen.runner import ModelOptions, load_model
from localgen.session import ChatSession
from localgen.template_sandbox import render_template
from localgen.think_switch import parse_think, refuse_think, think_line, think_switch, think_variables
from tests.conftest import popen_localgen, run_localgen
from tests.gguf_builders import copy_with_metadata, tiny_model
from tests.test_repl import Chat

QWEN3 = """{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""  # Qwen3's, its tool calls and reasoning_content left out (SmolLM3's reads enable_thinking too)
GPT_OSS = """{%- macro build_system_message() -%}
    {{- "Knowledge cutoff: 2024-06\\n\\n" }}
    {%- if reasoning_effort is not defined %}
        {%- set reasoning_effort = "medium" %}
    {%- endif %}
    {{- "Reasoning: " + reasoning_effort + "\\n\\n" }}
    {{- "# Valid channels: analysis, commentary, final. Channel must be included for every message." }}
{%- endmacro -%}
{{- "<|start|>system<|message|>" }}
{{- build_system_message() }}
{{- "<|end|>" }}
{%- for message in messages -%}
    {%- if message.role == 'user' -%}
        {{- "<|start|>user<|message|>" + message.content + "<|end|>" }}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|start|>assistant
{%- endif -%}"""  # GPT-OSS's, its tools, date and assistant turns left out
DEEPSEEK_V31 = ("{% for m in messages %}<｜User｜>{{ m.content }}{% endfor %}{% if add_generation_prompt %}"
                "{% if thinking is defined and thinking %}<｜Assistant｜><think>{% else %}<｜Assistant｜></think>"
                "{% endif %}{% endif %}")  # DeepSeek-V3.1's switch, off by default


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny model (its ChatML template has no switch), and copies carrying Qwen3's and GPT-OSS's templates."""
    folder = tmp_path_factory.mktemp("think")
    tiny = tiny_model(folder / "chatml.gguf")
    return {"chatml": tiny, **{name: copy_with_metadata(tiny, folder / f"{name}.gguf",
                                                        set_values={"tokenizer.chat_template": template})
                               for name, template in (("qwen3", QWEN3), ("gpt-oss", GPT_OSS))}}


@pytest.mark.parametrize(("model", "think", "prompt_end"), [
    ("qwen3", None, "<|im_start|>assistant\n"),
    ("qwen3", "on", "<|im_start|>assistant\n"),
    ("qwen3", "off", "<|im_start|>assistant\n<think>\n\n</think>\n\n"),
    ("qwen3", "false", "<|im_start|>assistant\n<think>\n\n</think>\n\n"),  # Ollama's --think=false
    ("gpt-oss", None, "Reasoning: medium\n\n"),
    ("gpt-oss", "on", "Reasoning: medium\n\n"),
    ("gpt-oss", "high", "Reasoning: high\n\n"),
])
def test_run_think_sets_the_chat_template_s_switch(models: dict[str, Path], model: str, think: str | None,
                                                   prompt_end: str) -> None:
    given = [f"--think={think}"] if think is not None else []
    result = run_localgen("run", "-m", str(models[model]), *given, "--print-prompt", "hi", timeout=60)
    assert (result.returncode, result.err) == (0, "")
    if model == "qwen3":
        assert result.out == "<|im_start|>user\nhi<|im_end|>\n" + prompt_end
    else:
        assert prompt_end in result.out and result.out.endswith("<|start|>user<|message|>hi<|end|><|start|>assistant")


CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"  # no switch


@pytest.fixture
def in_process(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
               ) -> Iterator[Callable[..., tuple[int, str]]]:
    """Call localgen.cli.main in this process, stdin no pipe, where a chat has a terminal and no model loads: its
    exit code and stderr, loading refused (the model it would load named)."""
    logger = logging.getLogger("localgen")
    handlers, propagate = logger.handlers[:], logger.propagate

    def loading(options: runner.ModelOptions, **_: object) -> runner.LoadedModel:
        raise ModelLoadError(f"loaded {options.model}", hint="refused by the test")

    monkeypatch.setattr(runner, "load_model", loading)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    monkeypatch.setattr(cli_chat_flow, "_refuse_without_terminal", lambda: None)
    monkeypatch.setattr(repl_terminal, "chat_terminal", lambda **_: contextlib.nullcontext())

    def call(*args: str) -> tuple[int, str]:
        with pytest.raises(SystemExit) as exited:
            cli.main(list(args))
        return int(exited.value.code or 0), capsys.readouterr().err

    yield call
    logger.handlers[:], logger.propagate = handlers, propagate


def test_run_think_is_refused_where_the_template_has_no_switch(models: dict[str, Path]) -> None:
    result = run_localgen("run", "-m", str(models["chatml"]), "--think", "off", "-n", "2", "hi", timeout=60)
    assert (result.returncode, result.out) == (2, "")
    assert result.err == (f"localgen: error: {models['chatml']}: --think off: this model's chat template has no switch "
                          "for thinking (hint: --hide-thinking leaves its reasoning out of the output)\n")


@pytest.mark.parametrize(("model", "think", "message", "hint"), [
    ("gpt-oss", "off", "--think off: this model's chat template sets a reasoning effort (low, medium, high) and "
     "cannot turn thinking off", "--think low thinks least"),
    ("qwen3", "high", "--think high: this model's chat template turns thinking on or off, and sets no effort",
     "--think on or --think off"),
])
def test_think_is_refused_where_the_template_s_switch_is_of_another_kind(
        models: dict[str, Path], in_process: Callable[..., tuple[int, str]], model: str, think: str, message: str,
        hint: str) -> None:
    code, err = in_process("run", "-m", str(models[model]), "--think", think, "-n", "2", "hi")
    assert (code, err.count("\n")) == (2, 1) and message in err and f"(hint: {hint}" in err, err


def test_run_think_is_refused_before_a_pipe_is_read(models: dict[str, Path]) -> None:
    command = [sys.executable, "-m", "localgen", "run", "-m", str(models["chatml"]), "--think", "off"]
    with popen_localgen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        try:
            code = process.wait(timeout=30)  # stdin stays open: refused before it is read
        finally:
            process.kill()
        assert code == 2 and b"has no switch for thinking" in process.stderr.read()


@pytest.mark.parametrize("command", ["run", "chat"])
def test_think_is_refused_from_the_model_s_header_before_it_loads(
        models: dict[str, Path], in_process: Callable[..., tuple[int, str]], tmp_path: Path, command: str) -> None:
    prompt = ["hi"] if command == "run" else []
    code, err = in_process(command, "-m", str(models["chatml"]), "--think", "off", *prompt)
    assert (code, err.count("\n")) == (2, 1) and "--think off: this model's chat template has no switch" in err, err
    template = tmp_path / "qwen3.jinja"
    template.write_text(QWEN3)
    code, err = in_process(command, "-m", str(models["chatml"]), "--chat-template", str(template), "--think", "off",
                           *prompt)
    assert err.startswith("localgen: error: loaded "), "the given template has the switch: the model loads"


@pytest.mark.parametrize("command", ["run", "chat"])
def test_a_chat_template_file_s_switch_is_checked_once_it_is_read_before_stdin_and_the_model(
        models: dict[str, Path], in_process: Callable[..., tuple[int, str]], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, command: str) -> None:
    template = tmp_path / "chatml.jinja"
    template.write_text(CHATML)
    read_end, write_end = os.pipe()
    os.write(write_end, b"hi\n")
    os.close(write_end)
    with os.fdopen(read_end, "r") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)  # a pipe that run would read
        code, err = in_process(command, "-m", str(models["qwen3"]), "--chat-template", str(template), "--think", "off")
        assert stdin.buffer.read() == b"hi\n", "refused before stdin is read"
    assert (code, err.count("\n")) == (2, 1), err
    assert f"{template}: --think off: this model's chat template has no switch for thinking" in err


def test_run_think_takes_only_its_values_and_no_raw(in_process: Callable[..., tuple[int, str]]) -> None:
    code, err = in_process("run", "--think", "maybe", "hi")
    assert code == 2 and "--think takes on, off, low, medium or high, not 'maybe'" in err
    code, err = in_process("run", "--raw", "--think", "off", "hi")
    assert code == 2 and "--raw and --think contradict each other" in err


@pytest.mark.parametrize("words", [("run", "--reasoning-budget", "0", "hi"),
                                   ("chat", "--chat-template-kwargs", '{"enable_thinking": false}')])
def test_llama_cli_s_ways_to_turn_thinking_off_are_answered_with_think(
        in_process: Callable[..., tuple[int, str]], words: tuple[str, ...]) -> None:
    code, err = in_process(*words)
    assert code == 2 and err.startswith(f"localgen: error: {words[1]} is llama-cli's option for")
    assert "(hint: localgen's is --think off (or on)" in err and len(err.splitlines()) == 1


def test_the_switch_is_the_variable_the_template_reads() -> None:
    assert [think_switch(t) for t in (QWEN3, GPT_OSS, DEEPSEEK_V31, None)] == \
        ["enable_thinking", "reasoning_effort", "thinking", None]
    assert think_switch("{% set enable_thinking = true %}{{ enable_thinking }}") is None  # set by itself: no switch
    assert think_switch("{{ " + "(" * 50_000 + "thinking" + ")" * 50_000 + " }}") is None  # too deep to parse
    on = render_template(DEEPSEEK_V31, [Message("user", "hi")], bos_token="", eos_token="",
                         variables=think_variables(DEEPSEEK_V31, "on"))
    assert on == "<｜User｜>hi<｜Assistant｜><think>"  # a switch off by default, turned on
    assert [parse_think(word, "--think") for word in ("ON", "False", "low")] == ["on", "off", "low"]
    with pytest.raises(UsageError, match="/think off: this model's chat template has no switch"):
        refuse_think("{{ messages }}", "off", model_name="m", flag="/think")


def test_think_says_the_setting_without_guessing_the_template_s_default() -> None:
    assert think_line(DEEPSEEK_V31, None) == "thinking: as the chat template has it (/think on or off sets it)"
    assert think_line(QWEN3, "off") == "thinking: off (/think on turns it on)"


def test_a_chat_session_renders_its_prompts_anew_with_the_switch_set(models: dict[str, Path], home: Path) -> None:
    options = ModelOptions(model=str(models["qwen3"]), ctx_size=256, threads=1)
    session = ChatSession(load_model(options), options, Conversation.new(system=None, model=None),
                          SamplingParams(temperature=0.0), GenerationLimits(max_tokens=2), autosave=False)
    try:
        assert session.prompt_text([Message("user", "hi")]).endswith("<|im_start|>assistant\n")
        session.set_think("off")  # as /think off
        assert session.prompt_text([Message("user", "hi")]).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
        saved = Conversation.new(system=None, model=None)
        saved.settings["think"] = "off"
        session.set_think(None)
        session.replace_conversation(saved, {})  # run --conversation, chat --resume: the saved choice, none given
        assert session.prompt_text([Message("user", "hi")]).endswith("assistant\n<think>\n\n</think>\n\n")
        session.switch_model(str(models["gpt-oss"]))  # /model keeps the choice, for the template that can take it
        assert session.options.think == "off" and "Reasoning: medium" in session.prompt_text()
    finally:
        session.loaded.close()


def test_chat_think_and_the_think_command(models: dict[str, Path], home: Path) -> None:
    refused = Chat(home, "-m", str(models["chatml"]), "--think", "off", wait_for_prompt=False)
    refused.expect_words("--think off: this model's chat template has no switch for thinking")
    refused.child.expect(pexpect.EOF)
    refused.child.close()
    assert refused.child.exitstatus == 2 and "Traceback" not in refused.transcript.getvalue()
    chat = Chat(home, "-m", str(models["qwen3"]), "--think", "off", "-n", "2", "--no-markdown")
    chat.command("/think", "thinking: off (/think on turns it on)")
    chat.command("/think on", "thinking: on (/think off turns it off)")
    chat.command("/set nothink", "thinking: off")  # Ollama's
    chat.command_words("/think high", "/think high: this model's chat template turns thinking on or off")
    chat.command("/show settings", "thinking: off (/think on turns it on)")
    assert "/think [on|off]" in chat.command("/help", "/exit")
    chat.command_words(f"/model {models['chatml']}", "[/think off does not apply to it: this model's chat template "
                       "has no switch for thinking; /thinking off hides its reasoning]")
    mark = len(chat.transcript.getvalue())
    chat.command(f"/model {models['qwen3']}", "now using")
    chat.command("/think", "thinking: off (/think on turns it on)")
    assert "does not apply" not in chat.transcript.getvalue()[mark:]
    assert chat.ask("hi")["settings"]["think"] == "off", "saved with the conversation, as its stop strings are"
    assert chat.quit() == 0
    resumed = Chat(home, "--resume", "-n", "2", "--no-markdown")
    assert "; /think off" in resumed.transcript.getvalue(), "the resumed conversation's summary names it"
    resumed.command("/think", "thinking: off (/think on turns it on)")
    assert resumed.quit() == 0
    resumed = Chat(home, "--resume", "--think", "on", "-n", "2", "--no-markdown")  # given now, it wins
    resumed.command("/think", "thinking: on (/think off turns it off)")
    assert resumed.quit() == 0
    plain = Chat(home, "-m", str(models["chatml"]), "-n", "2", "--no-markdown")
    plain.command_words("/think off", "/think off: this model's chat template has no switch for thinking")
    plain.command("/think", "thinking: this model's chat template has no switch for it (/thinking off hides its")
    assert plain.quit() == 0


def test_the_shell_completes_think_s_values(tmp_path: Path) -> None:
    line = "localgen chat --think o"
    env = {"_LOCALGEN_COMPLETE": "bash_complete", "COMP_LINE": line, "COMP_POINT": str(len(line)),
           "COMP_WORDS": line, "COMP_CWORD": "3", "LOCALGEN_HOME": str(tmp_path)}
    result = run_localgen(env=env, timeout=60)
    assert (result.returncode, result.out.split()) == (0, ["on", "off"])
