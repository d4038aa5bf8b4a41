"""`localgen run`'s errors name what the user typed: another tool's -N and -T, the --grammar-file given, and the
attached file that held nothing."""

from __future__ import annotations

import pytest

from tests.usage_errors import usage_error


@pytest.mark.parametrize(("args", "message", "hint"), [
    (["run", "-N", "5", "hi"], "no such option: -N", "did you mean -n? see `localgen run --help`"),
    (["run", "-N5", "hi"], "no such option: -N5", "did you mean -n? see `localgen run --help`"),
    (["run", "-T", "0.5", "hi"], "no such option: -T", "did you mean --temperature? see `localgen run --help`"),
    (["chat", "-T", "0.5"], "no such option: -T", "did you mean --temperature? see `localgen chat --help`"),
    (["run", "-m", "-T", "0.5", "hi"], "-m needs a value (REF), and the word after it is the option -T",
     "name the model after -m: `localgen run -m NAME --temperature 0.5 hi`; `localgen models list --all` shows the "
     "names"),
])
def test_a_capital_n_or_t_is_hinted_toward_the_token_limit_or_the_temperature(
        args: list[str], message: str, hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """-N 5 (a capital slipped) and -T 0.5 (temperature; -t is --threads) were refused with the help alone."""
    assert usage_error(args, capsys) == (message, hint)
