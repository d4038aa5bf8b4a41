"""A mistake in localgen's own download code (a TypeError, an AttributeError) is reported as the internal error it
is, where it was said to be a failed download; a reply from the server that huggingface_hub cannot read (JSON of
another shape than the Hub's, on which it raises KeyError or TypeError itself) stays a Hub error. Against the loopback
Hub, with the real huggingface_hub client."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from hub_server import HubEnv, make_gguf_bytes

from localgen import hub_listing, hub_range
from localgen.cli import app
from localgen.cli_exit import run_app
from localgen.download_log import LineDisplay
from localgen.hub_errors import map_hub_error

REPO = "org/mistake-GGUF"
FILE = "m-Q8_0.gguf"


def _serve(hubenv: HubEnv) -> None:
    hubenv.server.add_repo(REPO, {FILE: make_gguf_bytes("mistake")})


def _pulled(capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """pull's exit code and what it wrote to stderr."""
    capfd.readouterr()
    code = run_app(app, ["pull", REPO])
    return code, capfd.readouterr().err


@pytest.mark.parametrize(("module", "name"), [
    (LineDisplay, "_maybe_say"),  # in the display's advance, called back by huggingface_hub as bytes arrive
    (hub_listing, "request_timeout"),  # as the repo's files are listed
], ids=["download", "listing"])
def test_a_mistake_in_localgen_s_download_code_is_an_internal_error(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch,
                                                                    capfd: pytest.CaptureFixture[str], module: object,
                                                                    name: str) -> None:
    """pull said: error: download of org/mistake-GGUF/m-Q8_0.gguf failed: TypeError: 'NoneType' object is not
    callable, a network failure to work around, of a bug to report."""
    _serve(hubenv)
    monkeypatch.setattr(module, name, None)  # each call of it: TypeError, raised in localgen's own code
    code, err = _pulled(capfd)
    assert code == 1 and "internal error: TypeError: 'NoneType' object is not callable" in err, err
    assert "LOCALGEN_DEBUG=1" in err and "failed" not in err, err


def _with_bogus_keyword(function: Callable[..., object]) -> Callable[..., object]:
    """The function, given a keyword it does not take on every call (as a keyword renamed in a new huggingface_hub
    would be), with no frame of Python code of its own between localgen's call and the function's decorators."""
    return functools.partial(function, bogus=1)


def test_a_download_localgen_calls_wrongly_is_an_internal_error(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch,
                                                                capfd: pytest.CaptureFixture[str]) -> None:
    """pull said: error: download of org/mistake-GGUF/m-Q8_0.gguf failed: TypeError: hf_hub_download() got an
    unexpected keyword argument 'bogus', raised in huggingface_hub's decorator that passes the arguments on."""
    import huggingface_hub
    from huggingface_hub import constants

    _serve(hubenv)
    monkeypatch.setattr(constants, "MAX_HTTP_DOWNLOAD_SIZE", 1)  # huggingface_hub downloads the file, not localgen
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _with_bogus_keyword(huggingface_hub.hf_hub_download))
    code, err = _pulled(capfd)
    assert code == 1 and "internal error: TypeError: hf_hub_download() got an unexpected keyword argument 'bogus'" \
        in err and "failed" not in err, err


def test_a_listing_localgen_asks_for_wrongly_is_an_internal_error(hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch,
                                                                  capfd: pytest.CaptureFixture[str]) -> None:
    """pull said: error: download of org/mistake-GGUF failed: TypeError: HfApi.model_info() got an unexpected keyword
    argument 'bogus'."""
    import huggingface_hub

    api = huggingface_hub.HfApi()
    _serve(hubenv)
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: SimpleNamespace(
        model_info=_with_bogus_keyword(api.model_info)))
    code, err = _pulled(capfd)
    assert code == 1 and "internal error: TypeError: HfApi.model_info() got an unexpected keyword argument 'bogus'" \
        in err and "failed" not in err, err


def test_a_mistake_in_reading_a_file_s_first_bytes_is_raised_as_it_is(hubenv: HubEnv,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """read_header_bytes turned it into HubError('download of ... failed: TypeError: ...')."""
    _serve(hubenv)
    monkeypatch.setattr(hub_range, "_sha256_of", None)
    with pytest.raises(TypeError, match="'NoneType' object is not callable"):
        hub_range.read_header_bytes(REPO, FILE, 16)


@pytest.mark.parametrize(("reply", "raised"), [
    (b"{}", "KeyError: 'id'"),  # ModelInfo(**data) needs the repo's id
    (b"[]", "TypeError"),  # ModelInfo(**data) of a list
    (b'{"id": "org/mistake-GGUF", "siblings": ["m-Q8_0.gguf"]}', "TypeError"),  # a sibling that is no object
], ids=["no-id", "list", "sibling-name"])
def test_a_listing_huggingface_hub_cannot_read_stays_a_hub_error(hubenv: HubEnv, capfd: pytest.CaptureFixture[str],
                                                                  reply: bytes, raised: str) -> None:
    """huggingface_hub raises KeyError and TypeError itself for a reply of another shape than the Hub's (a mirror's, a
    proxy's): the server's doing, not a mistake of localgen's."""
    _serve(hubenv)
    hubenv.server.listing_page = reply
    code, err = _pulled(capfd)
    assert code == 1 and f"error: download of {REPO} failed: {raised}" in err and "internal error" not in err, err


@pytest.mark.parametrize(("sha", "shown"), [
    (5, "5"), (["0" * 40], f"['{'0' * 40}']"), ("not-a-commit", "'not-a-commit'"), ("f" * 100, repr("f" * 60)),
    (0, "0"), ([], "[]"), ("", "''"), (["0" * 40] * 3, repr(["0" * 40] * 3)[:79] + "…"),
], ids=["number", "list", "word", "long", "zero", "empty-list", "empty", "long-list"])
def test_a_listing_whose_commit_id_is_no_commit_id_is_refused_as_the_server_s(
        hubenv: HubEnv, capfd: pytest.CaptureFixture[str], sha: object, shown: str) -> None:
    """A commit id that is no string ("sha": 5) said: internal error: TypeError: expected string or bytes-like object,
    a bug of localgen's for a reply of the server's."""
    _serve(hubenv)
    hubenv.server.listing_page = json.dumps({"id": REPO, "sha": sha, "siblings": [{"rfilename": FILE}]}).encode()
    code, err = _pulled(capfd)
    assert code == 1 and f"error: the Hub returned an invalid commit id for {REPO}: {shown} (hint: check HF_ENDPOINT" \
        in err and "internal error" not in err, err


def test_a_wrong_call_into_huggingface_hub_from_any_code_is_raised_as_it_is() -> None:
    """A call made from no module of localgen's (a script's, this test's) was a Hub error: HubError('download of
    org/r/m.gguf failed: TypeError: HfApi.model_info() got an unexpected keyword argument 'bogus'')."""
    from huggingface_hub import HfApi

    try:
        HfApi().model_info("org/r", bogus=1)  # type: ignore[call-arg]
    except TypeError as exc:
        with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
            map_hub_error(exc, repo="org/r", filename="m.gguf")


def test_an_error_raised_outside_huggingface_hub_is_raised_as_it_is() -> None:
    """map_hub_error made a HubError of any exception at all."""
    try:
        None.size  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        with pytest.raises(AttributeError):
            map_hub_error(exc, repo="org/r", filename="m.gguf")
