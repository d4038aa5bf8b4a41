"""`models show --offline`, as run, chat, bench and fit take it: the Hub is never asked, and what is missing for that
says to drop the flag; against the loopback Hub, which counts what it is asked."""

from __future__ import annotations

from pathlib import Path

from hub_server import HubEnv, make_gguf_bytes, run_cli

from tests.conftest import user_registry


def test_models_show_offline_never_asks_the_hub_and_says_to_drop_the_flag(hubenv: HubEnv) -> None:
    """models show --offline never asks the Hub about a model not downloaded; what that leaves out says to drop the
    flag, where the command named next takes it (a pull, which takes no --offline, is named as it is)."""
    hubenv.server.add_repo("acme/Tiny-GGUF", {"tiny-Q4_0.gguf": make_gguf_bytes("tiny")})
    user_registry(hubenv.localgen_home, '[models.tiny]\nrepo = "acme/Tiny-GGUF"\nquant = "Q4_0"\n')
    entry = run_cli(hubenv.env, "models", "show", "tiny", "--offline")
    assert entry.returncode == 0 and entry.stderr == (
        "localgen: the Hub's view of acme/Tiny-GGUF:Q4_0 (its file size, header and load plan) is not shown: "
        "localgen is offline (--offline is given)\n"), entry.stderr
    assert "downloaded:    no (`localgen pull tiny` downloads it)" in entry.stdout, entry.stdout
    both = run_cli({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "models", "show", "tiny", "--offline")
    assert both.stderr.endswith("localgen is offline (LOCALGEN_OFFLINE is set and --offline is given)\n"), both.stderr
    quant = run_cli(hubenv.env, "models", "show", "--offline", "tiny:q8")
    assert "downloaded:    no (localgen has never listed acme/Tiny-GGUF, so whether it has a Q8 file is not known; " \
        "`localgen pull tiny:q8` downloads it if it has)" in quant.stdout, quant.stdout
    both_quant = run_cli({**hubenv.env, "LOCALGEN_OFFLINE": "1"}, "models", "show", "--offline", "tiny:q8")
    assert "is not known; offline mode comes from LOCALGEN_OFFLINE in the environment: unset it, then run " \
        "`localgen pull tiny:q8`, which downloads it if it has)" in both_quant.stdout, both_quant.stdout
    repo = run_cli(hubenv.env, "models", "show", "--offline", "acme/Tiny-GGUF")
    assert repo.returncode == 1 and repo.stderr == (
        "localgen: error: model 'acme/Tiny-GGUF' is not downloaded, and localgen has never listed acme/Tiny-GGUF "
        "(hint: drop --offline, then `localgen models show acme/Tiny-GGUF` lists what the repo has)\n"), repo.stderr
    assert hubenv.server.count() == 0
    before = run_cli(hubenv.env, "--offline", "models", "show", "tiny")
    assert before.returncode == 2 and before.stderr.endswith(
        "(hint: options go after the command: `localgen models show --offline tiny`)\n"), before.stderr
    online = run_cli(hubenv.env, "models", "show", "acme/Tiny-GGUF")
    assert online.returncode == 0 and hubenv.server.count() > 0, online.stderr


def test_offline_holds_while_the_command_runs_and_no_longer(home: Path) -> None:
    """--offline holds only while its command runs: a command run after models show --offline in the same process
    (in-process, as here) is not offline."""
    from typer.testing import CliRunner

    from localgen import config
    from localgen.cli import app
    from localgen.errors import LocalgenError

    user_registry(home, '[models.tiny]\nrepo = "acme/Tiny-GGUF"\nquant = "Q4_0"\n')
    shown = CliRunner().invoke(app, ["models", "show", "tiny", "--offline"])
    assert shown.exit_code == 0 and "localgen is offline (--offline is given)" in shown.output, shown.output
    assert not config.settings().offline and not config.settings().offline_flag
    fit = CliRunner().invoke(app, ["fit", "--offline", "acme/Tiny-GGUF"])  # refused: offline, never listed
    assert isinstance(fit.exception, LocalgenError) and "drop --offline" in str(fit.exception.hint), fit.exception
    assert not config.settings().offline and not config.settings().offline_flag
