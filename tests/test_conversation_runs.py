"""What chat and run record of each answer, and `run --continue` after a plain run, on the real bundled model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localgen import config
from localgen.conversation import Conversation, Turn
from localgen.conversation_store import conversations_dir, let_go, save_conversation
from localgen.events import Finished
from tests.conftest import REPO_ROOT, popen_localgen, run_localgen, spawn_localgen, user_registry

GREEDY = ("--temperature", "0", "--seed", "1")


pytestmark = pytest.mark.usefixtures("home")  # every test in a localgen home of its own (conftest)


def last_run_path() -> Path:
    """Where README says the last plain run is kept."""
    return config.settings().data_dir / "last-run.json"


def _saved() -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in conversations_dir().glob("*.json")}


def test_a_chat_records_each_answer_s_details(bundled_model: Path) -> None:
    from localgen.params import GenerationLimits, SamplingParams
    from localgen.runner import ModelOptions, load_model
    from localgen.session import ChatSession

    options = ModelOptions(model=str(bundled_model), ctx_size=1024, threads=1)  # two spin and stall beside other tests
    session = ChatSession(load_model(options), options, Conversation.new(system=None, model=None),
                          SamplingParams(temperature=0.0), GenerationLimits(max_tokens=5))
    try:
        done = [e for e in session.ask("Name a color.")[1] if isinstance(e, Finished)][-1]
        session.limits = GenerationLimits(max_tokens=64, stop=(" ",))  # stopped by a stop string: "stop"
        stopped = [e for e in session.ask("Thanks. Say OK.")[1] if isinstance(e, Finished)][-1]
    finally:
        session.loaded.close()
        let_go(session.conversation)
    first, second = session.conversation.turns
    assert first.details is not None and second.details is not None
    assert (first.details.finish_reason, first.details.model, first.details.completion_tokens) == (
        "length", str(bundled_model), 5)
    assert first.details.prompt_tokens == done.usage.prompt_tokens
    assert 0 < first.details.duration_s < 60 and first.details.decode_tokens_per_s > 0
    assert second.details.finish_reason == stopped.finish_reason == "stop" and not second.interrupted
    assert second.details.prompt_tokens > done.usage.prompt_tokens + 5, "the second prompt holds the first exchange"
    saved = _saved()[session.conversation.name]["turns"]
    assert [turn["finish_reason"] for turn in saved] == ["length", "stop"]
    assert saved[0]["completion_tokens"] == 5 and saved[0]["model"] == str(bundled_model)


@pytest.mark.parametrize(("typed", "sent"), [
    ("    def f():\n        return 1\n", "    def f():\n        return 1"),  # pasted code, its last newline too
    ("\n  \n\tindented\n\n", "\tindented"),  # blank lines before it go, as the newline after it
    ("  Why? \t", "  Why?"),
])
def test_a_message_reaches_the_prompt_as_typed_but_for_the_blank_lines_and_spaces_around_it(
        bundled_model: Path, typed: str, sent: str) -> None:
    """Ollama sends a message as typed: the indentation of its first line is kept (in chat and run alike, which
    compose it so), in the saved message and in the prompt the model's own template makes of it."""
    from localgen.chat import Message, PromptFormat, compose_user_message
    from localgen.gguf_reader import read_gguf
    from localgen.repl_input import message_text

    template = read_gguf(bundled_model).metadata["tokenizer.chat_template"]
    prompt_format = PromptFormat(template=template, bos_token="", eos_token="", adds_bos=False, model_name="SmolLM2")
    message = compose_user_message(message_text(typed, pasted=True), [])
    assert message == sent
    assert f"<|im_start|>user\n{sent}<|im_end|>\n<|im_start|>assistant\n" in prompt_format.render(
        [Message("user", message)])
    assert compose_user_message(typed, ["notes\n"]) == f"notes\n\n{sent}", "after an attached file too"


