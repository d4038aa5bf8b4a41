"""Text given on the command line and in files as the model gets it, shown by `run --print-prompt` on the real bundled
model: Windows line ends, byte-order marks."""

from __future__ import annotations

from pathlib import Path

from localgen.input_text import argument_as_file_text
from localgen.inputs import system_prompt_text
from tests.test_run_inputs import chatml, printed_prompt


def test_raw_keeps_the_line_ends_of_a_system_prompt_as_it_keeps_the_prompt_s(tmp_path: Path) -> None:
    """--raw sends -s and --system-file with their Windows line ends, as the prompt and -f files, where both had
    theirs made plain newlines (a --system-file less the line ends it ends with, as its blank line follows it)."""
    system = tmp_path / "system.txt"
    system.write_bytes(b"Be terse.\r\nAnswer in English.\r\n")
    assert printed_prompt("--raw", "-s", "sys\r\nline\r", "p\r\nq") == "sys\r\nline\r\n\np\r\nq"
    text = "Be terse.\r\nAnswer in English."
    assert printed_prompt("--raw", "--system-file", str(system), "p\r\nq") == f"{text}\n\np\r\nq"
    assert printed_prompt("--raw", "-f", str(system), "p\r\nq") == f"{text}\r\n\np\r\nq"


def test_system_prompt_text_drops_the_line_ends_a_file_ends_with_and_keeps_the_rest_where_exact() -> None:
    assert system_prompt_text("a\r\nb\r\n\r\n") == "a\nb"
    assert system_prompt_text("a\r\nb\r\n\r\n", exact=True) == "a\r\nb"
    assert system_prompt_text("a\r\nb\r", exact=True) == "a\r\nb\r"


def test_a_byte_order_mark_at_the_start_of_an_argument_is_dropped_as_a_file_s_is(tmp_path: Path) -> None:
    """`localgen run -s "$(cat FILE)" "$(cat FILE)"` of a file a Windows editor saved with a UTF-8 byte-order mark
    makes the prompt --system-file FILE -f FILE makes, where the model got U+FEFF at the start of both (22 prompt
    tokens, not 16); --raw keeps it, as it keeps the rest."""
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfhello\r\n")
    as_files = printed_prompt("--system-file", str(bom), "-f", str(bom))
    assert printed_prompt("-s", "\ufeffhello\r", "\ufeffhello\r") == as_files == chatml("hello", system="hello")
    assert printed_prompt("--raw", "-s", "\ufeffhello\r", "\ufeffhello\r") == "\ufeffhello\r\n\n\ufeffhello\r"


def test_argument_as_file_text_drops_a_leading_byte_order_mark_alone() -> None:
    assert argument_as_file_text("\ufeffa\ufeff\r\nb\r") == "a\ufeff\nb"
