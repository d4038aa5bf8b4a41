"""The `models show`, `pull` and `models rm` answers a second reading found wrong: a split model of one's own with a
shard missing, --json's `problem` for an entry a pull cannot fetch, --template's hint, and a pull of several stopped
part way."""

from __future__ import annotations

import json

from hub_server import HubEnv, make_gguf_bytes, run_cli

from tests.conftest import user_registry

SPLIT = "split-Q4_0-00001-of-00002.gguf"


def _fields(text: str) -> dict[str, str]:
    """`models show`'s `name: value` lines as a dict."""
    return {name: value.strip() for name, value in (line.split(":", 1) for line in text.splitlines())}


def test_models_show_of_a_split_model_of_ones_own_with_a_shard_missing_names_the_shard(hubenv: HubEnv) -> None:
    """`models show` of a split model outside the Hugging Face cache whose second shard is missing (by its path, by an
    entry's path, or in a folder that happens to be named snapshots) names the missing shard as a run's error does,
    --json giving it in `problem` and `downloaded` false as `models list --all --json` does, where it said
    `downloaded: no` with a `localgen pull` of the file, which fails."""
    own = hubenv.tmp_path / "own"
    for folder in (own, own / "snapshots" / "main"):
        folder.mkdir(parents=True)
        (folder / SPLIT).write_bytes(make_gguf_bytes("own", shard=(1, 2)))
    user_registry(hubenv.localgen_home, f'[models.own]\npath = "{own / SPLIT}"\n')
    offline = {**hubenv.env, "LOCALGEN_OFFLINE": "1"}
    lacking = "split-Q4_0-00002-of-00002.gguf: missing shard 2 of 2"
    for typed in (str(own / SPLIT), "own", str(own / "snapshots" / "main" / SPLIT)):
        fields = _fields(run_cli(offline, "models", "show", typed).stdout)
        assert "downloaded" not in fields and fields["problem"] == f"{lacking} (a run refuses the model)", fields
        record = json.loads(run_cli(offline, "models", "show", typed, "--json").stdout)
        assert (record["downloaded"], record["source"], record["problem"], record["partial"]) == (
            False, "local", lacking, None), record
    listed = json.loads(run_cli(offline, "models", "list", "--all", "--json").stdout)
    assert [row["downloaded"] for row in listed if row["name"] == "own"] == [False]
    run = run_cli(offline, "run", "-m", "own", "hi")
    assert run.returncode != 0 and lacking in run.stderr, run.stderr