def test_run_continue_goes_on_from_the_last_plain_run() -> None:
    first = run_localgen("run", "My name is Ada.", "-n", "8", "--json", *GREEDY)
    assert first.returncode == 0 and first.err == "", first.err
    kept = json.loads(last_run_path().read_text())
    assert [(t["user"], t["answer"], t["finish_reason"]) for t in kept["turns"]] == [
        ("My name is Ada.", json.loads(first.out)["text"], "length")]
    assert oct(last_run_path().stat().st_mode & 0o777) == "0o600"
    listed = run_localgen("conversations", "list", "--json")
    assert json.loads(listed.out) == [], "the last run is no saved conversation"
    second = run_localgen("run", "--continue", "What is my name?", "-n", "8", "--json", *GREEDY)
    assert second.returncode == 0, second.err
    name = json.loads(second.out)["conversation"]
    assert name == kept["name"] and name.startswith("chat-")
    assert second.err == f"localgen: continuing the last run \"My name is Ada.\", now saved as conversation '{name}'\n"
    one, two = json.loads(first.out), json.loads(second.out)
    assert two["usage"]["prompt_tokens"] > one["usage"]["prompt_tokens"] + one["usage"]["completion_tokens"], \
        "the model sees the first exchange"
    assert [t["user"] for t in _saved()[name]["turns"]] == ["My name is Ada.", "What is my name?"]
    assert not last_run_path().exists(), "it is a saved conversation now"
    third = run_localgen("run", "--continue", "Say it again.", "-n", "4", "--json", *GREEDY)
    assert third.returncode == 0 and third.err == "" and json.loads(third.out)["conversation"] == name


def test_run_continue_sizes_the_context_for_the_whole_conversation_not_the_new_message_alone(home: Path) -> None:
    """A default context (models.toml's) too small for the conversation is raised for it, as a plain run's is for
    its prompt, up to the model's own: the model sees the earlier exchange."""
    user_registry(home, "[models.smollm2-135m]\ncontext = 128\n")
    earlier = Conversation.new(system=None, model="smollm2-135m")
    earlier.turns.append(Turn("Repeat after me: " + "river stone cloud " * 25, "river stone cloud " * 25))
    last_run_path().parent.mkdir(parents=True)
    last_run_path().write_text(earlier.to_json())
    going_on = run_localgen("run", "--continue", "And?", "-n", "2", "--json", *GREEDY)
    assert going_on.returncode == 0 and "the model sees" not in going_on.err, going_on.err
    assert json.loads(going_on.out)["usage"]["prompt_tokens"] > 160, "the earlier exchange is in the prompt"


def test_the_latest_to_resume_is_the_last_run_when_it_is_newer_as_for_run_continue() -> None:
    """`llm chat -c` continues the latest conversation, plain prompts included: so does what chat --resume alone
    takes, the last run (saved as a conversation once the chat starts, said), else the latest saved one."""
    from localgen.last_run import latest_to_resume, take_last_run

    saved = Conversation(name="older", turns=[Turn("a", "b")])
    save_conversation(saved)
    let_go(saved)
    os.utime(conversations_dir() / "older.json", (1, 1))
    last_run = Conversation.new(system="Be brief.", model="smollm2-135m")
    last_run.turns.append(Turn("Name a fruit.", "Apple."))
    last_run_path().write_text(last_run.to_json())
    said: list[str] = []
    taken = latest_to_resume(print)
    assert taken.last_run is not None and taken.conversation.name == last_run.name and not taken.conversation.on_disk
    assert last_run_path().exists() and set(_saved()) == {"older"}, "nothing saved before the chat starts"
    started = take_last_run(taken.last_run, said.append, this="chat")
    let_go(started)
    assert (started.name, started.system, started.turns, started.on_disk) == (last_run.name, "Be brief.",
                                                                             last_run.turns, True)
    assert said == [f"localgen: continuing the last run \"Name a fruit.\", now saved as conversation '{last_run.name}'"]
    assert not last_run_path().exists() and set(_saved()) == {"older", last_run.name}
    again = latest_to_resume(print)
    let_go(again.conversation)
    assert again.conversation.name == last_run.name and again.last_run is None, "then the latest saved conversation"


