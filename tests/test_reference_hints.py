"""The hints of a malformed model reference: one level, naming the form that was meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from localgen.errors import UsageError
from localgen.references import parse_reference
from tests.conftest import run_localgen
from tests.hub_server import HubServer, child_env, make_gguf_bytes, run_cli

# the hint on a quant no file name carries
_NO_QUANT = "a quant holds no space, '/', '\\', '*', '?' or a character that does not print: "


@pytest.mark.parametrize(("text", "hint"), [
    ("", "name a model: NAME, ORG/REPO[:QUANT] or path/to/model.gguf; `localgen models list --all` lists the names"),
    (" ", "name a model: NAME, ORG/REPO[:QUANT] or path/to/model.gguf; `localgen models list --all` lists the names"),
    ("org/repo:", "write org/repo:QUANT, e.g. org/repo:Q4_K_M, or org/repo alone for the quant that fits best here"),
    ("qwen2.5-1.5b:", "write qwen2.5-1.5b:QUANT, e.g. qwen2.5-1.5b:Q4_K_M"),
    ("org/repo/m.Q4_0.gguf:", "a file takes no quant: drop the ':', writing org/repo/m.Q4_0.gguf alone"),
    ("m.gguf:", "a file takes no quant: drop the ':', writing m.gguf alone"),
    ("org/repo:" + "q" * 200, "a quant is a tag of at most 96 characters, e.g. Q8_0: write org/repo:QUANT, e.g. "
                              "org/repo:Q4_K_M, or org/repo alone for the quant that fits best here"),
    ("qwen2.5-1.5b:" + "q" * 200, "a quant is a tag of at most 96 characters, e.g. Q8_0: write qwen2.5-1.5b:QUANT, "
                                  "e.g. qwen2.5-1.5b:Q4_K_M"),
    ("org/repo/m.gguf:" + "q" * 200, "a file takes no quant: drop the ':', writing org/repo/m.gguf alone"),
    ("org/repo:q 8", _NO_QUANT + "write org/repo:QUANT, e.g. org/repo:Q4_K_M, or "
                     "org/repo alone for the quant that fits best here"),
    ("mine:Q4_K_M?", _NO_QUANT + "write mine:QUANT, e.g. mine:Q4_K_M"),
    ("org/repo:Q4\\K", _NO_QUANT + "write org/repo:QUANT, e.g. org/repo:Q4_K_M, or "
                      "org/repo alone for the quant that fits best here"),
    ("org/repo:Q4\tK", _NO_QUANT + "write org/repo:QUANT, e.g. org/repo:Q4_K_M, or "
                     "org/repo alone for the quant that fits best here"),
    ("org/repo/m.gguf:q 8", "a file takes no quant: drop the ':', writing org/repo/m.gguf alone"),
    ("org/repo:Q4_0\u200b", _NO_QUANT + "write org/repo:QUANT, e.g. "
                            "org/repo:Q4_K_M, or org/repo alone for the quant that fits best here"),
    ("mine:\u202e0_4Q", _NO_QUANT + "write mine:QUANT, e.g. mine:Q4_K_M"),
])
def test_a_malformed_reference_s_hint_names_the_form_meant_without_nested_parentheses(text: str, hint: str) -> None:
    """An empty reference's hint names `models list --all` without parentheses inside the hint's own; an empty or
    overlong quant after a name or ORG/REPO is shown written after what was typed, and after a file is to be
    dropped."""
    with pytest.raises(UsageError) as refused:
        parse_reference(text)
    assert refused.value.hint == hint


@pytest.mark.parametrize(("text", "shown"), [
    ("org/repo:Q4_0\u200b", "model reference 'org/repo:Q4_0\\u200b' has 'Q4_0\\u200b' after ':', which is no quant"),
    ("mine:\u202e0_4Q", "model reference 'mine:\\u202e0_4Q' has '\\u202e0_4Q' after ':', which is no quant"),
    ("org/repo:Q4\tK", "model reference 'org/repo:Q4\\tK' has 'Q4\\tK' after ':', which is no quant"),
])
def test_a_quant_s_character_that_does_not_print_is_shown_escaped(text: str, shown: str) -> None:
    """A quant with a character that does not print (a zero-width space, a bidi override, a tab) is refused naming it
    escaped, where the message held it as it is, unseen."""
    with pytest.raises(UsageError) as refused:
        parse_reference(text)
    assert refused.value.message == shown


@pytest.mark.parametrize(("text", "quant"), [
    ("org/repo:UD-Q4_K_XL", "UD-Q4_K_XL"), ("hf.co/org/repo:m-Q8_0.gguf", "M-Q8_0.GGUF"), ("qwen2.5:1.5b", "1.5B"),
    ("org/repo: q8_0", "Q8_0"), ("org/repo:Q4KM", "Q4KM"), ("org/repo:latest", None),
    ("org/repo:IQ4_NL+Q8_0", "IQ4_NL+Q8_0"), ("org/repo:Q4_K_M!", "Q4_K_M!"), ("org/repo:v1@~q8", "V1@~Q8"),
])
def test_a_tag_a_file_can_carry_is_taken_as_the_quant(text: str, quant: str | None) -> None:
    """Only a quant no file name can carry (a space, '/', '*' in it) is refused: a tag around a quant, a mixed quant
    (m.iq4_nl+q8_0.gguf), a file's name (which the Hub's listing answers), a size, a misspelling the listing corrects
    still reach it."""
    assert parse_reference(text).quant == quant


def test_a_mixed_quant_pulls_the_file_that_carries_it(loopback_hub: HubServer, tmp_path: Path) -> None:
    """ORG/REPO:IQ4_NL+Q8_0 names a mixed-quant file (m.iq4_nl+q8_0.gguf), where the '+' was refused as no quant."""
    loopback_hub.add_repo("org/mixed-GGUF", {"m.iq4_nl+q8_0.gguf": make_gguf_bytes("mixed", 2**17),
                                             "m.q8_0.gguf": make_gguf_bytes("q8", 2**17)})
    pulled = run_cli(child_env(loopback_hub, tmp_path), "pull", "org/mixed-GGUF:IQ4_NL+Q8_0")
    assert pulled.returncode == 0 and pulled.stdout.endswith("/m.iq4_nl+q8_0.gguf\n"), pulled.stderr


def test_rm_s_hint_for_a_malformed_quant_names_no_repo_alone_picking_one(tmp_path: Path) -> None:
    """`models rm 'org/repo:*'` hinted "or org/repo alone for the quant that fits best here", which rm does not do:
    its hint names ORG/REPO:QUANT alone, where show's (which picks the quant) still names both."""
    env = {"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}
    said = "localgen: error: model reference 'org/repo:*' has '*' after ':', which is no quant (hint: a quant holds " \
           "no space, '/', '\\', '*', '?' or a character that does not print: write org/repo:QUANT, e.g. " \
           "org/repo:Q4_K_M{})\n"
    for command, alone in (("rm", ""), ("show", ", or org/repo alone for the quant that fits best here")):
        done = run_localgen("models", command, "org/repo:*", env=env)
        assert (done.returncode, done.err) == (2, said.format(alone)), done.err


def test_a_hint_s_pull_quotes_the_name_typed_for_a_shell(tmp_path: Path) -> None:
    """`run -m "org/repo:it's"` hinted `localgen pull org/repo:it's`, which a shell reads as an open quote: the name is
    quoted as a shell takes it."""
    env = {"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}
    done = run_localgen("run", "-m", "org/repo:it's", "hi", env=env)
    assert done.returncode == 1 and done.err.endswith("run `localgen pull 'org/repo:it'\"'\"'s'`)\n"), done.err


def test_every_hint_s_command_quotes_the_name_as_pull_command_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hint's pull that leaves offline mode first, a quant that fits instead and models show's fit each quote the
    name given through one helper, where online_pull took it as its caller had quoted it (or not)."""
    from localgen.offline_words import localgen_command, online_pull, pull_command

    monkeypatch.delenv("LOCALGEN_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    name = "org/repo:it's"
    assert pull_command(name) == "localgen pull 'org/repo:it'\"'\"'s'"
    assert online_pull(name, "downloads it") == f"`{pull_command(name)}` downloads it"
    assert localgen_command("fit", "org/my repo") == "localgen fit 'org/my repo'"
