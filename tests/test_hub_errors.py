"""hub_errors.py: a full disk, a disk quota and a file too large for the file system get their own messages; offline
and network hints name what is true for the command and for where offline mode came from."""

from __future__ import annotations

import errno
import json
import os
import pty
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hub_server import (
    HubEnv,
    HubServer,
    child_env,
    make_gguf_bytes,
    run_cli,
    run_python,
)

from localgen.config import offline_given
from localgen.errors import HubError, ModelNotFoundError
from localgen.hub_errors import map_hub_error, offline_error
from localgen.offline_words import offline_hint
from tests.conftest import REPO_ROOT, run_localgen_process


def _os_error(code: int) -> OSError:
    """An OSError as a failed write raises it."""
    return OSError(code, os.strerror(code))


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT], ids=["ENOSPC", "EDQUOT"])
def test_a_full_disk_or_quota_says_to_free_space(code: int) -> None:
    error = map_hub_error(_os_error(code), repo="org/r", filename="m.gguf")
    assert isinstance(error, HubError)
    assert error.message.startswith("no space left on the disk while downloading org/r/m.gguf")
    assert os.strerror(code) in error.message
    assert "free some space in" in (error.hint or "")


def test_a_full_disk_is_found_behind_the_error_that_wraps_it() -> None:
    try:
        try:
            raise _os_error(errno.EDQUOT)
        except OSError as exc:
            raise RuntimeError("download failed") from exc
    except RuntimeError as exc:
        error = map_hub_error(exc, repo="org/r", filename="m.gguf")
    assert error.message.startswith("no space left on the disk")


def test_a_server_error_says_what_still_works_without_brackets_in_brackets() -> None:
    unavailable = Exception("Service Unavailable")
    unavailable.response = SimpleNamespace(status_code=503)  # type: ignore[attr-defined]  # as HTTP errors carry it
    error = map_hub_error(unavailable, repo="org/r", filename="m.gguf")
    assert error.message == "the Hugging Face Hub returned a server error (HTTP 503) for org/r/m.gguf"
    assert error.hint == ("the Hub may be down: try again later; models already downloaded work without the network: "
                          "`localgen models list` shows them")


def test_other_os_errors_are_not_called_a_full_disk() -> None:
    error = map_hub_error(_os_error(errno.EACCES), repo="org/r", filename="m.gguf")
    assert "no space" not in error.message and "Permission denied" in error.message


EFBIG_CODE = """
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, resource.RLIM_INFINITY))
from localgen import hub
from localgen.errors import LocalgenError
try:
    hub.download_model("org/big-GGUF", quant=None, filename=None, quiet=True)
except LocalgenError as exc:
    print(json.dumps({"error": exc.message, "hint": exc.hint}))
    sys.exit(1)
"""


def test_a_file_too_large_for_the_file_system_names_the_limit(loopback_hub: HubServer, tmp_path: Path) -> None:
    # A file-size limit of 200 kB makes the real download's writes fail with EFBIG, as on a FAT32 disk.
    loopback_hub.add_repo("org/big-GGUF", {"big-Q4_K_M.gguf": make_gguf_bytes("big", 400_000)})
    result = run_python(EFBIG_CODE, child_env(loopback_hub, tmp_path))
    assert result.returncode == 1, result.stderr
    out = json.loads(result.stdout)
    assert out["error"].startswith("org/big-GGUF/big-Q4_K_M.gguf is too large for the file system of ")
    assert "HF_HUB_CACHE" in out["hint"]
    assert not list((tmp_path / "hf").rglob("*.gguf"))


def _settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    """Fresh settings read from an environment where only these offline variables are set."""
    from localgen import config

    for name in config.OFFLINE_ENVS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(config, "_settings", None)


def test_the_offline_hint_names_the_flag_when_the_flag_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _settings(monkeypatch)
    with offline_given(True):
        hint = offline_hint("qwen2.5-1.5b")
    assert hint == "drop --offline, then run `localgen pull qwen2.5-1.5b`"


