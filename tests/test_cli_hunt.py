"""What a user of `localgen help`, shell completion, `bench`, `fit` and `conversations` met that was wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import run_localgen
from tests.test_cli_completion import _env, _shell_lines, _shells, _zsh_or_fish_lines


@pytest.mark.parametrize("option", ["--resume", "--continue"])
def test_help_with_chat_s_resume_after_it_names_the_option_as_typed(option: str) -> None:
    """`localgen help chat --resume` named '--resume=?', the value chat's --resume gets alone, which nobody typed."""
    result = run_localgen("help", "chat", option)
    assert (result.returncode, result.out) == (2, "")
    assert result.err == (f"localgen: error: no such command '{option}': localgen chat has no subcommands (hint: "
                          "see `localgen help chat`)\n"), result.err


@pytest.fixture(scope="module")
def notes_and_notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with the conversations notes and NOTES saved."""
    home = tmp_path_factory.mktemp("notes-and-notes")
    for name in ("notes", "NOTES"):
        saved = run_localgen("run", "--conversation", name, "-n", "1", "hi", env=_env(home))
        assert saved.returncode == 0, saved.err
    return home


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_keeps_the_word_typed_where_the_names_it_matches_differ_in_case_within_it(notes_and_notes: Path) -> None:
    """zsh put the names' common start in place of the word typed, so `conversations show no` Tab, beside notes and
    NOTES, emptied the word: the no typed was gone."""
    assert _zsh_or_fish_lines("zsh", notes_and_notes, "localgen conversations show no",
                              "localgen run --conversation NOTE") == [
        "localgen conversations show no", "localgen run --conversation NOTE"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_s_second_tab_goes_through_names_that_differ_in_case_within_the_word(notes_and_notes: Path) -> None:
    """Every Tab kept the word typed where the names it matches differ in case within it, so a second Tab never went
    through them: `conversations show no` Tab Tab stayed no, and `show notes` Tab Tab stayed notes."""
    assert _zsh_or_fish_lines("zsh", notes_and_notes, "localgen conversations show no\t",
                              "localgen conversations show notes\t") == [
        "localgen conversations show NOTES", "localgen conversations show NOTES"]


@pytest.mark.parametrize("shell", _shells("bash", "zsh", "fish"))
def test_a_conversation_given_already_leaves_the_one_named_in_another_case_offered(notes_and_notes: Path,
                                                                                     shell: str) -> None:
    """`conversations rm notes NOTE` Tab offered nothing: a name given already was left out in any case, as a model's
    is, but notes and NOTES are two conversations, two files."""
    assert _shell_lines(shell, notes_and_notes, "localgen conversations rm notes NOTE") == [
        "localgen conversations rm notes NOTES "]


@pytest.mark.parametrize("shell", _shells("bash", "zsh", "fish"))
def test_a_conversation_given_already_under_another_name_of_its_file_is_not_offered(tmp_path: Path,
                                                                                    shell: str) -> None:
    """Where notes.json and NOTES.json are one file (a case-insensitive file system: here a hard link stands for it),
    `conversations rm NOTES no` Tab offered notes, the conversation given already; and `rm notes.json no` offered
    notes, which rm reads notes.json as."""
    saved = run_localgen("run", "--conversation", "notes", "-n", "1", "hi", env=_env(tmp_path))
    assert saved.returncode == 0, saved.err
    [notes] = tmp_path.rglob("notes.json")
    (notes.parent / "NOTES.json").hardlink_to(notes)
    (notes.parent / "other.json").write_bytes(notes.read_bytes())  # a copy: a conversation of its own
    assert _shell_lines(shell, tmp_path, "localgen conversations rm NOTES no", "localgen conversations rm notes.json o",
                        "localgen conversations rm notes.json no") == [
        "localgen conversations rm NOTES no", "localgen conversations rm notes.json other ",
        "localgen conversations rm notes.json no"]


def test_the_command_list_says_conversations_renames_as_its_own_help_does() -> None:
    """`localgen --help` said conversations lists, shows and deletes, leaving out mv, which renames."""
    listed = [line.split(None, 1) for line in run_localgen("--help").out.splitlines() if line.strip()]
    assert ["conversations", "List, show, rename and delete saved conversations."] in listed


@pytest.mark.parametrize(("typed", "error"), [
    (["-mg", "0"], "-mg is llama-bench's option for the main GPU"),  # read as -m g: a model "g", then 0 left over
    (["-rpc", "127.0.0.1:50052"], "-rpc is llama-bench's option for offloading to RPC servers"),  # -r pc
    (["-ts", "1/1"], "-ts is llama-bench's option for the tensor split across GPUs"),  # -t s
    (["-nopo", "1"], "-nopo is llama-bench's option for keeping operations off the GPU"),  # -n opo
    (["-ncmoe", "2"], "-ncmoe is llama-bench's option for keeping a mixture of experts' weights on the CPU"),
    (["-hf", "acme/Tiny-GGUF"], "-hf is llama-bench's option for a Hugging Face repo (hint: localgen's is -m "
                                "acme/Tiny-GGUF)"),  # told that -h alone is --help
])
def test_llama_bench_s_options_that_look_like_bench_s_own_with_a_value_stuck_on_are_named(typed: list[str],
                                                                                           error: str) -> None:
    """bench read llama-bench's -mg 0 as -m g and refused the 0 as an extra argument, and -rpc, -ts, -nopo, -ncmoe as
    -r, -t, -n with a value that is no number ('pc' is not a valid integer)."""
    result = run_localgen("bench", *typed)
    assert (result.returncode, result.out) == (2, "")
    assert result.err.startswith(f"localgen: error: {error}"), result.err


@pytest.mark.parametrize("command", ["run", "chat"])
def test_llama_cli_s_no_op_offload_is_named_rather_than_read_as_a_token_limit(command: str) -> None:
    """run -nopo was read as -n opo: 'opo' is not a valid integer."""
    result = run_localgen(command, "-nopo", "hi")
    assert (result.returncode, result.out) == (2, "")
    assert result.err.startswith("localgen: error: -nopo is llama-bench's option for keeping operations off the GPU "
                                 "(hint: localgen leaves that to llama.cpp's default: drop it)"), result.err


@pytest.mark.parametrize("command", ["run", "chat"])
@pytest.mark.parametrize(("typed", "error"), [
    (["-nopo"], "-nopo is llama-bench's option for keeping operations off the GPU"),  # llama-cli has no -nopo
    (["--op-offload"], "--op-offload is llama-cli's option for offloading operations to the GPU"),
    (["--rpc", "127.0.0.1:50052"], "--rpc is llama-cli's option for offloading to RPC servers"),
])
def test_llama_cli_s_op_offload_and_rpc_are_named_as_the_program_s_whose_they_are(command: str, typed: list[str],
                                                                                   error: str) -> None:
    """-nopo was named llama-cli's, though it is llama-bench's alone, and llama-cli's --op-offload and --rpc got a plain
    `no such option`."""
    result = run_localgen(command, *typed, "hi")
    assert (result.returncode, result.out) == (2, "")
    assert result.err.startswith(f"localgen: error: {error} (hint: "), result.err


@pytest.mark.parametrize(("typed", "error", "hint"), [
    (["conversations", "-n", "2", "list"], "--limit before `list` would be ignored",
     "localgen conversations list -n 2"),
    (["conversations", "--json", "-n", "2", "list"], "--json before `list` would be ignored",
     "localgen conversations list --json -n 2"),
    (["models", "--json", "list", "--all"], "--json before `list` would be ignored",
     "localgen models list --json --all"),
])
def test_a_group_s_option_before_its_subcommand_is_hinted_the_command_with_it_after(typed: list[str], error: str,
                                                                                     hint: str) -> None:
    """The hint was `put it after: localgen conversations list ... --limit`, the option's value left out, so the
    command it gave was refused in turn."""
    result = run_localgen(*typed)
    assert (result.returncode, result.out) == (2, "")
    assert result.err == f"localgen: error: {error} (hint: put it after: `{hint}`)\n", result.err
    assert run_localgen(*hint.split()[1:]).returncode == 0


@pytest.mark.parametrize("shell", _shells("bash", "zsh", "fish"))
def test_help_completes_the_subcommands_of_the_command_it_names(tmp_path: Path, shell: str) -> None:
    """`localgen help conversations m` Tab completed models, a top-level command, as if conversations were not typed:
    help's words after the first were offered the top-level commands again."""
    assert _shell_lines(shell, tmp_path, "localgen help conversations m", "localgen help models l") == [
        "localgen help conversations mv ", "localgen help models list "]


