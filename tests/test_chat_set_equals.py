"""The chat's /set given a setting and its value joined by '=', in a real pseudo-terminal on the bundled model."""

from __future__ import annotations

from pathlib import Path

from tests.chat_terminal import end_chat
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
        end_chat(chat)


def test_set_joined_by_an_equals_sign_with_blanks_stop_system_or_no_value_gives_the_command_that_sets_it(
        tmp_path: Path) -> None:
    """'=' with a blank after it, doubled, first, or with no value, and stop's and system's '=' get the command that
    sets them (they were unknown settings 'temperature=', 'stop' or 'system=Be', or hinted /set temperature =0.7),
    each quoted as typed; a stop string that is '=' after a blank is still set."""
    chat = Chat(tmp_path / "home", "--temperature", "0.5", "--no-markdown", "-n", "5")
    try:
        for typed, hint in (("stop=a", "/set stop a"), ("temperature= 0.7", "/set temperature 0.7"),
                            ("temperature=", "/set temperature VALUE"), ("system=Be brief", "/set system Be brief"),
                            ("temperature==0.7", "/set temperature 0.7"), ("=temperature=0.7", "/set temperature 0.7"),
                            ("temp=it's", "/set temperature it's")):
            said = " ".join(chat.command_words(f"/set {typed}", f"(hint: {hint})").split())
            assert f"/set takes a setting and its value apart, not '{typed}' (hint: {hint})" in said, said
        chat.command("/set temperature", "temperature = 0.5")
        chat.command_words("/set stop ==", "stop strings (this chat): '=='")
        assert chat.quit() == 0
    finally:
        end_chat(chat)
