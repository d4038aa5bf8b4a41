"""The chat's /set given a setting and its value joined by '=', in a real pseudo-terminal on the bundled model."""

from __future__ import annotations

from pathlib import Path

from tests.test_repl import Chat


def test_set_of_a_setting_and_its_value_joined_by_an_equals_sign_gives_the_command_that_sets_it(
        tmp_path: Path) -> None:
    """/set temperature=0.3 is refused with /set temperature 0.3, by any of the setting's names (it was an unknown
    setting 'temperature=0.3', hinted with "did you mean temperature?"), and changes nothing; a name no setting has
    is still unknown, and a stop string may hold '='."""
    chat = Chat(tmp_path / "home", "--temperature", "0.5", "--no-markdown", "-n", "5")
    try:
        for typed, key in (("temperature=0.3", "temperature"), ("temp=0.3", "temperature"), ("--top-p=0.3", "top_p")):
            said = " ".join(chat.command_words(f"/set {typed}", f"/set {key} 0.3)").split())
            assert f"/set takes a setting and its value apart, not '{typed}' (hint: /set {key} 0.3)" in said, said
        chat.command("/set temperature", "temperature = 0.5")
        chat.command_words("/set foo=1", "unknown setting 'foo'")
        chat.command_words("/set stop a=b", "stop strings (this chat): 'a=b'")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)
