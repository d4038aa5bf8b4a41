"""The hints of the management commands that name a `localgen pull`: offline, how to leave offline mode first."""

from __future__ import annotations

from hub_server import HubEnv, run_cli, stopped_pull

UNSET = "offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then "


def _field(text: str, name: str) -> str:
    """The value of one `name: value` line of `models show`."""
    return next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith(f"{name}:"))


def test_a_pull_named_with_localgen_offline_set_says_to_unset_it_first(hubenv: HubEnv) -> None:
    """With LOCALGEN_OFFLINE=1, `models show` of an entry, `models list`'s
    note of that part and `models default`'s note name the pull after saying to unset the variable, where they named
    the pull alone, which offline mode refuses; `models show --offline` names it alone (pull takes no --offline)."""
    stopped_pull(hubenv)
    offline = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}
    shown = run_cli(offline, "models", "show", "qwen2.5-1.5b")
    assert _field(shown.stdout, "downloaded") == f"no ({UNSET}`localgen pull qwen2.5-1.5b` downloads it)", shown
    listed = run_cli(offline, "models")
    assert listed.returncode == 0 and f"{UNSET}`localgen pull test/Cut-GGUF:Q8_0` resumes it\n" in listed.stderr, \
        listed.stderr
    made = run_cli(offline, "models", "default", "qwen2.5-1.5b")
    assert made.returncode == 0 and f"not downloaded yet: {UNSET}`localgen pull qwen2.5-1.5b` downloads it now" in \
        made.stderr, made.stderr
    flag = run_cli(hubenv.env, "models", "show", "--offline", "qwen2.5-1.5b")
    assert _field(flag.stdout, "downloaded") == "no (`localgen pull qwen2.5-1.5b` downloads it)", flag
