"""A split model given by its first shard's path with shards missing is refused before it is planned or loaded, in one
line naming them, with the pull that fetches them (a download in the Hub cache) or the folder they belong in (a file
of one's own); `fit` says they are missing in place of a plan. Real processes, a model llama.cpp loads, the loopback
Hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hub_server import HubEnv, make_gguf_bytes, run_cli

from localgen.config import offline_given
from tests.conftest import run_localgen

REPO = "test/Split-GGUF"
SHARD = "tiny-Q8_0-0000{}-of-00003.gguf"


def _pulled_split(hubenv: HubEnv, tmp_path: Path) -> Path:
    """REPO serving a model llama.cpp loads in three shards, pulled, its second shard's snapshot entry then deleted:
    the first shard's entry."""
    from gguf_builders import tiny_model, write_split

    shards = write_split(tiny_model(tmp_path / "tiny.gguf"), tmp_path / "shards", 3, prefix="tiny-Q8_0")
    hubenv.server.add_repo(REPO, {path.name: path for path in shards})
    pulled = run_cli(hubenv.env, "pull", f"{REPO}:Q8_0")
    assert pulled.returncode == 0, pulled.stderr
    first = Path(pulled.stdout.strip())
    first.with_name(SHARD.format(2)).unlink()
    return first


def test_run_of_a_cache_file_with_a_shard_missing_is_refused_naming_it_and_the_pull_that_fetches_it(
        hubenv: HubEnv, tmp_path: Path) -> None:
    """`run -m` and `bench -m` of the first shard's path said the model `was removed from the cache each time this
    run found it` (another command removes it); the pull the refusal names makes the run answer."""
    first = _pulled_split(hubenv, tmp_path)
    offline = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}
    lacking = f"localgen: error: {SHARD.format(2)}: missing shard 2 of 3"
    for command in (["run", "-m", str(first), "-n", "1", "hi"], ["bench", "-m", str(first), "-r", "1"]):
        refused = run_cli(offline, *command)
        assert (refused.returncode, refused.stderr) == (1, (
            f"{lacking} (hint: offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run "
            f"`localgen pull {REPO}:Q8_0`)\n")), refused.stderr
    refused = run_cli(hubenv.env, "run", "-m", str(first), "-n", "1", "hi")
    assert (refused.returncode, refused.stderr) == (
        1, f"{lacking} (hint: run `localgen pull {REPO}:Q8_0` to download it)\n"), refused.stderr
    report = json.loads(run_cli(offline, "fit", str(first), "--json").stdout)
    assert [(o["plan"], o["fits"], o["problem"]) for o in report["options"]] == [
        (None, "no", f"1 shard of 3 missing ({SHARD.format(2)} first)")], report
    assert run_cli(hubenv.env, "pull", f"{REPO}:Q8_0").returncode == 0
    ran = run_cli(offline, "run", "-m", str(first), "-n", "8", "--temperature", "0", "--json", "hi")
    assert ran.returncode == 0, ran.stderr  # the tokens a tiny model answers may all be whitespace: counted, not read
    answered = json.loads(ran.stdout)
    assert answered["usage"]["completion_tokens"] > 0 and answered["model_path"] == str(first), answered


@pytest.mark.parametrize("piped", [False, True], ids=["prompt", "piped"])
def test_run_of_a_file_of_ones_own_with_shards_missing_names_them_all_and_where_they_belong(tmp_path: Path,
                                                                                           piped: bool) -> None:
    """The run, given its prompt or a pipe (refused before the pipe is read), named the first missing shard alone,
    with the hint `download the missing shard`."""
    first = tmp_path / "own" / SHARD.format(1)
    first.parent.mkdir()
    first.write_bytes(make_gguf_bytes("own", shard=(1, 3)))
    prompt = [] if piped else ["hi"]
    refused = run_localgen("run", "-m", str(first), "-n", "1", *prompt, stdin=b"hi" if piped else None)
    assert (refused.returncode, refused.err) == (1, (
        f"localgen: error: {SHARD.format(2)} and {SHARD.format(3)}: missing shards 2 and 3 of 3 (hint: put them in "
        f"{first.parent}, beside the first shard)\n")), refused.err


