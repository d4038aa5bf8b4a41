"""The Hugging Face cache where the file system refuses a read: a header not read for the file system is no fault of
the Hub's, a cache or snapshots folder that may not be entered is said so, and only the cache counts as the cache."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from localgen.errors import GGUFError, GGUFUnreadableError
from localgen.hub_types import HubFile
from tests.hub_server import HubServer, run_cli


def _hub_file(path: Path, sha: str) -> HubFile:
    """The listing's entry of a file of acme/Tiny-GGUF at path."""
    return HubFile("acme/Tiny-GGUF", path.name, path.stat().st_size if path.exists() else 1, sha, "Q8_0", None, None)


def test_verified_download_gone_before_its_header_is_read_is_not_blamed_on_the_hub(tmp_path: Path) -> None:
    """A verified file gone before its header is read (a models rm beside the pull) is said not found, with no hint
    that the Hub's copy is damaged, where the hint said downloading it again would not help."""
    from localgen.hub_verify import _check_usable

    gone = tmp_path / "gone.gguf"
    with pytest.raises(GGUFUnreadableError, match="file not found") as refused:
        _check_usable(gone, _hub_file(gone, "0" * 64))
    assert "Hub's checksum" not in (refused.value.hint or "")


def test_verified_download_whose_header_read_fails_for_the_disk_stays_verified(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A verified file whose header read fails for the disk (EIO) stays verified, with no hint blaming the Hub's copy,
    where its verification was forgotten and the hint said the repository's own file was damaged."""
    import gguf_builders as gb

    from localgen import gguf_reader
    from localgen.hub_verify import _check_usable
    from localgen.verify import is_verified, record_verified, sha256_file

    path = gb.tiny_model(tmp_path / "m.gguf")
    sha = sha256_file(path)
    record_verified(path, sha)

    def disk_fails(*args: object, **kwargs: object) -> object:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(gguf_reader, "_parse", disk_fails)
    with pytest.raises(GGUFError, match="Input/output error") as refused:
        _check_usable(path, _hub_file(path, sha))
    assert "Hub's checksum" not in (refused.value.hint or "")
    assert is_verified(path, sha)


def _refused(filename: object, filename2: object = None) -> PermissionError:
    """A PermissionError (EACCES) on filename (and a rename's filename2)."""
    return PermissionError(errno.EACCES, "Permission denied", filename, None, filename2)


def test_refusal_of_a_folder_above_the_hub_cache_is_not_said_to_be_the_cache() -> None:
    """A refusal no module foresaw on a folder above the Hugging Face cache (LOCALGEN_HOME's, ~/.cache), or on an
    empty name, names that folder with the hint to check its permissions, where it was said to be the Hugging Face
    cache's and hinted HF_HUB_CACHE; the cache folder itself and what is in it still are the cache's."""
    from localgen.hub_settings import hub_cache_dir
    from localgen.refusals import permission_failure

    cache = hub_cache_dir()
    for name in (cache.parent, cache.parent.parent, ""):
        error = permission_failure(_refused(str(name)))
        assert error is not None and "Hugging Face cache" not in error.message, name
        assert "HF_HUB_CACHE" not in (error.hint or ""), name
    for name in (cache, cache / "models--acme--Tiny-GGUF" / "snapshots"):
        error = permission_failure(_refused(str(name)))
        assert error is not None and error.message.startswith("cannot use the Hugging Face cache ("), name


def test_download_refused_a_folder_above_the_hub_cache_it_creates_is_said_to_be_the_cache() -> None:
    """A download refused the folders above the Hugging Face cache it creates says it cannot write to the cache,
    hinting HF_HUB_CACHE, as before."""
    from localgen.hub_errors import map_hub_error
    from localgen.hub_settings import hub_cache_dir

    above = hub_cache_dir().parent
    error = map_hub_error(_refused(str(above)), repo="acme/Tiny-GGUF", filename="tiny.Q8_0.gguf")
    assert error.message.startswith("cannot write to the Hugging Face cache (")
    assert "HF_HUB_CACHE" in (error.hint or "")


def test_rename_into_the_hub_cache_refused_names_the_cache(tmp_path: Path) -> None:
    """A rename refused whose target alone is in the Hugging Face cache is said to be the cache's, naming the cache,
    where only the rename's first name was looked at and it was said as any other file."""
    from localgen.hub_settings import hub_cache_dir
    from localgen.refusals import permission_failure

    error = permission_failure(_refused(str(tmp_path / "part"), str(hub_cache_dir() / "models--acme--Tiny-GGUF")))
    assert error is not None and error.message.startswith("cannot use the Hugging Face cache (")


def _listings_where_the_hub_cache_cannot_be_reached(env: dict[str, str], walled: Path) -> list[str]:
    """The stderr of `models` and `models --all`, walled's permissions taken away as they run, each checked to list
    the bundled model, exit 0."""
    from tests.test_nonroot import run_unprivileged_in

    walled.chmod(0)
    try:
        done = [run_unprivileged_in(env, "models", *args) for args in ((), ("--all",))]
    finally:
        walled.chmod(0o755)
    for listing in done:
        assert listing.returncode == 0, listing.stderr
        assert "smollm2-135m" in listing.stdout
    return [listing.stderr for listing in done]


def _env_of_no_pull(tmp_path: Path, **hf: str) -> dict[str, str]:
    """The environment of a user who never pulled: HOME and LOCALGEN_HOME under tmp_path, offline, no HF_* setting
    but those given."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    return {**kept, "HOME": str(tmp_path / "home"), "LOCALGEN_HOME": str(tmp_path / "lg"), "LOCALGEN_OFFLINE": "1",
            **hf}


@pytest.mark.parametrize("where", ["home_cache", "hf_hub_cache_parent"])
def test_listing_where_the_hub_cache_cannot_be_reached_lists_the_rest_and_warns(tmp_path: Path, where: str) -> None:
    """A Hugging Face cache whose place may not be entered (~/.cache of mode 0, HF_HUB_CACHE in a folder of mode 0), no
    pull ever made: `models` and `models --all` list the bundled model and warn in one line that the cache cannot be
    read, naming the folder that refuses, with the hint to set HF_HUB_CACHE, exit 0, where both failed, exit 1."""
    walled = tmp_path / "home" / ".cache" if where == "home_cache" else tmp_path / "walled"
    walled.mkdir(parents=True)
    env = _env_of_no_pull(tmp_path, **({} if where == "home_cache" else {"HF_HUB_CACHE": str(walled / "hf" / "hub")}))
    for stderr in _listings_where_the_hub_cache_cannot_be_reached(env, walled):
        assert stderr == f"localgen: warning: cannot read the Hugging Face cache ({walled}): Permission denied; the " \
            "models there are not listed (hint: set HF_HUB_CACHE (or HF_HOME) to a folder you can write to, or fix " \
            "its permissions)\n"


def test_snapshots_folder_that_cannot_be_entered_is_said_so_not_that_the_model_is_not_there(
        hub: tuple[HubServer, dict[str, str]]) -> None:
    """A pulled repo whose snapshots folder may not be entered: models show and models rm say the Hugging Face cache
    cannot be used, naming that folder, where they said the model was not downloaded (hinting a pull) or not in the
    cache; models and models --all warn that it cannot be read and list the rest, exit 0, where they dropped the
    model unsaid."""
    from tests.test_nonroot import _hub_cache_not_to_be_entered, run_unprivileged_in

    env, repo_folder = _hub_cache_not_to_be_entered(hub)
    snapshots = repo_folder / "snapshots"
    snapshots.chmod(0)
    try:
        failed = [run_unprivileged_in(env, "models", *args) for args in (("show", "acme/Tiny-GGUF:Q8_0"),
                                                                          ("rm", "--yes", "acme/Tiny-GGUF:Q8_0"))]
        listed = [run_unprivileged_in(env, "models", *args) for args in ((), ("--all",))]
    finally:
        snapshots.chmod(0o755)
    for command in failed:
        assert command.returncode == 1, command.args
        assert command.stderr == f"localgen: error: cannot use the Hugging Face cache ({snapshots}): Permission " \
            "denied (hint: set HF_HUB_CACHE (or HF_HOME) to a folder you can write to, or fix its permissions)\n"
    for listing in listed:
        assert listing.returncode == 0, listing.stderr
        assert "smollm2-135m" in listing.stdout
        assert listing.stderr == f"localgen: warning: cannot read the Hugging Face cache ({snapshots}): Permission " \
            "denied; the models there are not listed (hint: set HF_HUB_CACHE (or HF_HOME) to a folder you can write " \
            "to, or fix its permissions)\n"
    assert run_cli(env, "models", "show", "acme/Tiny-GGUF:Q8_0").returncode == 0, "nothing removed"
