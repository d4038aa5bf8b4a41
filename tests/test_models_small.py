"""Model management's smaller cases, through real localgen processes: a name shown as typed, `pull --force` of the
bundled model, what `models list` says of a broken shard or a cached copy that no longer matches its pin, and the
problem's full reason in `--json`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_localgen


@pytest.mark.parametrize(("args", "shown"), [
    (("run", "-m", "Nope", "hi"), "unknown model 'Nope'"),
    (("pull", "NopeX:Q4_0"), "unknown model 'NopeX'"),
    (("models", "show", "Qwen2.5"), "'Qwen2.5' comes in 4 sizes"),
])
def test_an_unknown_model_is_named_as_typed(home: Path, args: tuple[str, ...], shown: str) -> None:
    """`-m Nope` was refused as `unknown model 'nope'`, a name the user never typed."""
    result = run_localgen(*args, env={"LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 1 and result.err.startswith(f"localgen: error: {shown}"), result.err
