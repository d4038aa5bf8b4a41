"""What a file that is no GGUF model is, told from its first bytes, and what to do about it."""

from __future__ import annotations

import codecs

from localgen.gguf_cursor import HINT

FOREIGN_HEAD_BYTES = 64  # the bytes read to tell what a file is
SHOWN_CHARS = 24  # of a text file's start, shown in the error
_CONVERT = ("convert it to GGUF with llama.cpp's convert_hf_to_gguf.py, or find a GGUF repo of the model on "
            "Hugging Face")
_NOT_FETCHED = "{what}, not the model: localgen downloads ORG/REPO/FILE.gguf itself"
_SAFETENSORS_HEADER_MAX = 100_000_000  # safetensors' own limit on its JSON header


def describe_foreign(head: bytes) -> tuple[str, str]:
    """What a file whose first bytes (head) are not GGUF's magic is, as the problem and its hint: one line, no raw
    control bytes."""
    stripped = head.lstrip()
    if head[:4] in (b"lmgg", b"fmgg", b"tjgg"):
        return ("not a GGUF file (an old GGML/GGJT model)",
                "llama.cpp no longer loads GGML files: find a GGUF copy of the model on Hugging Face")
    if stripped.startswith(b"version https://git-lfs"):
        return ("not a GGUF file (a Git LFS pointer, not the model itself)",
                _NOT_FETCHED.format(what="the clone holds the pointer") + ", or `git lfs pull` fetches it")
    if _is_safetensors(head):
        return "not a GGUF file (a safetensors model)", _CONVERT
    if head.startswith(b"PK\x03\x04"):
        return "not a GGUF file (a zip archive, as a PyTorch checkpoint is)", _CONVERT
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "not a GGUF file (a Python pickle, as an older PyTorch checkpoint is)", _CONVERT
    text = _text_start(head)
    if text is not None and stripped.lower().startswith((b"<!doctype html", b"<html")):
        return f"not a GGUF file (an HTML page: {text})", _NOT_FETCHED.format(what="the download saved a web page")
    if text is not None:
        return (f"not a GGUF file (text: {text})",
                "check the path: this is a text file; localgen loads GGUF model files, usually ending in .gguf")
    return f"not a GGUF file (it starts {_first_bytes(head)}, where a GGUF file starts 'GGUF')", HINT


def _is_safetensors(head: bytes) -> bool:
    """A safetensors file: its JSON header's length (8 bytes, little-endian), then the header, '{"...'."""
    length = int.from_bytes(head[:8], "little")
    return len(head) >= 10 and head[8:10] == b'{"' and 0 < length <= _SAFETENSORS_HEADER_MAX


def _text_start(head: bytes) -> str | None:
    """The start of a text file, quoted and on one line (its whitespace runs one space); None where head is no
    UTF-8 text."""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head)  # a character cut at head's end is left out
    except UnicodeDecodeError:
        return None
    text = text.removeprefix("\ufeff")
    if not text or not all(c.isprintable() or c in "\t\n\r\f\v" for c in text):
        return None
    shown = " ".join(text.split())
    if not shown:
        return "blank"
    return f"'{shown[:SHOWN_CHARS].rstrip()}…'" if len(shown) > SHOWN_CHARS else f"'{shown}'"


def _first_bytes(head: bytes) -> str:
    """A binary file's first four bytes: as letters where they are printable ASCII, else in hex."""
    first = head[:4]
    if first.isascii() and first.decode().isprintable():
        return f"'{first.decode()}'"
    return "with the bytes " + " ".join(f"{b:02x}" for b in first)
