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


def test_a_model_path_with_its_gguf_mistyped_is_told_the_file_meant(tmp_path: Path, bundled_model: Path) -> None:
    """README: a missing model path that is a slip of .gguf gets a hint naming the file meant, as one without .gguf
    does, not the folder's listing."""
    (tmp_path / "my-model.gguf").symlink_to(bundled_model)
    (tmp_path / "other.gguf").symlink_to(bundled_model)
    for typed in ("my-model.ggu", "my-model.guff", "my-model"):
        result = run_localgen("run", "-m", str(tmp_path / typed), "hi")
        assert result.returncode == 1
        assert result.stderr.decode().endswith("my-model.gguf?)\n"), typed  # the path may be cut in the middle
        assert "(hint: did you mean " in result.stderr.decode(), typed