def _own_shards(folder: Path, numbers: tuple[int, ...]) -> list[Path]:
    """Shards of a three-part model of one's own in folder, those numbered."""
    folder.mkdir()
    for number in numbers:
        (folder / SHARD.format(number)).write_bytes(make_gguf_bytes("own", shard=(number, 3)))
    return [folder / SHARD.format(number) for number in numbers]


@pytest.mark.parametrize("numbers", [(2, 3), (1, 2)], ids=["first-missing", "last-missing"])
def test_a_later_shard_is_told_to_open_the_first_whatever_shards_are_missing(tmp_path: Path,
                                                                            numbers: tuple[int, ...]) -> None:
    """`run -m` of the second shard was told shard 1 was missing, to be put `beside the first shard`, or shard 3
    was, and once it was there, that this was not the first shard."""
    second = _own_shards(tmp_path / "own", numbers)[numbers.index(2)]
    refused = run_localgen("run", "-m", str(second), "-n", "1", "hi")
    assert (refused.returncode, refused.err) == (1, (
        f"localgen: error: {second}: not the first shard (hint: open the first shard ({SHARD.format(1)}); llama.cpp "
        "loads the others from beside it)\n")), refused.err


def test_models_default_of_a_file_with_a_shard_missing_says_where_it_belongs(tmp_path: Path) -> None:
    """`models default` of a first shard, its second missing, said `download the missing shard` of a file of one's
    own, where a run names the folder it belongs in."""
    first, _ = _own_shards(tmp_path / "own", (1, 3))
    env = {"LOCALGEN_HOME": str(tmp_path / "home")}
    refused = run_localgen("models", "default", str(first), env=env)
    ran = run_localgen("run", "-m", str(first), "-n", "1", "hi", env=env)
    assert refused.returncode == ran.returncode == 1, refused.err
    assert refused.err == ran.err == (f"localgen: error: {SHARD.format(2)}: missing shard 2 of 3 (hint: put it in "
                                      f"{first.parent}, beside the first shard)\n"), (refused.err, ran.err)



def test_model_in_a_chat_of_a_cache_file_with_a_shard_missing_names_it_and_keeps_the_model(hubenv: HubEnv,
                                                                                          tmp_path: Path) -> None:
    """The chat's /model of the first shard's path said the model was removed by another command each time it was
    found; it names the shard missing and the pull that fetches it, and the chat goes on with the model it had."""
    from tests.test_repl import Chat

    first = _pulled_split(hubenv, tmp_path)
    chat = Chat(hubenv.localgen_home, "--offline", "--no-markdown", "-n", "1", columns=250)
    try:
        said = " ".join(chat.command_words(f"/model {first}", f"localgen pull {REPO}:Q8_0`)").split())
        assert f"{SHARD.format(2)}: missing shard 2 of 3 (hint: drop --offline" in said, said
        chat.command("/model", "using smollm2-135m")
        assert chat.quit() == 0
    finally:
        if chat.child.isalive():
            chat.child.terminate(force=True)


def test_the_check_of_every_shard_a_load_makes_hints_at_offline_mode_as_the_check_before_it(hubenv: HubEnv,
                                                                                           tmp_path: Path) -> None:
    """Under --offline, the load's check of every shard (validate_split: a shard gone since the check before it) says
    to drop --offline before the pull that fetches it, as the check before it does."""
    from localgen.errors import GGUFError
    from localgen.gguf_split import validate_split
    from localgen.runner import ModelOptions, load_model

    first = _pulled_split(hubenv, tmp_path)
    with pytest.raises(GGUFError, match=r"missing shard 2 of 3") as refused, offline_given(True):
        validate_split(first)
    assert refused.value.hint == f"drop --offline, then run `localgen pull {REPO}:Q8_0`", refused.value.hint
    gone: list[Path] = []

    def removed_meanwhile(resolved: object) -> None:
        """Remove the third shard as the load found the model, after the check before its own."""
        gone.append(first.with_name(SHARD.format(3)))
        gone[0].unlink()

    first.with_name(SHARD.format(2)).symlink_to(first.with_name(SHARD.format(3)).resolve())  # all there up front
    with pytest.raises(GGUFError, match=r"missing shard") as refused, offline_given(True):
        load_model(ModelOptions(model=str(first)), found=removed_meanwhile)
    assert gone and refused.value.hint == f"drop --offline, then run `localgen pull {REPO}:Q8_0`", refused.value.hint
