"""The commands run's refusals write for the user to run instead: every option given kept, quoted for the shell."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_localgen

_CONTINUE = "run's --continue goes on with the latest conversation"
_CONVERSATION = "run's is --conversation NAME (--continue goes on with the latest)"


@pytest.mark.parametrize(("args", "hint"), [
    (("--resume", "What next?", "-n", "5"), f"{_CONTINUE}: `localgen run --continue 'What next?' -n 5`"),
    (("--resume=What next?", "-n", "5", "-s", "be brief"),
     f"{_CONTINUE}: `localgen run --continue 'What next?' -n 5 -s 'be brief'`"),
    (("--resume", "What next?", "--temp", "0.2", "-q"), f"{_CONTINUE}: `localgen run --continue 'What next?' --temp "
                                                        "0.2 -q`"),
    (("--resume", "-n", "5"), f'{_CONTINUE}: `localgen run --continue -n 5 "..."`'),
    (("--resume", "work", "-n", "5"), f'{_CONVERSATION}: `localgen run --conversation work -n 5 "..."`'),
], ids=["prompt-then-option", "equals-and-quoted-value", "value-and-flag", "no-prompt", "name-no-prompt"])
def test_run_resume_with_options_offers_the_command_with_each_option_kept(
        args: tuple[str, ...], hint: str, home: Path) -> None:
    """run --resume 'What next?' -n 5 is offered --continue with that prompt and -n 5, where the -n's value read as a
    second word made the prompt a conversation's name (--conversation What-next -n 5); an option's value is no
    prompt either where none is given ("..." is written for it)."""
    result = run_localgen("run", *args)
    assert result.returncode == 2 and result.out == ""
    assert result.err == f"localgen: error: no such option: --resume (hint: {hint})\n"


LONG_PROMPT = "word " * 100  # 130 tokens as the bundled model's template makes it: more than -c 64 holds


@pytest.mark.parametrize("limit", ["50", "9000"], ids=["held-by-a-larger-context", "past-the-model-s-most"])
def test_print_prompt_refused_for_the_context_hints_the_size_run_s_refusal_does(limit: str) -> None:
    """--print-prompt's refusal of a prompt the context cannot hold names the --ctx-size that holds it and the -n
    given, as the run's own refusal does, where it named one that holds the prompt alone."""
    ran = run_localgen("run", "-c", "64", "-n", limit, LONG_PROMPT)
    printed = run_localgen("run", "-c", "64", "-n", limit, "--print-prompt", LONG_PROMPT)
    assert ran.returncode == printed.returncode == 1 and ran.out == printed.out == ""
    assert "tokens asked for (-n/--max-tokens), or shorten the input)\n" in ran.err, ran.err
    assert printed.err == ran.err
