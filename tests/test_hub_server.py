"""The loopback Hub's fixtures leave the process as they found it: huggingface_hub's constants (and the copies its
modules take of them as they are imported) point back at its own address and caches once a test is over."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from hub_server import _CLEARED, REPO_ROOT, HubEnv, file_sha256, run_python

AFTER_A_TEST = """
import hashlib
import json
from pathlib import Path

import pytest
from hub_server import HubServer, point_at

with HubServer() as server, pytest.MonkeyPatch.context() as patch:  # as the hubenv fixture, the first Hub test
    point_at(server, Path({tmp!r}), patch)
    from huggingface_hub import constants
    assert constants.ENDPOINT == server.url
from huggingface_hub import constants
from huggingface_hub.utils import _cache_manager
print(json.dumps([constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE, constants.HF_HUB_CACHE,
                  _cache_manager.HF_HUB_CACHE]))
"""


def test_the_first_hub_test_of_a_process_leaves_huggingface_hub_pointing_at_its_own_hub(tmp_path: Path) -> None:
    """huggingface_hub was first imported under the loopback's environment, so undoing the test's patches restored
    the loopback's address and caches: every later test of the worker talked to a server that was gone."""
    cache = tmp_path / "own" / "hub"
    env = {key: value for key, value in os.environ.items() if key not in _CLEARED and not key.startswith("HF_")}
    env |= {"HF_HUB_CACHE": str(cache), "PYTHONPATH": f"{REPO_ROOT / 'tests'}{os.pathsep}{REPO_ROOT}"}
    result = run_python(AFTER_A_TEST.format(tmp=str(tmp_path / "test")), env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["https://huggingface.co",
                                         "https://huggingface.co/{repo_id}/resolve/{revision}/{filename}",
                                         str(cache), str(cache)]


def test_the_pause_before_a_download_resumes_is_skipped_and_the_rest_of_its_module_s_time_is_time_s(
        hubenv: HubEnv) -> None:
    """huggingface_hub's file_download pauses a second before it resumes a dropped download, which the Hub tests skip:
    only that sleep is changed, so a version of it that asks time for anything else gets time's own answer."""
    from huggingface_hub import file_download

    kept = {name: value for name, value in vars(time).items() if name != "sleep"}
    assert {name: getattr(file_download.time, name, None) for name in kept} == kept
    assert file_download.time.sleep is not time.sleep


def test_a_file_s_kept_sha256_is_its_own_again_once_it_is_rewritten_at_the_same_size(tmp_path: Path) -> None:
    """The loopback Hub keeps a served file's sha256 for the process (the bundled model's, hashed by many tests), and
    hashes it again once the file changes, even to bytes of the same size."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"a" * 1000)
    first = file_sha256(path)
    assert file_sha256(path) == first == hashlib.sha256(b"a" * 1000).hexdigest()
    path.write_bytes(b"b" * 1000)
    assert file_sha256(path) == hashlib.sha256(b"b" * 1000).hexdigest()
