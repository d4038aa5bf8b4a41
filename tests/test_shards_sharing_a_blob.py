"""A split model two of whose shards have the same bytes (one blob): the pull takes that blob's lock once, and says
what is wrong with the shards."""

from __future__ import annotations

import threading

from hub_server import HubEnv, make_gguf_bytes

from localgen import hub
from localgen.errors import GGUFError

REPO = "org/same-GGUF"
S1, S2 = "same-Q4_K_M-00001-of-00002.gguf", "same-Q4_K_M-00002-of-00002.gguf"
PULL_S = 20  # a pull that has not ended by then waits on a lock of its own


def test_a_split_model_whose_shards_share_a_blob_is_refused_for_its_shard_numbers(hubenv: HubEnv) -> None:
    """The pull waited for good on the lock of the blob it held already, for the second shard."""
    hubenv.server.add_repo(REPO, {S1: make_gguf_bytes("a", shard=(1, 2)), S2: make_gguf_bytes("a", shard=(1, 2))})
    ended: list[BaseException] = []

    def pull() -> None:
        try:
            hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
        except BaseException as exc:  # what the pull said, for the test to read
            ended.append(exc)

    thread = threading.Thread(target=pull, daemon=True)  # daemon: a pull that hangs does not keep pytest from ending
    thread.start()
    thread.join(PULL_S)
    assert not thread.is_alive(), f"the pull was still waiting after {PULL_S} s"
    assert len(ended) == 1 and isinstance(ended[0], GGUFError), ended
    assert ended[0].message == f"{S2}: metadata says shard 1 of 2, expected 2 of 2"