def test_chat_resume_refused_as_its_model_loads_leaves_the_last_run_as_it_was(home: Path) -> None:
    """As run --continue saves the last run once it answers, chat --resume saves it once the chat starts: a chat
    whose model cannot load (an empty file, which the last run names) leaves no conversation never chatted in."""
    import pexpect

    from tests.test_repl import spawn_chat

    empty = home / "interrupted.gguf"
    empty.write_bytes(b"")
    last_run = Conversation.new(system=None, model=str(empty))
    last_run.turns.append(Turn("Name a fruit.", "Apple."))
    last_run_path().parent.mkdir(parents=True)
    last_run_path().write_text(kept := last_run.to_json())
    child = spawn_chat(home, "--resume")
    child.expect(pexpect.EOF)
    child.close()
    said = " ".join(child.before.split())
    assert child.exitstatus == 1 and "empty" in said and "continuing the last run" not in said, said
    assert last_run_path().read_text() == kept and not _saved()


def test_localgen_no_last_run_keeps_no_record_and_removes_the_one_kept() -> None:
    assert run_localgen("run", "A secret.", "-n", "2", *GREEDY).returncode == 0
    assert last_run_path().exists()
    quiet = run_localgen("run", "Another secret.", "-n", "2", *GREEDY, env={"LOCALGEN_NO_LAST_RUN": "1"})
    assert quiet.returncode == 0, quiet.err
    assert not last_run_path().exists()
    refused = run_localgen("run", "--continue", "hi", "-n", "2", env={"LOCALGEN_NO_LAST_RUN": "1"})
    assert refused.returncode == 1 and "LOCALGEN_NO_LAST_RUN keeps no plain run to continue" in refused.err, \
        "the hint does not send the user to a plain run that would keep nothing"
    assert "ask something first" not in refused.err


def test_run_continue_takes_whichever_is_newer_the_last_run_or_the_latest_saved_conversation() -> None:
    assert run_localgen("run", "Name a fruit.", "-n", "3", *GREEDY).returncode == 0
    assert run_localgen("run", "--conversation", "notes", "Name a tree.", "-n", "3", *GREEDY).returncode == 0
    older_run = last_run_path().read_bytes()
    onto_saved = run_localgen("run", "--continue", "Another?", "-n", "3", "--json", *GREEDY)
    assert onto_saved.returncode == 0 and json.loads(onto_saved.out)["conversation"] == "notes", onto_saved.err
    assert "last run" not in onto_saved.err and last_run_path().read_bytes() == older_run
    assert run_localgen("run", "Name a river.", "-n", "3", *GREEDY).returncode == 0
    onto_run = run_localgen("run", "--continue", "Another?", "-n", "3", "--json", *GREEDY)
    name = json.loads(onto_run.out)["conversation"]
    assert name != "notes" and [t["user"] for t in _saved()[name]["turns"]] == ["Name a river.", "Another?"]


def test_runs_without_an_answer_or_a_chat_template_leave_the_last_run_as_it_was(tmp_path: Path) -> None:
    from gguf_builders import copy_with_metadata, tiny_model

    assert run_localgen("run", "Name a fruit.", "-n", "3", *GREEDY).returncode == 0
    before = last_run_path().read_bytes()
    raw = run_localgen("run", "--raw", "Name a tree.", "-n", "3", *GREEDY)
    tiny = tiny_model(tmp_path / "tiny.gguf")  # a model without a chat template, 125 KB to write and load
    base = copy_with_metadata(tiny, tmp_path / "base.gguf", drop=["tokenizer.chat_template"])
    plain_completion = run_localgen("run", "-m", str(base), "The capital of France is", "-n", "3", *GREEDY)
    failed = run_localgen("run", "-c", "64", "word " * 200, "-n", "3", *GREEDY)  # refused: it does not fit
    assert raw.returncode == plain_completion.returncode == 0 and failed.returncode != 0, failed.err
    assert last_run_path().read_bytes() == before


