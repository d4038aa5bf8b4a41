"""`localgen chat` takes run's generation and loading options (--stop, --kv-type, --flash-attn, batch sizes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_repl import Chat


def test_chat_takes_stop_strings_and_the_loading_knobs(tmp_path: Path) -> None:
    chat = Chat(tmp_path / "home", "--temperature", "0", "--no-markdown", "-n", "40", "--stop", "e",
                "--kv-type", "q8_0", "--flash-attn", "on", "--batch-size", "256", "--ubatch-size", "128",
                "--threads-batch", "1")
    try:
        answer = chat.ask("Describe the sea.")["turns"][-1]["answer"]
        assert answer and "e" not in answer, "the answer stops before the stop string"
        assert "stop strings (this chat): 'e'" in chat.command("/show", "stop strings (this chat): 'e'")
        assert "KV type: q8_0" in chat.transcript.getvalue()
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_chat_warns_of_a_typed_escape_in_a_stop_string(tmp_path: Path) -> None:
    """As run does: llama-cli reads --reverse-prompt '\\n' as a newline, localgen takes it as typed."""
    chat = Chat(tmp_path / "home", "--no-markdown", "-n", "1", "--stop", "\\n")
    try:
        said = " ".join(chat.transcript.getvalue().split())
        assert "localgen: warning: --stop '\\n' holds \\n as a backslash and a letter, not a newline" in said, said
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


@pytest.mark.parametrize(("argv", "expected"), [
    (["chat", "--resume"], ["chat", "--resume=\0"]),
    (["chat", "--resume", "-n", "5"], ["chat", "--resume=\0", "-n", "5"]),
    (["chat", "--resume", ""], ["chat", "--resume", ""]),  # an empty name is refused, never the latest
    (["chat", "--resume", "notes"], ["chat", "--resume", "notes"]),
    (["run", "--resume"], ["run", "--resume"]),
    (["run", "--", "--resume"], ["run", "--", "--resume"]),
    (["chat", "--", "--resume"], ["chat", "--", "--resume"]),
    (["chat", "--continue"], ["chat", "--continue=\0"]),  # llm's name for it
    (["chat", "--continue", "notes"], ["chat", "--continue", "notes"]),
    (["run", "--continue", "hi"], ["run", "--continue", "hi"]),
])
def test_only_chat_s_resume_goes_without_a_value(argv: list[str], expected: list[str]) -> None:
    from localgen.cli import _resume_without_value

    assert _resume_without_value(argv) == expected
