"""The hints of the management commands that name a `localgen pull`: offline, how to leave offline mode first."""

from __future__ import annotations

from hub_server import HubEnv, run_cli, stopped_pull

UNSET = "offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run "


def _field(text: str, name: str) -> str:
    """The value of one `name: value` line of `models show`."""
    return next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith(f"{name}:"))


def test_a_pull_named_with_localgen_offline_set_says_to_unset_it_first(hubenv: HubEnv) -> None:
    """With LOCALGEN_OFFLINE=1, `models show` of an entry, `models list`'s note of a partly downloaded model and
    `models default`'s note name the pull after saying to unset the variable; `models show --offline` names it alone
    (pull takes no --offline)."""
    stopped_pull(hubenv)
    offline = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}
    shown = run_cli(offline, "models", "show", "qwen2.5-1.5b")
    assert _field(shown.stdout, "downloaded") == f"no ({UNSET}`localgen pull qwen2.5-1.5b`, which downloads it)", shown
    listed = run_cli(offline, "models")
    assert listed.returncode == 0, listed.stderr
    assert f"{UNSET}`localgen pull test/Cut-GGUF:Q8_0`, which resumes it\n" in listed.stderr, listed.stderr
    made = run_cli(offline, "models", "default", "qwen2.5-1.5b")
    assert made.returncode == 0, made.stderr
    assert f"not downloaded yet: {UNSET}`localgen pull qwen2.5-1.5b`, which downloads it now" in made.stderr, made
    flag = run_cli(hubenv.env, "models", "show", "--offline", "qwen2.5-1.5b")
    assert _field(flag.stdout, "downloaded") == "no (`localgen pull qwen2.5-1.5b` downloads it)", flag


def test_a_model_a_stopped_pull_kept_a_part_of_is_called_partly_downloaded_everywhere(hubenv: HubEnv) -> None:
    """`models list`, `models rm`, `models show` and an offline run call a model a stopped pull kept a part of
    `partly downloaded`; rm of a quant not in the cache names what the repo has in a hint of one level, with no
    parentheses inside the hint's own."""
    stopped_pull(hubenv)
    assert run_cli(hubenv.env, "pull", "test/Cut-GGUF:Q4_0").returncode == 0
    listed = run_cli(hubenv.env, "models")
    assert "\thub (partly downloaded)\t" in listed.stdout, listed.stdout
    assert listed.stderr.startswith("localgen: test/Cut-GGUF:Q8_0 is partly downloaded (2.0 MiB of 4.0 MiB); "), listed
    every = run_cli(hubenv.env, "models", "list", "--all")
    assert "\tno (partly downloaded: 2.0 MiB of 4.0 MiB)\t" in every.stdout, every.stdout
    shown = run_cli(hubenv.env, "models", "show", "test/Cut-GGUF:Q8_0")
    assert _field(shown.stdout, "downloaded").startswith("no (partly downloaded: 2.0 MiB of 4.0 MiB; "), shown.stdout
    refused = run_cli({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "run", "-m", "test/Cut-GGUF:Q8_0", "hi")
    assert "; it is partly downloaded (2.0 MiB of 4.0 MiB) (hint: " in refused.stderr, refused.stderr
    removed = run_cli(hubenv.env, "models", "rm", "test/Cut-GGUF:Q6_K", "-y")
    assert removed.returncode == 1 and removed.stderr == (
        "localgen: error: test/Cut-GGUF:Q6_K is not in the cache (hint: of that repo, the cache holds "
        "test/Cut-GGUF:Q4_0; test/Cut-GGUF:Q8_0 is partly downloaded)\n"), removed.stderr
    asked = run_cli(hubenv.env, "models", "rm", "test/Cut-GGUF:Q8_0")
    assert "removing test/Cut-GGUF:Q8_0 (2.0 MiB, partly downloaded) needs confirmation" in asked.stderr, asked.stderr
    said = [listed.stderr, every.stdout, shown.stdout, refused.stderr, removed.stderr, asked.stderr]
    assert not [text for text in said if "stopped pull" in text or "part way" in text], said