def test_a_plain_run_cut_short_is_kept_marked_and_continued_as_such() -> None:
    proc = popen_localgen([sys.executable, "-m", "localgen", "run", "-n", "400", *GREEDY,
                           "Write a long story about a robot."], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, cwd=REPO_ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    seen = proc.stdout.read(5)
    proc.stdout.close()
    assert proc.wait(timeout=120) == 141 and proc.stderr.read() == b""
    (turn,) = json.loads(last_run_path().read_text())["turns"]
    assert turn["interrupted"] is True and turn["finish_reason"] == "interrupted"
    assert turn["answer"].encode().startswith(seen)
    going_on = run_localgen("run", "--continue", "Go on.", "-n", "2", *GREEDY)
    assert going_on.returncode == 0, going_on.err
    (name,) = _saved()
    assert going_on.err.splitlines()[:2] == [
        f"localgen: continuing the last run \"Write a long story about a robot.\", now saved as conversation '{name}'",
        f"localgen: the last answer in conversation '{name}' was interrupted; the model sees it as far as it came"]


def test_two_runs_continuing_the_last_run_at_once_never_make_two_conversations() -> None:
    assert run_localgen("run", "Name a fruit.", "-n", "3", *GREEDY).returncode == 0
    command = [sys.executable, "-m", "localgen", "run", "--continue", "Another?", "-n", "3", *GREEDY]
    procs = [popen_localgen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            cwd=REPO_ROOT) for _ in range(2)]
    results = [(proc.wait(timeout=120), proc.stderr.read().decode()) for proc in procs if proc.stderr is not None]
    (saved,) = _saved().values()
    answered = [code for code, _ in results if code == 0]
    assert len(saved["turns"]) == 1 + len(answered) and answered, results
    for code, err in results:  # the other one waited, then found the conversation in use (or went on after it)
        assert code == 0 or "is in use by another localgen chat or run" in err or \
            "the last run changed while this run was starting: another run continued it" in err, err
    assert not last_run_path().exists()


def test_a_damaged_last_run_is_named_and_left_untouched() -> None:
    last_run_path().parent.mkdir(parents=True)
    last_run_path().write_text("{not json")
    refused = run_localgen("run", "--continue", "Go on.", "-n", "2")
    assert refused.returncode == 1 and len(refused.err.splitlines()) == 1, refused.err
    assert refused.err.startswith(f"localgen: error: the last run cannot be continued: {last_run_path()} is not a "
                                  "valid saved conversation (")
    assert refused.err.endswith(f"(hint: it was left untouched; delete {last_run_path()} to continue the latest "
                                "saved conversation instead, or go on with one: --conversation NAME)\n")
    assert last_run_path().read_text() == "{not json" and not _saved()
    from localgen.errors import LocalgenError
    from localgen.last_run import latest_to_resume

    with pytest.raises(LocalgenError) as chat_refused:  # chat --resume alone: its own option in the hint
        latest_to_resume(print)
    assert (chat_refused.value.hint or "").endswith("or go on with one: --resume NAME"), chat_refused.value.hint


