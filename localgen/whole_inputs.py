"""Files an option takes as a whole (a chat template, a grammar, a JSON schema): capped far below a document, as one
of megabytes is the wrong file, and read no further than the cap."""

from __future__ import annotations

from localgen.errors import UsageError
from localgen.input_text import SizeCap
from localgen.inputs import InputFile, Waiting, emptiness
from localgen.other_tools import check_template_name
from localgen.stdin_names import names_stdin
from localgen.template_sandbox import TEMPLATE_SOURCE_LIMIT_CHARS

MAX_WHOLE_TEXT_BYTES = 4 * 2**20  # real ones are some KiB; a generated grammar or schema some hundreds (a chat
# template's cap is one of characters, TEMPLATE_SOURCE_LIMIT_CHARS)
TEMPLATE_HINT = "pass a Jinja chat template file, like the chat_template in a model's tokenizer_config"


def whole_text_cap(option: str, what: str) -> SizeCap:
    """The size cap of the file given to option, which takes what ("a grammar") as a whole."""
    return SizeCap(option, MAX_WHOLE_TEXT_BYTES, what)


def whole_text(file: InputFile, what: str, hint: str, *, waiting: Waiting | None = None) -> str:
    """The text of a file an option takes as a whole (a chat template, a grammar, a JSON schema): binary data, bytes
    that are not UTF-8 and an empty file are refused as not being what ("a grammar"), with hint."""
    warnings: list[str] = []
    text = file.read(None, warnings, binary_hint=hint, waiting=waiting)
    if warnings or not text.strip():
        raise UsageError(f"{file.name} is not {what} ({'not UTF-8' if warnings else f'it {emptiness(text)}'})",
                         hint=hint)
    if file.cap is not None:
        file.cap.check_length(text, file.name)
    return text


def chat_template_file(name: str | None) -> InputFile | None:
    """The --chat-template file given, checked (None when none was given; llama-cli's template names are told)."""
    if name is not None and names_stdin(name):  # "-", /dev/stdin: a run's may carry the prompt, a chat's is typed
        raise UsageError("--chat-template does not read stdin", hint="give the chat template's file by name")
    if name is None:
        return None
    check_template_name(name)
    return InputFile.checked(name, "--chat-template", binary_hint=TEMPLATE_HINT,
                             cap=SizeCap.of_characters("--chat-template", TEMPLATE_SOURCE_LIMIT_CHARS,
                                                       "a chat template"))  # the most the sandbox renders


def read_chat_template(file: InputFile | None, *, waiting: Waiting | None = None) -> str | None:
    """The text of a --chat-template file (a Jinja chat template), or None when none was given."""
    return None if file is None else whole_text(file, "a chat template", TEMPLATE_HINT, waiting=waiting)
