"""A split model's prompt cache entries go with any of its shards' data: one shard replaced by a pull, or removed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO_ROOT

REPLACE_SHARD_2 = textwrap.dedent('''
    import sys
    from pathlib import Path
    from localgen.model_removal import remove_replaced
    from localgen.promptcache import PromptCache, cache_dir, list_entries
    from localgen.verify import file_identity_key
    repo = Path(sys.argv[1]) / "models--o--r"
    (repo / "blobs").mkdir(parents=True)
    for blob in ("b1", "b2old", "b2new"):
        (repo / "blobs" / blob).write_bytes(blob.encode() * 100)
    names = ["m-Q4_0-00001-of-00002.gguf", "m-Q4_0-00002-of-00002.gguf"]
    for snap, blobs in (("old", ("b1", "b2old")), ("new", ("b1", "b2new"))):
        (repo / "snapshots" / snap).mkdir(parents=True)
        for name, blob in zip(names, blobs):
            (repo / "snapshots" / snap / name).symlink_to(f"../../blobs/{blob}")
    old = [repo / "snapshots/old" / n for n in names]
    new = [repo / "snapshots/new" / n for n in names]
    keys = "; ".join(file_identity_key(p) for p in old)  # as prompt_cache_for writes an identity
    cache = PromptCache(cache_dir(), f"{keys}; llama.cpp 1; build x; kv f16", max_bytes=10**9, min_new_tokens=1)
    cache.store(list(range(300)), b"s" * 4096)
    before = len(list_entries(cache_dir()))
    freed, states = remove_replaced(old, new)
    print(before, freed, (repo / "blobs/b2old").exists(), len(list_entries(cache_dir())), len(states))
''')


def test_a_pull_replacing_only_a_later_shard_deletes_the_old_copy_s_prompt_cache_entries(tmp_path: Path) -> None:
    """A pull whose newer commit changed only shard 2 of a split model deletes the old shard 2's data and, with it,
    the entries of the old copy, which no run can restore again: they were matched by the first shard's key alone,
    which the new copy shares, and stayed until evicted."""
    env = {**os.environ, "LOCALGEN_HOME": str(tmp_path / "home"), "HF_HUB_CACHE": str(tmp_path / "hub"),
           "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", REPLACE_SHARD_2, str(tmp_path / "hub")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    before, freed, old_shard_there, after, deleted = done.stdout.split()
    assert (before, freed, old_shard_there) == ("1", "500", "False"), done.stdout
    assert (after, deleted) == ("0", "1"), done.stdout
