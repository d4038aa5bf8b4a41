"""Why the AMX probe's verdict could not be kept is said as every file that could not be written is: by
errors.os_reason, the one function that says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from localgen import errors
from localgen.engine import amx


def test_a_verdict_that_cannot_be_kept_says_why_by_the_one_function(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """write_verdict spelt the reason itself (error.strerror or error), apart from the other 30 messages."""
    monkeypatch.setattr(errors, "os_reason", lambda exc: f"the reason of a {type(exc).__name__}")
    (tmp_path / "cache").write_text("a file where the cache folder goes")
    path = tmp_path / "cache" / amx.PROBE_FILE
    assert amx.write_verdict(path, amx.Verdict("key", True, "a batch decoded")) == \
        f"{path}: the reason of a FileExistsError"
