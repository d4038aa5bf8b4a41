"""README's claims, run as a new user would run them: each test checks one that the code once did not keep."""

from __future__ import annotations

from pathlib import Path

from conftest import run_localgen


def test_prompt_cache_bound_takes_the_pib_that_readme_and_the_error_name(tmp_path: Path) -> None:
    """README bounds LOCALGEN_PROMPT_CACHE_BYTES at 1 PiB and the error past it says `over 1.0 PiB`: 1PiB is a size."""
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    at_most = run_localgen("cache", env={**env, "LOCALGEN_PROMPT_CACHE_BYTES": "1PiB"})
    assert at_most.returncode == 0, at_most.stderr
    assert "0 B of 1.0 PiB" in at_most.stderr.decode()
    over = run_localgen("cache", env={**env, "LOCALGEN_PROMPT_CACHE_BYTES": "2PiB"})
    assert over.returncode == 1
    assert "is over 1.0 PiB" in over.stderr.decode()
    decimal = run_localgen("cache", env={**env, "LOCALGEN_PROMPT_CACHE_BYTES": "1PB"})
    assert decimal.returncode == 0, decimal.stderr
    assert "0 B of 909.5 TiB" in decimal.stderr.decode()
