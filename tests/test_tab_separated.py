"""Fields of a tab-separated listing line, escaped so that a script reads each back whole."""

from __future__ import annotations

import io
import os
import re

import pytest

from localgen.tab_separated import escaped_field, write_rows


def _read_back(field: str) -> bytes:
    """A field's bytes as a script undoes its escapes (PostgreSQL's COPY text format's)."""
    named = {"t": b"\t", "n": b"\n", "r": b"\r", "\\": b"\\"}
    return re.sub(rb"\\(x[0-9a-f]{2}|.)", lambda found: named.get(found[1].decode()) or bytes.fromhex(
        found[1][1:].decode()), field.encode("utf-8"))


@pytest.mark.parametrize(("text", "written"), [
    ("plain café ✓", "plain café ✓"),
    ("a\tb\nc\rd\\e", "a\\tb\\nc\\rd\\\\e"),
    ("bell\x07 esc\x1b[31m del\x7f", "bell\\x07 esc\\x1b[31m del\\x7f"),
    ("next line\x85 line separator\u2028", "next line\\xc2\\x85 line separator\\xe2\\x80\\xa8"),
    (os.fsdecode(b"bad\xffname.gguf"), "bad\\xffname.gguf"),  # a file name's byte that is not UTF-8
    ("\\t is two characters", "\\\\t is two characters"),
])
def test_a_field_is_escaped_and_reads_back_to_its_bytes(text: str, written: str) -> None:
    assert escaped_field(text) == written
    assert _read_back(written) == os.fsencode(text)


def test_rows_are_one_line_each_their_fields_tab_separated() -> None:
    out = io.StringIO()
    write_rows(out, [["NAME", "PATH"], ["a\tb", "/x\ny"]])
    assert out.getvalue() == "NAME\tPATH\na\\tb\t/x\\ny\n"