def test_a_last_run_replaced_while_it_was_being_saved_stays() -> None:
    from localgen.last_run import _forget

    path = last_run_path()
    path.parent.mkdir(parents=True)
    path.write_text("the run that was continued")
    _forget(path, "the run that was continued")
    assert not path.exists()
    path.write_text("a later plain run")
    _forget(path, "the run that was continued")
    assert path.read_text() == "a later plain run" and [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_last_run_saved_under_a_taken_name_gets_the_next_one() -> None:
    first = run_localgen("run", "Name a fruit.", "-n", "3", *GREEDY)
    assert first.returncode == 0, first.err
    name = json.loads(last_run_path().read_text())["name"]
    other = Conversation(name=name, turns=[Turn("a", "b")])
    save_conversation(other)
    let_go(other)
    os.utime(conversations_dir() / f"{name}.json", (1, 1))  # older than the last run
    going_on = run_localgen("run", "--continue", "Another?", "-n", "3", *GREEDY)
    assert going_on.returncode == 0, going_on.err
    assert f"now saved as conversation '{name}-2'" in going_on.err
    assert [t["user"] for t in _saved()[f"{name}-2"]["turns"]] == ["Name a fruit.", "Another?"]


SHORT_LAST_RUN_WAIT = """
import sys
from localgen import last_run
from localgen.cli import main

last_run.LOCK_WAIT_S = 0.5  # the wait for the last run another run holds, where its 5 s were all waited out
main(sys.argv[1:])
"""


def test_a_last_run_another_run_is_saving_is_waited_for_then_refused() -> None:
    from localgen.conversation_lock import hold, release

    assert run_localgen("run", "Name a fruit.", "-n", "3", *GREEDY).returncode == 0
    folder = config.settings().data_dir
    assert hold(folder, "last-run", hint="")  # as a run turning it into a conversation holds it
    try:
        refused = subprocess.run([sys.executable, "-c", SHORT_LAST_RUN_WAIT, "run", "--continue", "Another?", "-n",
                                  "3", *GREEDY], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                 cwd=REPO_ROOT, timeout=120)
    finally:
        release(folder, "last-run")
    assert refused.returncode == 1 and refused.stderr == (
        "localgen: error: another localgen run is saving the last run as a conversation (hint: wait for that one "
        "to end (a run is refused, not queued), or go on with another: --conversation NAME)\n"), refused.stderr
    assert last_run_path().is_file() and not _saved()


def test_a_plain_run_keeps_the_model_s_exact_text_with_the_reasoning_hide_thinking_left_out() -> None:
    args = ("--hide-thinking", "--grammar", 'root ::= "<think>hm</think>Yes"', "--json", *GREEDY, "Is it?")
    result = run_localgen("run", *args)
    assert result.returncode == 0 and json.loads(result.out)["text"] == "Yes", result.err
    (turn,) = json.loads(last_run_path().read_text())["turns"]
    assert turn["answer"] == "<think>hm</think>Yes" and turn["finish_reason"] == "stop"
    saved = run_localgen("run", "--conversation", "exact", *args)
    assert saved.returncode == 0 and json.loads(saved.out)["text"] == "Yes", saved.err
    assert _saved()["exact"]["turns"][0]["answer"] == turn["answer"], "as a saved conversation keeps it"


@pytest.mark.parametrize("args", [
    ("",),  # nothing to send
    ("-c", "64", "word " * 200),  # a message the context cannot hold
])
def test_a_run_continue_refused_before_it_answers_leaves_the_last_run_and_the_conversations_as_they_were(
        args: tuple[str, ...]) -> None:
    assert run_localgen("run", "Name a fruit.", "-n", "3", *GREEDY).returncode == 0
    before = last_run_path().read_bytes()
    refused = run_localgen("run", "--continue", "-n", "3", *GREEDY, *args)
    assert refused.returncode != 0 and "continuing the last run" not in refused.err, refused.err
    assert last_run_path().read_bytes() == before and not _saved()
    assert run_localgen("run", "--continue", "Another?", "-n", "3", *GREEDY).returncode == 0, "it is continued later"
    (saved,) = _saved().values()
    assert [turn["user"] for turn in saved["turns"]] == ["Name a fruit.", "Another?"]


CTRL_C_AS_THE_MODEL_LOADS = """
import signal, sys
from localgen import runner
from localgen.cli import main

class CtrlC:
    def __set_name__(self, owner, name):
        signal.raise_signal(signal.SIGINT)

loading = runner.load_model
def interrupted(*args, **kwargs):
    type("Made", (), {"field": CtrlC()})  # as a class is made (importing the engine), wrapped in a RuntimeError
    return loading(*args, **kwargs)
runner.load_model = interrupted
main(sys.argv[1:])
"""


def test_ctrl_c_while_run_q_continue_loads_says_nothing_and_leaves_the_last_run() -> None:
    """-q leaves stderr to errors: a Ctrl-C while the model loads is said by the exit code alone, as one that cuts
    the answer short is, also where Python 3.11 wraps it in a RuntimeError (it lands as a class is made, as when
    the engine is imported); the last run is taken only once the run answers."""
    last_run = Conversation.new(system=None, model="smollm2-135m")
    last_run.turns.append(Turn("Name a fruit.", "Apple."))
    last_run_path().parent.mkdir(parents=True)
    last_run_path().write_text(kept := last_run.to_json())
    child = subprocess.run([sys.executable, "-c", CTRL_C_AS_THE_MODEL_LOADS, "run", "-q", "--continue", "And?"],
                           capture_output=True, stdin=subprocess.DEVNULL, cwd=REPO_ROOT, timeout=120)
    assert (child.returncode, child.stdout, child.stderr) == (130, b"", b""), child.stderr
    assert last_run_path().read_text() == kept and not _saved()


def test_ctrl_c_while_run_q_loads_on_a_terminal_ends_the_line_of_its_echo() -> None:
    """-q says nothing, but the ^C the terminal echoed is not left for the shell's prompt to follow on its line."""
    import pexpect

    child = pexpect.spawn(sys.executable, ["-c", CTRL_C_AS_THE_MODEL_LOADS, "run", "-q", "hi"], cwd=str(REPO_ROOT),
                          timeout=120, encoding="utf-8")
    shown = child.read()
    child.close()
    assert (child.exitstatus, shown) == (130, "\r\n"), shown


@pytest.mark.parametrize(("args", "plain_run_last"), [
    (("--conversation", "fresh"), False), (("--continue",), False),
    (("--continue",), True),  # the last run, saved as a conversation before the prefill: it stays so, as it was
])
def test_json_names_no_conversation_when_ctrl_c_left_the_exchange_unsaved(args: tuple[str, ...],
                                                                          plain_run_last: bool) -> None:
    """README: --json's `conversation` is left out when the exchange was not saved (Ctrl-C before any text); the
    question is dropped, as a chat drops it, and what the conversation held stays."""
    import pexpect

    assert run_localgen("run", "--conversation", "kept", "Name a fruit.", "-n", "3", *GREEDY).returncode == 0
    if plain_run_last:
        assert run_localgen("run", "Name a river.", "-n", "3", *GREEDY).returncode == 0
        (turn,) = json.loads(last_run_path().read_text())["turns"]
    before = _saved()
    child = spawn_localgen("run", *args, "--json", "--batch-size", "32", "Summarize: " + "river stone cloud " * 600,
                           env={**os.environ}, encoding="utf-8", timeout=120, dimensions=(24, 200))
    child.expect_exact("reading the prompt")
    started = child.before
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    record = json.loads(child.before[child.before.index('{"text"'):].splitlines()[0])  # after the progress line
    assert child.exitstatus == 130 and record["finish_reason"] == "interrupted" and record["text"] == ""
    assert "conversation" not in record, "no exchange went into a saved conversation"
    if plain_run_last:  # stderr named it: the last run is that conversation now, with its one exchange
        (name,) = set(_saved()) - set(before)
        assert f"now saved as conversation '{name}'" in started and "continuing the last run \"" in started
        assert _saved().pop(name)["turns"] == [turn] and not last_run_path().exists()
    assert {key: _saved()[key] for key in before} == before


def test_a_run_s_system_prompt_replacing_a_conversation_s_says_so_once(tmp_path: Path) -> None:
    """-s on a saved conversation with another system prompt replaces it, as chat's /system does, and says so; the
    same prompt again, or a new conversation's, is said nothing of. One saved without a system prompt ran with its
    chat template's default, where the template has one."""
    first = run_localgen("run", "--conversation", "pirate", "-s", "You are a pirate.", "-n", "1", *GREEDY, "Hi")
    assert first.returncode == 0 and "system prompt" not in first.err, first.err
    same = run_localgen("run", "--conversation", "pirate", "-s", "You are a pirate.", "-n", "1", *GREEDY, "Hi")
    assert same.returncode == 0 and "system prompt" not in same.err, same.err
    changed = run_localgen("run", "--conversation", "pirate", "-s", "You are a cat.", "-n", "1", *GREEDY, "Hi")
    assert changed.returncode == 0, changed.err
    assert ("localgen: conversation 'pirate' now has system prompt 'You are a cat.' instead of 'You are a pirate.'\n"
            in changed.err), changed.err
    assert _saved()["pirate"]["system"] == "You are a cat."
    emptied = run_localgen("run", "--conversation", "pirate", "-s", "", "-n", "1", *GREEDY, "Hi")
    assert "now has an empty system prompt instead of 'You are a cat.'\n" in emptied.err, emptied.err
    kept = run_localgen("run", "--conversation", "pirate", "-n", "1", *GREEDY, "Hi")  # no -s: kept, said nothing of
    assert kept.returncode == 0 and "system prompt" not in kept.err and _saved()["pirate"]["system"] == ""
    plain = run_localgen("run", "--conversation", "plain", "-n", "1", *GREEDY, "Hi")  # none: the template's default
    assert plain.returncode == 0 and _saved()["plain"]["system"] is None, plain.err
    given = run_localgen("run", "--conversation", "plain", "-s", "You are a cat.", "-n", "1", *GREEDY, "Hi")
    assert ("localgen: conversation 'plain' now has system prompt 'You are a cat.' instead of the model's default\n"
            in given.err), given.err
    template = tmp_path / "bare.jinja"  # ChatML with no system prompt of its own
    template.write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    bare = ("run", "--conversation", "bare", "--chat-template", str(template), "-n", "1", *GREEDY)
    assert run_localgen(*bare, "Hi").returncode == 0
    given = run_localgen(*bare, "-s", "You are a cat.", "Hi")
    assert "localgen: conversation 'bare' now has system prompt 'You are a cat.' instead of none\n" in given.err, \
        given.err


def test_a_run_takes_the_stop_strings_a_conversation_saved_unless_stop_is_given() -> None:
    """As a resumed chat does; --stop given holds for that run alone (--stop '' for none) and is not saved."""
    for name in ("saved", "given", "none", "early"):
        conversation = Conversation(name=name, settings={"stop": ["The" if name == "early" else "versatile"]})
        save_conversation(conversation)
        let_go(conversation)  # as a chat that saved it and ended

    def answer(name: str, *args: str) -> str:
        result = run_localgen("run", "--conversation", name, "-n", "8", *GREEDY, *args, "Name a fruit.")  # past fruit
        assert result.returncode == 0, result.err
        return result.out

    full = answer("none", "--stop", "")
    assert full.startswith("The most iconic and versatile fruit is"), full
    assert answer("saved") == full[:full.index("versatile")] + "\n"
    assert answer("given", "--stop", "fruit") == full[:full.index("fruit")] + "\n"
    empty = run_localgen("run", "--conversation", "early", "-n", "40", *GREEDY, "Name a fruit.")
    assert (empty.returncode, empty.out) == (0, ""), empty.err
    assert "the answer is empty: the stop string 'The' (the conversation's) matched before any text" in empty.err, \
        empty.err
    assert all(saved["settings"]["stop"] == ["The" if name == "early" else "versatile"]
               for name, saved in _saved().items())


def _wait_until_reading_stdin(proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    """Wait until the run blocks reading its `-f -` stdin, which it reads once it has taken the conversation's lock
    and read its file (the lock naming the run came before the file was read: a busy machine could change the file
    first). Where /proc cannot say, until the lock names the run, then a while more."""
    wchan = Path(f"/proc/{proc.pid}/wchan")
    lock = conversations_dir() / ".locks" / "notes.lock"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it read stdin"
        try:
            if "pipe_read" in wchan.read_text():  # the main thread waits in the kernel for the pipe's writer
                return
        except OSError:
            if lock.is_file() and lock.read_text().startswith(str(proc.pid)):
                time.sleep(5)
                return
        time.sleep(0.05)
    raise AssertionError("the run never read stdin")


def test_a_quiet_run_still_says_its_exchange_went_to_another_conversation() -> None:
    """-q keeps notes and warnings off stderr, but not that `--conversation notes` was saved as notes-2 (its file
    was changed by another program meanwhile): the user asked for notes, and their exchange is elsewhere. One saved
    again where it was deleted meanwhile is where it was asked: said nothing of."""
    mine = Conversation(name="notes", turns=[Turn("Hi.", "Hello.")])
    path = save_conversation(mine)
    let_go(mine)
    proc = popen_localgen([sys.executable, "-m", "localgen", "run", "-q", "--conversation", "notes", "-n", "2",
                           *GREEDY, "-f", "-", "Go on."], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=REPO_ROOT)
    _wait_until_reading_stdin(proc)
    theirs = path.read_text().replace("Hello.", "Hello there.")
    path.with_name("notes.json.new").write_text(theirs)
    os.replace(path.with_name("notes.json.new"), path)  # another program's whole new version, at once
    _, err = proc.communicate(b"Some text.", timeout=120)
    assert proc.returncode == 0, err.decode()
    assert err.decode() == (f"localgen: warning: {path} changed since localgen last read or saved it: it is kept as "
                            "it is, and this conversation is saved as 'notes-2' instead "
                            f"({path.with_name('notes-2.json')})\n")
    assert path.read_text() == theirs and len(_saved()["notes-2"]["turns"]) == 2
    proc = popen_localgen([sys.executable, "-m", "localgen", "run", "-q", "--conversation", "notes", "-n", "2",
                           *GREEDY, "-f", "-", "Go on."], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=REPO_ROOT)
    _wait_until_reading_stdin(proc)
    path.unlink()  # deleted meanwhile: saved where asked all the same, which -q says nothing of
    _, err = proc.communicate(b"Some text.", timeout=120)
    assert (proc.returncode, err.decode()) == (0, "")
    assert len(_saved()["notes"]["turns"]) == 2


def test_a_quiet_run_continuing_the_latest_conversation_still_says_its_exchange_went_to_another() -> None:
    """-q with --continue: the newest saved conversation, notes, changed by another program meanwhile, the exchange
    saved as notes-2, which -q still says, as for --conversation notes."""
    mine = Conversation(name="notes", turns=[Turn("Hi.", "Hello.")])
    path = save_conversation(mine)
    let_go(mine)
    proc = popen_localgen([sys.executable, "-m", "localgen", "run", "-q", "--continue", "-n", "2", *GREEDY, "-f", "-",
                           "Go on."], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=REPO_ROOT)
    _wait_until_reading_stdin(proc)
    path.write_text(path.read_text().replace("Hello.", "Hello there."))  # another program's change
    _, err = proc.communicate(b"Some text.", timeout=120)
    assert proc.returncode == 0, err.decode()
    assert err.decode() == (f"localgen: warning: {path} changed since localgen last read or saved it: it is kept as "
                            "it is, and this conversation is saved as 'notes-2' instead "
                            f"({path.with_name('notes-2.json')})\n")
    assert len(_saved()["notes-2"]["turns"]) == 2


def test_run_help_says_quiet_keeps_the_warnings_that_the_exchange_went_elsewhere_or_was_not_saved() -> None:
    helped = run_localgen("run", "--help")
    said = " ".join(helped.out.split())
    assert helped.returncode == 0 and "-q, --quiet Nothing on stderr but errors and the warnings that " \
        "the exchange of a continued conversation (--conversation, --continue) was saved as NAME-2, or that an " \
        "answer an error cut short was not saved in it: no notes, other warnings or progress." in said, helped.out


def test_a_run_continues_a_conversation_linked_into_the_folder_in_the_file_the_link_points_to(tmp_path: Path) -> None:
    """`run --conversation notes` where notes.json is a link to a file kept elsewhere: the exchange goes into that
    file, where each run saved a new notes-2, notes-3, ... beside the link."""
    mine = Conversation(name="notes", turns=[Turn("Hi.", "Hello.")])
    path = save_conversation(mine)
    let_go(mine)
    path.replace(kept := tmp_path / "notes.json")
    path.symlink_to(kept)
    going_on = run_localgen("run", "--conversation", "notes", "-n", "2", *GREEDY, "Go on.")
    assert going_on.returncode == 0 and going_on.err == "", going_on.err
    assert path.is_symlink() and list(_saved()) == ["notes"]
    assert [turn["user"] for turn in json.loads(kept.read_text())["turns"]] == ["Hi.", "Go on."]