@pytest.mark.parametrize("names", [("HF_HUB_OFFLINE",), ("LOCALGEN_OFFLINE",), ("HF_HUB_OFFLINE", "LOCALGEN_OFFLINE"),
                                   ("TRANSFORMERS_OFFLINE",), ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")])
def test_the_offline_hint_names_the_variables_the_environment_set(monkeypatch: pytest.MonkeyPatch,
                                                                 names: tuple[str, ...]) -> None:
    _settings(monkeypatch, **dict.fromkeys(names, "1"))
    hint = offline_hint("qwen2.5-1.5b")
    assert f"offline mode comes from {' and '.join(names)} in the environment: unset" in hint
    assert "--offline" not in hint and hint.endswith("then run `localgen pull qwen2.5-1.5b`")


OFFLINE_STATE_CODE = """
import json, os
from huggingface_hub import constants
from localgen.config import settings
print(json.dumps([constants.HF_HUB_OFFLINE, settings().offline, settings().offline_envs]))
"""


@pytest.mark.parametrize(("hf_hub_offline", "transformers_offline"),
                         [(None, "1"), ("", "1"), ("0", "1"), ("1", "1"), ("1", None), (None, "0"), ("no", "yes")])
def test_offline_mode_is_read_from_the_environment_as_huggingface_hub_reads_it(
        hf_hub_offline: str | None, transformers_offline: str | None, loopback_hub: HubServer, tmp_path: Path) -> None:
    """TRANSFORMERS_OFFLINE turns the network off where HF_HUB_OFFLINE is unset or empty, as huggingface_hub reads it
    (HF_HUB_OFFLINE=0 keeps it on), and is named beside HF_HUB_OFFLINE=1, which leaves it in force once unset; where
    localgen read HF_HUB_OFFLINE alone, huggingface_hub refused its requests and localgen named the wrong variables."""
    env = child_env(loopback_hub, tmp_path)
    for name, value in (("HF_HUB_OFFLINE", hf_hub_offline), ("TRANSFORMERS_OFFLINE", transformers_offline)):
        if value is not None:
            env[name] = value
    result = run_python(OFFLINE_STATE_CODE, env)
    assert result.returncode == 0, result.stderr
    theirs, ours, names = json.loads(result.stdout)
    assert ours == theirs
    assert names == [name for name, value in (("HF_HUB_OFFLINE", hf_hub_offline),
                                              ("TRANSFORMERS_OFFLINE", transformers_offline))
                     if ours and value in ("1", "yes")]


def test_the_offline_hint_names_flag_and_variable_when_both_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    _settings(monkeypatch, LOCALGEN_OFFLINE="yes")
    with offline_given(True):
        hint = offline_hint("org/r:Q4_0")
    assert hint.startswith("drop --offline and unset LOCALGEN_OFFLINE (set in the environment)")
    assert "HF_HUB_OFFLINE" not in hint


def test_an_offline_error_from_the_environment_does_not_mention_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    _settings(monkeypatch, HF_HUB_OFFLINE="1")
    error = offline_error("org/r", "Q8_0", None, None)
    assert "HF_HUB_OFFLINE in the environment" in (error.hint or "") and "--offline" not in (error.hint or "")
    assert "`localgen pull org/r:Q8_0`" in (error.hint or "")


@pytest.mark.parametrize("exc", [ConnectionError("refused"), TimeoutError("slow")], ids=["refused", "timeout"])
def test_network_hints_are_true_for_every_command(exc: Exception) -> None:
    hint = map_hub_error(exc, repo="org/r").hint or ""
    assert "check your network connection, HF_ENDPOINT and proxy settings; " in hint and "(`" not in hint
    assert "models already downloaded work without the network" in hint and "run --offline" not in hint


def test_a_connection_dropped_before_any_download_says_what_it_was_reading() -> None:
    dropped = type("RemoteProtocolError", (Exception,), {})("peer closed connection")
    assert map_hub_error(dropped, repo="org/r").message == \
        "the connection to the Hugging Face Hub dropped while reading the file list of org/r"
    assert map_hub_error(dropped, repo="org/r", filename="m.gguf").message == \
        "the connection to the Hugging Face Hub dropped while downloading org/r/m.gguf"


def test_a_cache_folder_that_cannot_be_written_says_where_and_what_to_set() -> None:
    from localgen.hub_cache import hub_cache_dir

    blob = hub_cache_dir() / "models--org--r" / "blobs"
    error = map_hub_error(PermissionError(errno.EACCES, "Permission denied", str(blob)), repo="org/r",
                          filename="m.gguf")
    assert error.message == f"cannot write to the Hugging Face cache ({blob}): Permission denied"
    assert (error.hint or "").startswith("set HF_HUB_CACHE (or HF_HOME) to a folder you can write to")
    elsewhere = map_hub_error(PermissionError(errno.EACCES, "Permission denied", "/etc/hf-token"), repo="org/r")
    assert "Hugging Face cache" not in elsewhere.message and "Permission denied" in elsewhere.message


def _cli_error(env: dict[str, str], *args: str) -> str:
    """The stderr of a localgen command that fails with exit code 1."""
    result = run_cli(env, *args)
    assert result.returncode == 1, result.stderr
    return result.stderr


def test_pull_offline_from_the_environment_says_so_and_to_pull_again(loopback_hub: HubServer,
                                                                     tmp_path: Path) -> None:
    err = _cli_error(child_env(loopback_hub, tmp_path, HF_HUB_OFFLINE="1"), "pull", "qwen2.5-1.5b")
    assert "offline mode comes from HF_HUB_OFFLINE in the environment: unset it, then run the command again" in err
    assert "--offline" not in err and "LOCALGEN_OFFLINE" not in err
    assert loopback_hub.requests == []


def test_pull_offline_from_transformers_offline_names_it_and_asks_the_hub_nothing(loopback_hub: HubServer,
                                                                                 tmp_path: Path) -> None:
    loopback_hub.add_repo("org/m-GGUF", {"m-Q8_0.gguf": make_gguf_bytes("q8")})
    err = _cli_error(child_env(loopback_hub, tmp_path, TRANSFORMERS_OFFLINE="1"), "pull", "org/m-GGUF:Q8_0")
    assert err == ("localgen: error: model 'org/m-GGUF:Q8_0' is not downloaded and localgen is offline (hint: offline "
                   "mode comes from TRANSFORMERS_OFFLINE in the environment: unset it, then run the command again)\n")
    assert loopback_hub.requests == []


def test_run_offline_from_the_environment_names_the_variable_and_pull(loopback_hub: HubServer,
                                                                      tmp_path: Path) -> None:
    err = _cli_error(child_env(loopback_hub, tmp_path, LOCALGEN_OFFLINE="1"), "run", "-m", "qwen2.5-1.5b", "hi")
    assert "offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run " \
           "`localgen pull qwen2.5-1.5b`" in err
    assert "--offline" not in err and "HF_HUB_OFFLINE" not in err


def test_fit_with_the_flag_says_to_drop_it_and_fit_again(loopback_hub: HubServer, tmp_path: Path) -> None:
    err = _cli_error(child_env(loopback_hub, tmp_path), "fit", "--offline", "qwen2.5-1.5b")
    assert "(hint: drop --offline, then run the command again)" in err


@pytest.mark.parametrize("args", [("pull", "org/nope-GGUF"), ("fit", "org/nope-GGUF"),
                                  ("run", "-m", "org/nope-GGUF", "hi"), ("chat", "-m", "org/nope-GGUF")],
                         ids=["pull", "fit", "run", "chat"])
def test_an_unreachable_hub_gets_a_hint_true_for_the_command(loopback_hub: HubServer, tmp_path: Path,
                                                             args: tuple[str, ...]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    env = child_env(loopback_hub, tmp_path, HF_ENDPOINT=closed)
    err = _on_a_terminal(env, *args) if args[0] == "chat" else _cli_error(env, *args)
    assert f"cannot reach the Hugging Face Hub ({closed})" in err
    assert "run --offline" not in err and "models already downloaded work without the network" in err


def _on_a_terminal(env: dict[str, str], *args: str) -> str:
    """The stderr of a localgen command that fails with exit code 1, its stdin and stdout a terminal (chat needs
    both)."""
    main, secondary = pty.openpty()
    try:
        result = run_localgen_process([sys.executable, "-m", "localgen", *args], env=env, stdout=secondary,
                                      stderr=subprocess.PIPE, text=True, timeout=120, cwd=REPO_ROOT, stdin=secondary)
    finally:
        os.close(secondary)
        os.close(main)
    assert result.returncode == 1, result.stderr
    return result.stderr


def test_fit_of_a_local_model_with_the_hub_unreachable_says_so_once(loopback_hub: HubServer, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    result = run_localgen_process([sys.executable, "-m", "localgen", "fit", "smollm2-135m"], capture_output=True,
                                  text=True, env=child_env(loopback_hub, tmp_path, HF_ENDPOINT=closed), timeout=120,
                                  cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    note = next(line for line in result.stderr.splitlines() if "local copy" in line)
    assert "showing the local copy only: cannot reach the Hugging Face Hub" in note and "--offline" in note
    assert note.count("SmolLM2") <= 1, note


@pytest.mark.parametrize("command", [("pull",), ("fit",)])
def test_a_listing_that_is_not_the_hub_s_says_something_else_answered(loopback_hub: HubServer, tmp_path: Path,
                                                                      command: tuple[str, ...]) -> None:
    loopback_hub.add_repo("org/page-GGUF", {"m-Q8_0.gguf": make_gguf_bytes("page")})
    loopback_hub.listing_page = b"<html><body>Please log in to the network</body></html>"
    try:
        err = _cli_error(child_env(loopback_hub, tmp_path), *command, "org/page-GGUF")
    finally:
        loopback_hub.listing_page = None
    assert f"error: the reply from {loopback_hub.url} for org/page-GGUF is not the Hugging Face Hub's" in err, err
    assert "(hint: a proxy or a network login page may be answering instead" in err
    assert "JSONDecodeError" not in err


@pytest.mark.parametrize(("endpoint", "error"), [
    ("", "HF_ENDPOINT is set but empty, so localgen has no address for the Hugging Face Hub (hint: unset HF_ENDPOINT "
         "for huggingface.co, or set it to your mirror's https:// address)"),
    ("hf-mirror.example", "HF_ENDPOINT 'hf-mirror.example' is not a web address: it needs http:// or https:// (hint: "
                          "set HF_ENDPOINT=https://hf-mirror.example, or unset it for huggingface.co)"),
    ("ftp://hf-mirror.example", "HF_ENDPOINT 'ftp://hf-mirror.example' is not a web address: it needs http:// or "
                                "https:// (hint: set HF_ENDPOINT=https://hf-mirror.example, or unset it for "
                                "huggingface.co)"),  # another scheme's address: its scheme is not kept
    *[(endpoint, f"HF_ENDPOINT {shown!r} {problem} (hint: set HF_ENDPOINT to your mirror's address (https://HOST or "
                 "https://HOST:PORT), or unset it for huggingface.co)") for endpoint, shown, problem in [
        ("http://127.0.0.1:abc", "http://127.0.0.1:abc", "has a port that is not a number from 1 to 65535"),
        ("http://127.0.0.1:99999", "http://127.0.0.1:99999", "has a port that is not a number from 1 to 65535"),
        ("http://127.0.0.1:0", "http://127.0.0.1:0", "has a port that is not a number from 1 to 65535"),
        ("http://[::1", "http://[::1", "has a malformed host"),  # huggingface_hub's settings fail to import
        ("http://", "http:", "has no host name"),  # huggingface_hub takes the slashes off its end
        ("https://hf mirror.example", "https://hf mirror.example", "has a space in it")]]])
def test_an_hf_endpoint_that_is_no_web_address_is_said_to_be_so(loopback_hub: HubServer, tmp_path: Path,
                                                                endpoint: str, error: str) -> None:
    env = child_env(loopback_hub, tmp_path, HF_ENDPOINT=endpoint)
    for args in (("pull", "org/nope-GGUF"), ("run", "-m", "org/nope-GGUF:Q4_0", "hi")):
        assert _cli_error(env, *args).strip().splitlines()[-1] == f"localgen: error: {error}"
    assert loopback_hub.requests == []


@pytest.mark.parametrize("endpoint_set", [False, True])
def test_an_hf_setting_huggingface_hub_cannot_read_is_not_blamed_on_hf_endpoint(loopback_hub: HubServer,
                                                                                tmp_path: Path,
                                                                                endpoint_set: bool) -> None:
    env = child_env(loopback_hub, tmp_path, HF_HUB_ETAG_TIMEOUT="abc", LOCALGEN_OFFLINE="1")
    if not endpoint_set:
        del env["HF_ENDPOINT"]
    assert _cli_error(env, "models", "list").strip().splitlines()[-1] == (
        "localgen: error: huggingface_hub could not read its settings from the environment: invalid literal for "
        "int() with base 10: 'abc' (hint: check the HF_* environment variables (`env | grep ^HF_` lists them))")


@pytest.mark.parametrize("spaced", [" {url}/ ", "{url} ", " {url}"])
def test_an_hf_endpoint_with_spaces_around_it_is_said_to_have_them(loopback_hub: HubServer, tmp_path: Path,
                                                                   spaced: str) -> None:
    endpoint = spaced.format(url=loopback_hub.url)
    env = child_env(loopback_hub, tmp_path, HF_ENDPOINT=endpoint)
    error = (f"localgen: error: HF_ENDPOINT {endpoint!r} has spaces around the address, and huggingface_hub keeps "
             f"them in every Hub address (hint: set HF_ENDPOINT={endpoint.strip()} (without the spaces), or unset it "
             "for huggingface.co)")
    for args in (("pull", "org/nope-GGUF"), ("run", "-m", f"{loopback_hub.url}/org/nope-GGUF", "hi"),
                 ("fit", "org/nope-GGUF:Q4_0")):  # the mirror's own address is taken as one, spaces or none
        assert _cli_error(env, *args).strip().splitlines()[-1] == error, args


def test_models_show_of_a_quant_typed_after_a_registry_name_checks_the_repo_has_it(loopback_hub: HubServer,
                                                                                   tmp_path: Path) -> None:
    """models show tiny:q8, the repo never listed, said `localgen pull tiny:q8` downloads it; now the Hub is asked
    (offline: said not known), a quant it lacks is refused with the quants meant, as pull's, and one it has shown."""
    loopback_hub.add_repo("org/tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8", 2_000),
                                            "tiny-Q4_K_M.gguf": make_gguf_bytes("q4", 2_000)})
    env = child_env(loopback_hub, tmp_path)
    config = Path(env["LOCALGEN_HOME"]) / "config"
    config.mkdir(parents=True)
    (config / "models.toml").write_text('[models.tiny]\nrepo = "org/tiny-GGUF"\nquant = "Q4_K_M"\n')
    offline = {**env, "LOCALGEN_OFFLINE": "1"}

    def downloaded(result: subprocess.CompletedProcess[str]) -> str:
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()[-1].split(None, 1)[1]

    assert downloaded(run_cli(offline, "models", "show", "tiny:q8")) == (
        "no (localgen has never listed org/tiny-GGUF, so whether it has a Q8 file is not known; offline mode comes "
        "from LOCALGEN_OFFLINE in the environment: unset it, then run `localgen pull tiny:q8`, which downloads it if "
        "it has)")
    unset = "offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run "
    assert downloaded(run_cli(offline, "models", "show", "tiny")) == (
        f"no ({unset}`localgen pull tiny`, which downloads it)")
    assert loopback_hub.requests == [], "the entry's own quant is taken as the entry gives it"
    lacking = ("localgen: error: model 'tiny:q8' is not downloaded, and org/tiny-GGUF {} (hint: did you mean "
               "tiny:Q8_0? quants in this repo: Q4_K_M, Q8_0; choose one with tiny:QUANT")
    online = run_cli(env, "models", "show", "tiny:q8")
    assert online.returncode == 1 and online.stderr == lacking.format("has no Q8 file") + ")\n", online.stderr
    assert loopback_hub.count("GET", "/api/models/") == 1
    listed = run_cli(offline, "models", "show", "tiny:q8")  # as localgen last listed the repo
    assert listed.returncode == 1 and listed.stderr.startswith(lacking.format(
        "had no Q8 file when localgen last listed it")), listed.stderr
    assert downloaded(run_cli(offline, "models", "show", "tiny:Q8_0")) == (
        f"no ({unset}`localgen pull tiny:Q8_0`, which downloads it)")
    assert loopback_hub.count("GET", "/resolve/") == 0


def test_a_deprecated_hf_setting_a_huggingface_cli_user_exported_prints_no_python_warning(
        loopback_hub: HubServer, tmp_path: Path) -> None:
    """HF_HUB_ENABLE_HF_TRANSFER=1 made huggingface_hub print a FutureWarning (its file, line and `warnings.warn(`) at
    every command, a run of the bundled model too; localgen downloads over HTTP itself, so the setting is nothing to
    it, and now it says nothing of it."""
    loopback_hub.add_repo("org/tiny-GGUF", {"tiny-Q8_0.gguf": make_gguf_bytes("q8", 2_000)})
    env = child_env(loopback_hub, tmp_path, HF_HUB_ENABLE_HF_TRANSFER="1")
    for args in (("pull", "org/tiny-GGUF:Q8_0"), ("models", "list")):  # a fresh interpreter: huggingface_hub unread
        done = run_localgen_process([sys.executable, "-m", "localgen", *args], env=env, capture_output=True, text=True,
                                    cwd=REPO_ROOT, timeout=120)
        assert done.returncode == 0 and "Warning" not in done.stderr and "warnings.warn" not in done.stderr, \
            done.stderr


def _offline_by_its_own_setting(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, *, downloaded: bool) -> None:
    """A repo of two quants, its Q4_K_M downloaded where asked (else never listed); then huggingface_hub offline by a
    setting of its own, which localgen does not read (its requests refused with OfflineModeIsEnabled), localgen
    online."""
    from huggingface_hub import constants

    from localgen.resolve import resolve_model

    hubenv.server.add_repo("org/m-GGUF", {"m-Q4_K_M.gguf": make_gguf_bytes("a"), "m-Q8_0.gguf": make_gguf_bytes("b")})
    if downloaded:
        resolve_model("org/m-GGUF:Q4_K_M")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hubenv.server.requests.clear()


def test_an_offline_hub_keeps_the_quant_typed_in_the_pull_it_hints(hubenv: HubEnv,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`models show ORG/REPO:QUANT` of a quant not downloaded, the Hub's file list refused offline: the pull hinted
    is of the quant typed, where it was of the repo alone (`localgen pull org/m-GGUF`, which takes another quant)."""
    from localgen.hub_lack import refuse_lacking

    _offline_by_its_own_setting(hubenv, monkeypatch, downloaded=False)
    with pytest.raises(ModelNotFoundError) as info:
        refuse_lacking("hf.co/org/m-GGUF:q8_0")
    assert (info.value.hint or "").endswith(", then run `localgen pull hf.co/org/m-GGUF:q8_0`")
    assert hubenv.server.requests == []


def test_an_offline_hub_is_said_offline_of_a_downloaded_model_not_missing_from_the_cache(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pull` of a downloaded model says it was not checked as offline, as LOCALGEN_OFFLINE=1 has it say, where it said
    the model was not in the local cache; an offline error says so of a model that is, and is not, downloaded."""
    from localgen.hub_check import HubCheck, HubOutcome
    from localgen.hub_refresh import refreshed
    from localgen.resolve import resolve_model

    _offline_by_its_own_setting(hubenv, monkeypatch, downloaded=True)
    assert refreshed(resolve_model("org/m-GGUF:Q4_K_M")).hub_check == HubCheck(HubOutcome.OFFLINE)
    assert offline_error("org/m-GGUF", "Q4_K_M", None, None).message == (
        "the Hub cannot be asked about org/m-GGUF:Q4_K_M, downloaded here, as the network is off (offline mode)")
    assert offline_error("org/m-GGUF", "Q8_0", None, None).message == (
        "org/m-GGUF:Q8_0 is not in the local cache and the network is off (offline mode)")
    assert hubenv.server.requests == []
