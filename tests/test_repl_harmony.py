"""The chat shows a GPT-OSS answer in harmony as it shows a <think> block: its analysis channel dimmed, the harmony
markup never, the final channel as the answer (in a real pseudo-terminal, the bundled model writing harmony text)."""

from __future__ import annotations

from pathlib import Path

from tests.test_repl import Chat, _regen, _shown_since

# The bundled model follows the examples: it writes its reasoning on the analysis channel, then its answer.
HARMONY_TEMPLATE = """\
{% for m in messages %}{% if m.role == 'user' %}Q: What is 1+1?
A:
<|channel|>analysis<|message|>One plus one is two.<|end|><|start|>assistant<|channel|>final<|message|>Answer: two
Q: What is 2+2?
A:
<|channel|>analysis<|message|>Two plus two is four.<|end|><|start|>assistant<|channel|>final<|message|>Answer: four
Q: {{ m.content }}
A:
{% else %}{{ m.content }}
{% endif %}{% endfor %}"""
REASONING = "Three plus three is six."


def test_a_harmony_answer_s_analysis_is_shown_dimmed_and_thinking_off_hides_it(home: Path, tmp_path: Path) -> None:
    template = tmp_path / "harmony.jinja"
    template.write_text(HARMONY_TEMPLATE)
    chat = Chat(home, "--chat-template", str(template), "--temperature", "0", "-n", "50", "--stop", "Q:",
                "--no-markdown")
    mark = len(chat.transcript.getvalue())
    answer = chat.ask("What is 3+3?")["turns"][0]["answer"]
    assert answer.startswith(f"<|channel|>analysis<|message|>{REASONING}<|end|>"), "saved as the model wrote it"
    dimmed, text = _shown_since(chat, mark)
    assert dimmed == REASONING, "the analysis channel, and only it, is dimmed"
    assert "Answer: six" in text and "<|" not in text, text
    chat.command("/thinking off", "reasoning is hidden")
    mark = len(chat.transcript.getvalue())
    _regen(chat)
    dimmed, text = _shown_since(chat, mark)
    assert "Answer: six" in text and "Three" not in text and dimmed == "" and "<|" not in text, text
    assert chat.quit() == 0
