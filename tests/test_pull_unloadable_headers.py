"""`pull` of a repo named without a quant whose quants' headers on the Hub cannot be loaded: refused, or passed over,
before anything is downloaded."""

from __future__ import annotations

import pytest
from hub_server import HubEnv, make_gguf_bytes, run_cli

from localgen.errors import GGUFError, HubError

REPO = "org/Bad-GGUF"
DAMAGED = b"GGUF\x03\x00\x00\x00" + b"\xff" * 200  # a tensor count past any model's
NOT_GGUF = b"hello, this is text and no model " * 10


def test_a_repo_whose_only_quant_has_a_damaged_header_is_refused_before_its_download(hubenv: HubEnv) -> None:
    """It was downloaded, then refused: the refusal is the one its quant named gets, and nothing is downloaded."""
    hubenv.server.add_repo(REPO, {"bad-Q4_K_M.gguf": DAMAGED})
    pulled = run_cli(hubenv.env, "pull", REPO)
    assert pulled.returncode == 1 and pulled.stderr.startswith(
        f"localgen: error: {REPO}/bad-Q4_K_M.gguf: tensor count"), pulled.stderr
    assert "localgen: downloading" not in pulled.stderr and hubenv.blobs(REPO) == [], pulled.stderr


def test_a_repo_none_of_whose_quants_header_can_be_loaded_is_refused_naming_why(hubenv: HubEnv) -> None:
    """A damaged header, text and an empty file: none is downloaded, and the error says why, with fit as the hint,
    quoting the damaged Q4_K_M header's refusal, not the empty file's."""
    hubenv.server.add_repo(REPO, {"bad-Q4_K_M.gguf": DAMAGED, "bad-Q8_0.gguf": NOT_GGUF, "bad-Q4_0.gguf": b""})
    pulled = run_cli(hubenv.env, "pull", REPO)
    assert pulled.returncode == 1 and pulled.stderr.startswith(
        f"localgen: error: no quant of {REPO} can be loaded: the header or file on the Hub of each of its 3 quants is "
        f"damaged or not a model this llama.cpp can load; {REPO}/bad-Q4_K_M.gguf: tensor count"), pulled.stderr
    assert pulled.stderr.endswith(
        f"(the Hub's copy) (hint: nothing was downloaded; `localgen fit {REPO}` says what is wrong with each: choose "
        "another repository)\n"), pulled.stderr
    assert hubenv.blobs(REPO) == []


def test_a_repo_whose_preferred_quant_has_a_damaged_header_downloads_another(hubenv: HubEnv) -> None:
    """Where no header could be read (Q8_0's read cut short), the quant a pull prefers, Q4_K_M, was downloaded and
    refused for its damaged header: the pull passes it over, saying so, and downloads Q8_0."""
    hubenv.server.add_repo(REPO, {"bad-Q4_K_M.gguf": DAMAGED, "bad-Q8_0.gguf": make_gguf_bytes("good")})
    hubenv.server.abort_after[(REPO, "bad-Q8_0.gguf")] = 100  # its header read fails; its download does not
    pulled = run_cli(hubenv.env, "pull", REPO)
    assert pulled.returncode == 0, pulled.stderr
    assert (f"localgen: chose {REPO}:Q8_0, whose header could not be read, over Q4_K_M, as the header or file on the "
            f"Hub of it is damaged or not a model this llama.cpp can load (`localgen fit {REPO}` says why)\n") \
        in pulled.stderr, pulled.stderr
    assert pulled.stdout.strip().endswith("bad-Q8_0.gguf"), pulled.stdout


def test_a_repo_whose_headers_could_not_be_read_a_second_time_is_refused_with_the_hint_to_try_again(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a header could not be read again to tell damage on the way from the repository's file, the refusal of
    the repo told to choose another repository; it says to try again."""
    from localgen import hub_range
    from localgen.fit import FitRequest
    from localgen.hardware import probe_hardware
    from localgen.quant_choice import choose_download

    hubenv.server.add_repo(REPO, {"bad-Q4_K_M.gguf": DAMAGED, "bad-Q8_0.gguf": NOT_GGUF})
    read, names = hub_range.read_header_bytes, []

    def first_only(repo: str, filename: str, *args: object, **kwargs: object) -> hub_range.HeaderBytes:
        names.append(filename)
        if names.count(filename) > 1:
            raise HubError("the Hub did not answer")
        return read(repo, filename, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hub_range, "read_header_bytes", first_only)
    with pytest.raises(GGUFError) as caught:
        choose_download(REPO, hw=probe_hardware(), request=FitRequest(), download_only=True)
    assert caught.value.message.endswith(" (as the Hub sent it)"), caught.value.message
    assert (caught.value.hint or "").startswith("nothing was downloaded; a header that could not be read a second "
                                                "time may have been damaged on the way: try again"), caught.value.hint
    assert "choose another repository" not in (caught.value.hint or "") and hubenv.blobs(REPO) == []


def test_a_pull_of_a_quant_whose_header_the_hub_did_not_send_says_so_before_downloading_it(
        hubenv: HubEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`pull ORG/REPO:QUANT` whose header read failed on the network says so in one line, the Hub's error after a
    colon, before its download; --quiet leaves the line out."""
    from localgen import hub_range
    from localgen.cli_pull import pull_models

    hubenv.server.add_repo("org/Good-GGUF", {"good-Q4_0.gguf": make_gguf_bytes("good"),
                                             "good-Q8_0.gguf": make_gguf_bytes("better")})

    def unanswered(*args: object, **kwargs: object) -> hub_range.HeaderBytes:
        raise HubError("cannot reach the Hugging Face Hub (https://huggingface.co) for org/Good-GGUF/good-Q4_0.gguf")

    monkeypatch.setattr(hub_range, "read_header_bytes", unanswered)
    assert pull_models(["org/Good-GGUF:Q4_0"], force=False, options=[]) == 0
    said = capsys.readouterr().err
    assert said.startswith("localgen: could not read org/Good-GGUF:Q4_0's header from the Hub: cannot reach the "
                           "Hugging Face Hub (https://huggingface.co) for org/Good-GGUF/good-Q4_0.gguf; downloading "
                           "it without checking it fits here\nlocalgen: downloading org/Good-GGUF/good-Q4_0.gguf"), said
    assert pull_models(["org/Good-GGUF:Q8_0"], force=False, options=["--quiet"], quiet=True) == 0
    assert capsys.readouterr().err == ""