def test_help_completes_after_the_words_help_takes_as_help_does() -> None:
    """help's completion passed over every help among its words, so `help conversations help ` was offered list,
    show, rm and mv, which `localgen help conversations help list` refuses (no such command 'help')."""
    def offered(line: str) -> list[str]:
        """The words zsh's script is answered for line."""
        asked = run_localgen(env={"_LOCALGEN_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": line})
        assert asked.returncode == 0, asked.err
        return [answer.split("\t")[0] for answer in asked.out.splitlines()]

    assert offered("localgen help help co") == ["conversations"]
    assert offered("localgen help conversations help ") == [":no-files"]
    assert run_localgen("help", "conversations", "help", "list").returncode == 2


@pytest.mark.parametrize(("typed", "hint"), [
    (["conversations", "--json", "show", "--", "-x"], "localgen conversations show --json -- -x"),
    (["models", "--all", "--json", "list", "--"], "localgen models list --all --json --"),
])
def test_a_group_s_option_moved_after_its_subcommand_goes_before_the_double_dash(typed: list[str], hint: str) -> None:
    """The moved options went at the end, after the -- that ends the options, so the hinted command was refused in
    turn: `conversations show -- -x --json` (unexpected extra argument(s) (--json))."""
    result = run_localgen(*typed)
    assert (result.returncode, result.out) == (2, "")
    assert result.err.endswith(f"(hint: put it after: `{hint}`)\n"), result.err
    assert "extra argument" not in run_localgen(*hint.split()[1:]).err


