"""The chat's /file given several files as a terminal writes those dropped on it, or a link to nothing, in a real
pseudo-terminal on the bundled model: each name quoted or escaped, it is told to attach them one at a time; the link
is named as -f names it."""

from __future__ import annotations

from pathlib import Path

from tests.chat_terminal import end_chat
from tests.test_repl import Chat


def test_file_given_files_quoted_or_escaped_as_dropped_ones_says_to_attach_one_at_a_time(tmp_path: Path) -> None:
    """Several names quoted or escaped as a shell reads them get the hint to attach them one at a time, as bare ones
    do (they got "check the path", or "takes one argument" where the first was quoted); one name typed whole, an
    apostrophe in it, is still attached."""
    folder = tmp_path / "my notes"
    folder.mkdir()
    (folder / "it's.txt").write_text("The first file.\n")
    (tmp_path / "b.txt").write_text("The second file.\n")
    chat = Chat(tmp_path / "home", "-n", "2", cwd=tmp_path)
    try:
        hint = "/file attaches one file at a time: /file my notes/it's.txt, then /file b.txt)"
        for typed in ("'my notes/it'\\''s.txt' b.txt", "\"my notes/it's.txt\" b.txt", "my\\ notes/it\\'s.txt b.txt"):
            said = " ".join(chat.command_words(f"/file {typed}", hint).split())
            assert f"no such file: {typed} (hint: {hint}" in said, said
        chat.command_words("/file b.txt 'my notes/it'\\''s.txt'", "/file b.txt, then /file my notes/it's.txt)")
        chat.command_words("/file my notes/it's.txt", "attached my notes/it's.txt (16 characters)")
        chat.command_words("/file 'b.txt' nosuch", "takes one argument")
        chat.command_words("/file b.txt 'nosuch'", "check the path given to /file")
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_file_given_bare_names_one_with_an_apostrophe_says_to_attach_one_at_a_time(tmp_path: Path) -> None:
    """Bare names, an apostrophe in one, get the hint to attach them one at a time (they got "check the path", the
    apostrophe read as a quote left open); where each word is a file and the whole argument is one too, the whole
    one is attached."""
    for name in ("it's.txt", "a.txt", "b.txt"):
        (tmp_path / name).write_text("A file.\n")
    (tmp_path / "a.txt b.txt").write_text("The file with a space.\n")
    chat = Chat(tmp_path / "home", "-n", "2", cwd=tmp_path)
    try:
        hint = "/file attaches one file at a time: /file it's.txt, then /file b.txt)"
        said = " ".join(chat.command_words("/file it's.txt b.txt", hint).split())
        assert f"no such file: it's.txt b.txt (hint: {hint}" in said, said
        chat.command_words("/file a.txt b.txt", "attached a.txt b.txt (23 characters)")
        assert chat.quit() == 0
    finally:
        end_chat(chat)


def test_file_given_a_link_to_nothing_names_its_missing_target_as_f_does(tmp_path: Path) -> None:
    """`/file dl.txt`, dl.txt a link to a file not there: it said "no such file: dl.txt"."""
    (tmp_path / "dl.txt").symlink_to("/gone/notes.txt")
    chat = Chat(tmp_path / "home", "-n", "2", cwd=tmp_path)
    try:
        said = " ".join(chat.command_words("/file dl.txt", "own path to /file)").split())
        assert ("dl.txt is a link to /gone/notes.txt, which is not there (hint: point the link at a file, or pass "
                "the file's own path to /file)") in said, said
        assert chat.quit() == 0
    finally:
        end_chat(chat)
