"""run's output and usage errors on their edges: a printed prompt's line on a terminal, the hint for a real-number
option given a word, and a model file suggested for a name that prints as the one typed."""

from __future__ import annotations

import os
from pathlib import Path

import pexpect
import pytest

from tests.conftest import run_localgen, spawn_localgen


def test_a_prompt_printed_on_a_terminal_ends_its_line_and_stays_byte_for_byte_on_a_pipe() -> None:
    """run --raw --print-prompt hi on a terminal ends the prompt's line, so that the shell's prompt starts its own;
    on a pipe the prompt is hi, without a newline added."""
    shown = spawn_localgen("run", "--raw", "--print-prompt", "hi", env=dict(os.environ), encoding="utf-8", timeout=60)
    shown.expect(pexpect.EOF)
    shown.close()
    assert shown.exitstatus == 0 and shown.before == "hi\r\n", repr(shown.before)
    piped = run_localgen("run", "--raw", "--print-prompt", "hi")
    assert piped.returncode == 0 and piped.out == "hi", piped


@pytest.mark.parametrize(("given", "hinted"), [
    (("run", "--temp", "warm", "hi"), "--temp takes a number: `localgen run --temp 0.7 hi`"),
    (("run", "--top-p", "high", "hi"), "--top-p takes a number: `localgen run --top-p 0.9 hi`"),
    (("run", "--repeat-penalty", "x"), '--repeat-penalty takes a number: `localgen run --repeat-penalty 1.1 "..."`'),
    (("run", "--temperature=1.5.2", "hi"), "--temperature takes a number: `localgen run --temperature 0.7 hi`"),
    (("chat", "--min-p", "nope"), "--min-p takes a number: `localgen chat --min-p 0.05`"),
    (("run", "--temp", "１.２", "hi"), "--temp takes a number: `localgen run --temp 1.2 hi`"),  # another script's
    (("run", "--top-p", "５", "hi"), "--top-p takes a number: `localgen run --top-p 0.9 hi`"),  # 5: out of range
    (("run", "--temp", "0,7", "hi"), "the decimal point is '.': --temp 0.7"),
])
def test_a_real_number_option_given_a_word_is_hinted_with_a_number_it_takes(given: tuple[str, ...],
                                                                            hinted: str) -> None:
    """A real-number option given text it cannot read: the command written with the number the text is where the
    option takes it, else the option's typical value, as a whole-number option's; a decimal comma keeps its hint."""
    result = run_localgen(*given)
    assert result.returncode == 2 and f"(hint: {hinted})" in result.err and "Traceback" not in result.err, result.err


def _model_file(folder: Path, name: bytes) -> str:
    """A file named by bytes (not UTF-8) in folder, made to be misspelt: its path as Python names it."""
    path = os.path.join(os.fsencode(folder), name)
    Path(os.fsdecode(path)).write_bytes(b"GGUF")
    return os.fsdecode(path)


def test_a_model_file_suggested_that_prints_as_the_path_typed_is_written_with_escapes(tmp_path: Path) -> None:
    """A missing model path whose suggestion differs from it only in a byte that is not UTF-8 (both print U+FFFD)
    is hinted with both written as the tab-separated listings write them, \\xfe not \\xff."""
    _model_file(tmp_path, b"model\xfe.gguf")
    typed = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"model\xff.gguf"))
    result = run_localgen("run", "-m", typed, "hi")
    hint = f"(hint: did you mean {tmp_path}/model\\xfe.gguf? {tmp_path}/model\\xff.gguf was typed; \\xHH is a byte"
    assert result.returncode == 1 and hint in result.err, result.err


def test_a_model_file_suggested_that_nothing_tells_from_the_path_typed_is_left_out(tmp_path: Path) -> None:
    """Where the byte told apart falls in the middle a long path's cut leaves out, no file is suggested."""
    _model_file(tmp_path, b"m" * 40 + b"\xfe" + b"o" * 100 + b".gguf")
    typed = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"m" * 40 + b"\xff" + b"o" * 100 + b".gguf"))
    result = run_localgen("run", "-m", typed, "hi")
    assert result.returncode == 1 and "(hint: check the path, or pass a registry name)" in result.err, result.err


def test_a_model_file_suggested_that_prints_unlike_the_path_typed_is_written_as_it_prints(tmp_path: Path) -> None:
    """A suggestion that prints unlike the path typed (a capital) keeps its plain form, but for a byte of its name
    that is not UTF-8, written \\xfe, where U+FFFD stood for it, which names no file when typed."""
    _model_file(tmp_path, b"model.gguf")
    result = run_localgen("run", "-m", str(tmp_path / "Model"), "hi")
    assert result.returncode == 1 and f"(hint: did you mean {tmp_path}/model.gguf?)" in result.err, result.err
    (tmp_path / "b").mkdir()
    _model_file(tmp_path / "b", b"model\xfe.gguf")
    result = run_localgen("run", "-m", str(tmp_path / "b" / "Model"), "hi")
    hint = f"(hint: did you mean {tmp_path}/b/model\\xfe.gguf? \\xHH is a byte that is not UTF-8 (Tab completes it))"
    assert result.returncode == 1 and hint in result.err, result.err


def test_every_model_file_a_hint_names_is_written_with_its_bytes_that_are_not_utf8_escaped(tmp_path: Path) -> None:
    """The model files a hint names for a missing path, a folder or a name without .gguf write a byte of a name that
    is not UTF-8 \\xff, with the note that says so, where U+FFFD stood for it, which names no file when typed."""
    for folder, names in (("one", [b"bad\xff.gguf"]), ("two", [b"a\xff.gguf", b"b.gguf"])):
        (tmp_path / folder).mkdir()
        for name in names:
            _model_file(tmp_path / folder, name)
    note = "\\xHH is a byte that is not UTF-8 (Tab completes it)"
    for given, hint in (
            ("one/nope.gguf", f"check the path; this folder holds: {tmp_path}/one/bad\\xff.gguf; {note}"),
            ("one", f"did you mean {tmp_path}/one/bad\\xff.gguf? {note}"),
            ("two", f"pass one of the 2 models in this folder: {tmp_path}/two/a\\xff.gguf, {tmp_path}/two/b.gguf; "
                    f"{note}"),
            (os.fsdecode(b"one/bad\xff"), f"did you mean {tmp_path}/one/bad\\xff.gguf? {note}")):
        result = run_localgen("run", "-m", str(tmp_path / given), "hi")
        assert result.returncode == 1 and f"(hint: {hint})" in result.err, result.err