def test_a_group_s_option_moved_after_its_subcommand_yields_to_the_same_option_typed_after_it(tmp_path: Path) -> None:
    """`conversations -n 2 list -n 3` hinted `list -n 3 -n 2`, where click takes the last: the list typed with -n 3
    after list, which wins over the -n 2 before it, would list 2."""
    result = run_localgen("conversations", "-n", "2", "list", "-n", "3", env=_env(tmp_path))
    assert (result.returncode, result.out) == (2, "")
    assert result.err.endswith("(hint: put it after: `localgen conversations list -n 2 -n 3`)\n"), result.err


# The short options of llama.cpp's common/arg.cpp (llama-cli, llama-server and its other programs) and of
# tools/llama-bench/llama-bench.cpp, as its vendored source in llama-cpp-python 0.3.36 spells them.
LLAMA_CPP_SHORT_OPTIONS = [
    "-C", "-Cb", "-Cbd", "-Cd", "-Cr", "-Crb", "-Crbd", "-Crd", "-a", "-ag", "-b", "-bf", "-bs", "-c", "-cb", "-cl",
    "-cmoe", "-cmoed", "-cms", "-cnv", "-co", "-cram", "-ctk", "-ctkd", "-ctv", "-ctvd", "-ctxcp", "-decay-epochs",
    "-dev", "-devd", "-dr", "-dt", "-e", "-epochs", "-f", "-fa", "-fit", "-fitc", "-fitp", "-fitt", "-gan", "-gaw",
    "-h", "-hf", "-hfd", "-hff", "-hfr", "-hfrd", "-hft", "-i", "-if", "-j", "-jf", "-kvo", "-kvu", "-l", "-lcd",
    "-lcs", "-lm", "-lr", "-lr-min", "-lv", "-lzm", "-m", "-md", "-mg", "-mli", "-mm", "-mmdev", "-mmu", "-mu", "-n",
    "-ncffn", "-ncmoe", "-ncmoed", "-ngl", "-ngld", "-nkvo", "-no-ag", "-no-cnv", "-no-kvu", "-nocb", "-np", "-npl",
    "-npp", "-nr", "-ns", "-ntg", "-o", "-ofreq", "-opt", "-ot", "-otd", "-p", "-pps", "-ptc", "-r", "-rea", "-s",
    "-sm", "-sp", "-sps", "-st", "-sys", "-sysf", "-t", "-tb", "-tbd", "-td", "-tgs", "-to", "-ts", "-ub", "-v",
    "-val-split", "-wd"
]
LLAMA_BENCH_SHORT_OPTIONS = [
    "-C", "-b", "-ctk", "-ctv", "-d", "-dev", "-embd", "-fa", "-fitc", "-fitt", "-h", "-hf", "-hff", "-hfr", "-hft",
    "-lm", "-lzm", "-m", "-mg", "-n", "-ncmoe", "-ngl", "-nkvo", "-nopo", "-o", "-oe", "-ot", "-p", "-pg", "-r", "-rpc",
    "-sm", "-t", "-ts", "-ub", "-v"
]


