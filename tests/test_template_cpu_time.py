"""A chat template's time limit counts the CPU time its render takes, not the time it waits."""

import threading
import time

import pytest

from localgen import template_sandbox
from localgen.chat import Message
from localgen.template_sandbox import render_template


def test_a_render_waiting_its_turn_behind_another_is_not_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Renders take turns (a chat renders on two threads while a message is typed): one that waits 0.3 s for the
    other's turn to end, against a limit of 0.1 s, renders all the same, as one on a machine others keep busy."""
    monkeypatch.setattr(template_sandbox, "TEMPLATE_TIME_LIMIT_S", 0.1)
    turn_taken = threading.Event()

    def hold_the_turn() -> None:
        with template_sandbox._RLIMIT_TURN:
            turn_taken.set()
            time.sleep(0.3)

    holder = threading.Thread(target=hold_the_turn)
    holder.start()
    turn_taken.wait()
    try:
        out = render_template("{% for m in messages %}{{ m.role }}: {{ m.content }}{% endfor %}",
                              [Message("user", "hi")], bos_token="", eos_token="", model_name="m")
    finally:
        holder.join()
    assert out == "user: hi"


def test_a_render_that_keeps_computing_is_stopped_at_the_limit_of_cpu_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A template looping for long is stopped once its thread has computed for the limit, in about that time."""
    monkeypatch.setattr(template_sandbox, "TEMPLATE_TIME_LIMIT_S", 0.1)
    started = time.thread_time()
    with pytest.raises(template_sandbox.TemplateStopped) as info:
        render_template("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                        [Message("user", "hi")], bos_token="", eos_token="", model_name="m")
    assert info.value.message == "m: the chat template took over 0.1 s of CPU time and was stopped"
    assert time.thread_time() - started < 5
