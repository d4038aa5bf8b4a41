"""The usage error (exit code 2) a `localgen` command line gets, read from main() in the test process."""

from __future__ import annotations

import pytest

from localgen.cli import main


def usage_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """The message and the hint of the usage error `localgen ARGS` gets (exit code 2), on one line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("localgen: error: ") and err.endswith(")\n") and err.count("\n") == 1, err
    message, _, hint = err.removeprefix("localgen: error: ").rstrip("\n").partition(" (hint: ")
    return message, hint[:-1]