@pytest.mark.parametrize(("command", "theirs"), [("run", LLAMA_CPP_SHORT_OPTIONS), ("chat", LLAMA_CPP_SHORT_OPTIONS),
                                                 ("bench", LLAMA_BENCH_SHORT_OPTIONS)])
def test_every_llama_cpp_short_option_that_starts_as_one_of_localgen_s_with_a_value_is_named(
        command: str, theirs: list[str]) -> None:
    """llama.cpp's -fit, -cram and -ctxcp were read as localgen's -f and -c with a value stuck on (-f it, -c ram): each
    of its short options that begins with a short option of localgen's that takes a value is localgen's own or named."""
    from localgen.cli import app
    from localgen.cli_args import option_arity
    from localgen.other_tools import OPTIONS_OF_OTHER_TOOLS

    takes_value = option_arity(app, command)
    misread = [option for option in theirs if len(option) > 2 and takes_value.get(option[:2]) and
               option not in takes_value and option not in OPTIONS_OF_OTHER_TOOLS[command]]
    assert misread == []


@pytest.mark.parametrize(("command", "typed", "error"), [
    ("run", ["-fit", "off", "hi"], "-fit is llama-cli's option for fitting the settings to the device memory"),  # -f it
    ("run", ["-cram", "0", "hi"], "-cram is llama-cli's option for a cache of prompts' states"),  # -c ram: --continue
    ("run", ["-ctxcp", "4", "hi"], "-ctxcp is llama-cli's option for the context's checkpoints"),
    ("chat", ["-fitt", "1024"], "-fitt is llama-cli's option for fitting the settings to the device memory"),
    ("bench", ["-fitc", "512"], "-fitc is llama-bench's option for fitting the settings to the device memory"),
])
def test_llama_cpp_s_fit_and_cache_options_are_named(tmp_path: Path, command: str, typed: list[str],
                                                     error: str) -> None:
    """run -fit off hi was read as -f it (no such file: it), and -cram 0 hi as -c ram, whose hint `localgen run
    --continue 'ram 0 hi'` continued the last run and saved a conversation; bench -fitc was no such option."""
    result = run_localgen(command, *typed, env=_env(tmp_path))
    assert (result.returncode, result.out) == (2, "")
    assert result.err.startswith(f"localgen: error: {error} (hint: "), result.err


@pytest.mark.parametrize(("typed", "hint"), [
    (["help", "conversations", "-n", "2", "list"], "localgen conversations list -n 2"),
    (["conversations", "-n", "2", "list", "--help"], "localgen conversations list -n 2 --help"),  # typed: kept
])
def test_a_group_s_option_before_its_subcommand_is_hinted_without_a_help_nobody_typed(typed: list[str],
                                                                                     hint: str) -> None:
    """`localgen help conversations -n 2 list` hinted `localgen conversations list -n 2 --help`: the --help that help
    WORDS becomes, which was never typed."""
    result = run_localgen(*typed)
    assert (result.returncode, result.out) == (2, "")
    assert result.err.endswith(f"(hint: put it after: `{hint}`)\n"), result.err
