"""Other tools' options (llama-cli's -sys, llm's -o, Ollama's --format) get localgen's way, never a misreading."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import bundled_model_file, run_localgen


@pytest.mark.parametrize(("args", "error", "hint"), [
    (("run", "-sys", "be terse", "hi"), "-sys is llama-cli's option for a system prompt",
     "localgen's is -s TEXT, or --system TEXT"),  # click alone reads -sys as -s ys: a system prompt "ys"
    (("run", "-st", "hi"), "-st is llama-cli's option for a single turn", "`localgen run` answers one turn and exits"),
    (("run", "-fa", "on", "hi"), "-fa is llama-cli's option for flash attention",
     "localgen's is --flash-attn auto|on|off"),  # click alone reads -fa as -f a: attach a file named a
    (("run", "-cnv"), "-cnv is llama-cli's option for conversation mode",
     "`localgen chat` is localgen's conversation mode"),
    (("chat", "-cnv"), "-cnv is llama-cli's option for conversation mode",
     "`localgen chat` is a conversation already: drop it"),
    (("chat", "-p", "hi"), "-p is llama-cli's option for the prompt", "type the prompt at chat's >>> prompt"),
    (("chat", "--verbose-prompt"), "--verbose-prompt is llama-cli's option for printing the prompt",
     'chat shows the answer\'s text; `localgen run --print-prompt "..."` prints a prompt, special tokens too'),
    (("chat", "-md", "draft.gguf"), "-md is llama-cli's option for a draft model",
     "chat drafts nothing; `localgen run --draft lookup` drafts from the prompt, with no second model"),  # was: run's
    (("chat", "--format", "json"), "--format is Ollama's option for an output format",
     "chat answers in free text; localgen run --json-schema SCHEMA answers in JSON that follows it"),  # was: run's
    (("run", "-o", "temperature", "0.2", "hi"), "-o is llm's option for model settings",
     "localgen's is --temperature 0.2: `localgen run --temperature 0.2 hi`"),
    (("run", "--format=json", "hi"), "--format is Ollama's option for an output format",
     "for an answer in JSON, localgen's is --json-schema '{}' (any JSON), or --json-schema SCHEMA to follow a schema; "
     "--json prints a record of the run"),  # was: localgen's are --json-schema SCHEMA or --grammar GBNF ...
    (("run", "--format", '{"type": "object"}', "hi"), "--format is Ollama's option for an output format",
     "localgen's is --json-schema SCHEMA: --json-schema '{\"type\": \"object\"}'"),
    (("run", "--format", "{bad", "hi"), "--format is Ollama's option for an output format",  # was: --json-schema '{bad'
     "localgen's are --json-schema SCHEMA or --grammar GBNF for the answer, and --json for a record of the run"),
    (("run", "--format", "yaml", "hi"), "--format is Ollama's option for an output format",
     "localgen's are --json-schema SCHEMA or --grammar GBNF for the answer, and --json for a record of the run"),
    (("run", "-n", "5", "-r", "User:", "hi"), "-r is llama-cli's option for a reverse prompt",
     "localgen's is --stop TEXT"),
    (("bench", "-mmp", "0"), "-mmp is llama-bench's option for memory-mapping the model",  # -m mp: a model "mp"
     "localgen bench has no such setting: drop it"),
    (("bench", "-p", "16", "-fa", "1"), "-fa is llama-bench's option for flash attention",
     "localgen's is --flash-attn auto|on|off"),
    (("bench", "-o", "json"), "-o is llama-bench's option for an output format",
     "localgen's is --json; the default is a table"),
    # click alone read each of these as a short option with a value stuck to it, and -sp ran with a system prompt "p"
    (("run", "-sp", "hi"), "-sp is llama-cli's option for special tokens in the output",
     "localgen prints the answer's text; --print-prompt shows the prompt, its special tokens included"),
    (("run", "-sm", "row", "hi"), "-sm is llama-cli's option for the split mode across GPUs",
     "localgen leaves the GPUs' share to llama.cpp's default; --gpu-layers N or --no-gpu set the offload: drop it"),
    (("run", "-mli", "hi"), "-mli is llama-cli's option for multi-line input",  # -m li: "unknown model 'li'"
     "`localgen chat` takes several lines by paste, or Alt+Enter for a new line"),
    (("run", "-co", "hi"), "-co is llama-cli's option for colored output",
     "localgen prints the answer as plain text: drop it"),
    (("run", "-cml", "hi"), "-cml is llama-cli's option for the ChatML template",
     "localgen uses the model's own chat template; --chat-template FILE gives another"),
    (("run", "-i", "hi"), "-i is llama-cli's option for interactive mode",
     "`localgen chat` is localgen's conversation mode"),
    (("chat", "-if"), "-if is llama-cli's option for interactive mode",
     "`localgen chat` is interactive already: drop it"),
    (("run", "--no-stream", "hi"), "--no-stream is llm's option for printing the answer whole",
     "localgen streams it; --json prints it whole, in a record"),
    (("run", "--cid", "01j", "hi"), "--cid is llm's option for the conversation to continue",
     "localgen's is --conversation NAME; --continue takes the latest"),
    (("chat", "--cid", "01j"), "--cid is llm's option for the conversation to continue",
     "localgen's is chat --resume NAME; --resume alone takes the latest"),
    # each was `No such option` with no way named
    (("run", "-u", "hi"), "-u is llm's option for token usage",
     "localgen's is --stats, token counts and speeds on stderr; --json has them too"),
    (("run", "-x", "hi"), "-x is llm's option for the first code block",
     "localgen prints the whole answer: ask the model for the code alone, or cut it out of stdout"),
    (("chat", "-u"), "-u is llm's option for token usage",  # chat has no --json, and needs a terminal
     "localgen's is chat --stats, token counts and speeds after every answer (/stats in the chat)"),
    (("chat", "--xl"), "--xl is llm's option for the last code block",
     'chat shows code blocks as written, to copy; to extract one, pipe the answer of localgen run "..."'),
    (("chat", "-jf", "s.json"), "-jf is llama-cli's option for a JSON schema file",  # not "no such option: -j"
     "chat answers in free text; localgen run --json-schema SCHEMA answers in JSON that follows it"),
    (("chat", "--schema", "{}"), "--schema is llm's option for a JSON schema",
     "chat answers in free text; localgen run --json-schema SCHEMA answers in JSON that follows it"),
    (("run", "--sf", "reviewer", "hi"), "--sf is llm's option for a system prompt fragment",
     "localgen's is --system-file FILE, or -sysf FILE"),
    (("run", "--no-log", "hi"), "--no-log is llm's option for not logging the exchange",
     "a plain run keeps only its own exchange, for --continue; LOCALGEN_NO_LAST_RUN=1 keeps none"),
    (("run", "--schema", '{"type": "object"}', "hi"), "--schema is llm's option for a JSON schema",
     "localgen's is --json-schema SCHEMA, its JSON text or a file"),
    (("run", "-jf", "person.json", "hi"), "-jf is llama-cli's option for a JSON schema file",
     "localgen's is --json-schema SCHEMA, its JSON text or a file"),
    (("run", "--predict", "5", "hi"), "--predict is llama-cli's option for a token limit",
     "localgen's is -n N, or --max-tokens N"),
    (("chat", "-a", "photo.jpg"), "-a is llm's option for an attachment (an image, audio)",
     "localgen's models read text: -f FILE attaches a text file"),
    (("run", "--fragment", "notes.md", "hi"), "--fragment is llm's option for a fragment",
     "localgen's is -f FILE, a text file attached before the prompt"),
    # click read -hf as -h -f: the help on stdout, exit 0, as if it had answered
    (("run", "-n", "5", "-hf", "ggml-org/gemma-3-1b-it-GGUF:Q4_K_M", "hi"), "-hf is llama-cli's option for a Hugging "
     "Face repo", "localgen's is -m ggml-org/gemma-3-1b-it-GGUF:Q4_K_M"),
    (("run", "-n", "128", "--no-display-prompt", "--log-disable", "hi"),  # a llama-cli script's habits
     "--no-display-prompt is llama-cli's option for leaving the prompt out of the output",
     "localgen never prints the prompt: stdout is the answer alone; drop it; with localgen's options: "
     "`localgen run -n 128 hi`"),  # was: the first option's hint alone, then the second's at the next try
    (("run", "-m", "m.gguf", "-p", "I believe the meaning of life is", "-n", "128", "-no-cnv"),
     "-p is llama-cli's option for the prompt", "the prompt is the argument: `localgen run -m m.gguf -n 128 'I believe "
     "the meaning of life is'`"),  # llama.cpp's README's; was: the prompt is the argument: localgen run "PROMPT"
    (("run", "-p", "hi", "-n"), "-p is llama-cli's option for the prompt",  # was: `localgen run -n hi`
     'the prompt is the argument: localgen run "PROMPT"'),
    (("run", "-m", "smollm2-135m", "-p", "Hello there", "--flash-attn", "-n", "3"), "-p is llama-cli's option for the "
     "prompt", 'the prompt is the argument: localgen run "PROMPT"'),  # was: --flash-attn -n 'Hello there 3'
    (("run", "-p", "hi", "-s", "-n", "3"), "-p is llama-cli's option for the prompt",  # was: -s -n 'hi 3'
     'the prompt is the argument: localgen run "PROMPT"'),
    (("run", "-p", "hi", "--stop", "--END--", "-n", "-1"), "-p is llama-cli's option for the prompt",
     "the prompt is the argument: `localgen run --stop --END-- -n -1 hi`"),  # values that start with a dash
    (("run", "-sys", "Be terse.", "-p", "Hi", "-r", "User:", "-fa", "on", "--temp", "0.2"),
     "-sys is llama-cli's option for a system prompt", "localgen's is -s TEXT, or --system TEXT; with localgen's "
     "options: `localgen run -s 'Be terse.' --stop User: --flash-attn on --temp 0.2 Hi`"),
    (("run", "-cnv", "-p", "Hi"), "-cnv is llama-cli's option for conversation mode",
     "`localgen chat` is localgen's conversation mode"),  # no like in run: its own hint alone
    (("run", "-n", "64", "-np", "4", "-cb", "hi"), "-np is llama-cli's option for parallel sequences",  # -n p
     "localgen runs one sequence, its prompt in batches of --batch-size N: drop it"),
    (("run", "-mu", "https://huggingface.co/org/M-GGUF/resolve/main/m.gguf", "hi"),  # -mu: the model's address
     "-mu is llama-cli's option for a model's download address", "localgen downloads from the Hugging Face Hub: -m "
     "takes a Hub address (https://huggingface.co/ORG/REPO/blob/main/FILE.gguf) or ORG/REPO"),  # was: a projector
    (("chat", "-mmu", "https://example.com/mmproj.gguf"), "-mmu is llama-cli's option for a multimodal projector",
     "localgen's models read text: -f FILE attaches a text file"),
    (("run", "-mm", "mmproj.gguf", "hi"), "-mm is llama-cli's option for a multimodal projector",  # -m m
     "localgen's models read text: -f FILE attaches a text file"),
    (("chat", "-hff", "x.gguf"), "-hff is llama-cli's option for a file of a Hugging Face repo",
     "localgen's is -m ORG/REPO/FILE.gguf"),
    # each was `No such option` with no way named
    (("run", "--log-disable", "hi"), "--log-disable is llama-cli's option for turning its log off",
     "localgen prints no log (LOCALGEN_DEBUG=1 shows llama.cpp's); -q leaves stderr to errors alone"),
    (("chat", "--log-disable"), "--log-disable is llama-cli's option for turning its log off",  # chat has no -q
     "localgen prints no log (LOCALGEN_DEBUG=1 shows llama.cpp's): drop it"),
    (("run", "--mlock", "hi"), "--mlock is llama-cli's option for locking the model in RAM",
     "localgen memory-maps the model file, as llama.cpp does by default, and leaves its pages to the OS: drop it"),
    (("chat", "--no-mmap"), "--no-mmap is llama-cli's option for memory-mapping the model",
     "localgen memory-maps the model file, as llama.cpp does by default, and leaves its pages to the OS: drop it"),
    (("run", "--numa", "distribute", "hi"), "--numa is llama-cli's option for NUMA placement",
     "localgen has no NUMA setting: run it under numactl (numactl --interleave=all localgen run ...)"),
    (("run", "-dev", "CUDA0", "hi"), "-dev is llama-cli's option for the devices to run on",
     "localgen uses the GPUs llama.cpp finds, as its default does: --no-gpu keeps to the CPU, CUDA_VISIBLE_DEVICES=N "
     "picks a CUDA GPU"),
    (("run", "--jinja", "hi"), "--jinja is llama-cli's option for Jinja chat templates",
     "localgen always renders the model's own chat template with Jinja (--chat-template FILE gives another): drop it"),
    (("run", "--mirostat", "2", "hi"), "--mirostat is llama-cli's option for Mirostat sampling",
     "localgen has no Mirostat: --temperature, --top-k, --top-p and --min-p set how it samples"),
    (("run", "--lora-scaled", "a.gguf", "0.5", "hi"), "--lora-scaled is llama-cli's option for a LoRA adapter",
     "localgen loads no LoRA adapter: merge it into the model with llama.cpp's llama-export-lora, then run that"),
    # the long names of llama-cli's -ctk, -ctv and -no-cnv were `No such option` with no way named, and --no-warmup
    # was hinted `did you mean --no-wrap?`
    (("run", "--cache-type-k", "q8_0", "hi"), "--cache-type-k is llama-cli's option for the K cache type",
     "localgen's is --kv-type f16|q8_0|q4_0, for K and V alike"),
    (("bench", "--cache-type-v", "q8_0"), "--cache-type-v is llama-bench's option for the V cache type",
     "localgen's is --kv-type f16|q8_0|q4_0, for K and V alike"),
    (("run", "--no-conversation", "hi"), "--no-conversation is llama-cli's option for one-shot mode",
     "`localgen run` answers one turn and exits"),
    (("run", "--no-warmup", "hi"), "--no-warmup is llama-cli's option for skipping its warm-up run",
     "localgen runs no warm-up before the prompt: drop it"),
    (("run", "--prompt-cache", "p.bin", "hi"), "--prompt-cache is llama-cli's option for a prompt cache file",
     "localgen keeps a long prompt's KV state in its own on-disk cache, found again by the prompt (`localgen cache` "
     "lists it; run --no-cache goes without): drop it"),  # was: No such option, see `localgen run --help`
    (("chat", "--prompt-cache", "p.bin"), "--prompt-cache is llama-cli's option for a prompt cache file",
     "chat keeps the conversation's KV cache in memory, each message computing only its own tokens: drop it"),
    # ^ was told of run's on-disk cache and its --no-cache, which chat uses not and has not
    (("run", "--dry-multiplier", "0.8", "hi"), "--dry-multiplier is llama-cli's option for a sampler localgen lacks",
     "localgen samples with --temperature, --top-k, --top-p and --min-p, and penalizes repeats with "
     "--repeat-penalty, --presence-penalty and --frequency-penalty"),
    (("chat", "--in-prefix", " "), "--in-prefix is llama-cli's option for text around each message",
     "localgen uses the model's own chat template; --chat-template FILE gives another"),
    (("run", "--no-perf", "hi"), "--no-perf is llama-cli's option for leaving out its timings",
     "localgen prints timings only with --stats: drop it"),
    (("chat", "--perf"), "--perf is llama-cli's option for timings at the end",
     "localgen's is chat --stats, token counts and speeds after every answer (/stats in the chat)"),
    (("run", "--simple-io", "hi"), "--simple-io is llama-cli's option for plain input and output for scripts",
     "localgen run reads stdin and writes the answer alone to stdout: drop it"),
    (("run", "-b", "hi", "-p", "x"), "-b is llama-cli's option for the batch size",  # was: with localgen's options:
     "localgen's is --batch-size N"),  # `localgen run --batch-size hi x`, refused: hi is no number
    (("run", "-p", "hello", "-no-cnv", "-n", "x"), "-p is llama-cli's option for the prompt",
     'the prompt is the argument: localgen run "PROMPT"'),  # was: `localgen run -n x hello`, refused for -n x
])
def test_another_tool_s_option_is_refused_with_localgen_s_way(args: tuple[str, ...], error: str, hint: str) -> None:
    result = run_localgen(*args)
    assert result.returncode == 2 and result.out == ""
    assert result.err == f"localgen: error: {error} (hint: {hint})\n"


@pytest.mark.parametrize(("command", "args", "error"), [
    ("run", ["-cb", "hi"], "-cb is llama-cli's option for continuous batching"),  # click read it as -c b
    ("chat", ["--parallel=2"], "--parallel is llama-cli's option for parallel sequences"),
    ("run", ["-nocb", "-n", "5", "hi"], "-nocb is llama-cli's option for continuous batching"),
    ("run", ["-s", "-np", "hi"], None),  # a system prompt "-np"
    ("run", ["-md", "draft.gguf", "hi"], "-md is llama-cli's option for a draft model"),  # click read it as -m d
    ("run", ["-nkvo", "hi"], "-nkvo is llama-cli's option for keeping the KV cache off the GPU"),  # as -n kvo
    ("chat", ["--image=cat.png"], "--image is llama-cli's option for an image"),
    ("bench", ["-nkvo", "1"], "-nkvo is llama-bench's option for keeping the KV cache off the GPU"),  # as -n kvo
    ("run", ["-cd", "4096", "hi"], "-cd is llama-cli's option for the draft model's context"),  # as -c d
    ("run", ["-td", "2", "hi"], "-td is llama-cli's option for the draft model's threads"),  # as -t d
    ("chat", ["-ngld", "99"], "-ngld is llama-cli's option for the draft model's GPU layers"),  # as -n gld
    ("run", ["-ncmoe", "8", "hi"], "-ncmoe is llama-cli's option for keeping a mixture of experts' weights on the CPU"),
    ("run", ["-cmoe", "hi"], "-cmoe is llama-cli's option for keeping a mixture of experts' weights on the CPU"),
    ("run", ["-nr", "hi"], "-nr is llama-cli's option for leaving the weights unrepacked"),  # as -n r
    ("chat", ["--jinja"], "--jinja is llama-cli's option for Jinja chat templates"),
    ("run", ["--device=none", "hi"], "--device is llama-cli's option for the devices to run on"),
    ("run", ["--mirostat-lr", "0.1", "--mirostat-ent", "5", "hi"], "--mirostat-lr is llama-cli's option for Mirostat "
     "sampling"),
    ("chat", ["--lora", "a.gguf"], "--lora is llama-cli's option for a LoRA adapter"),
    ("run", ["--mmap", "hi"], "--mmap is llama-cli's option for memory-mapping the model"),
    ("run", ["-s", "--mlock", "hi"], None),  # a system prompt "--mlock"
])
def test_another_tool_s_option_is_told_from_a_value_in_process(command: str, args: list[str],
                                                               error: str | None) -> None:
    from localgen.cli import app
    from localgen.cli_usage import option_arity
    from localgen.errors import UsageError
    from localgen.other_tools import check_options

    if error is None:
        check_options(command, args, option_arity(app, command))
        return
    with pytest.raises(UsageError) as refused:
        check_options(command, args, option_arity(app, command))
    assert refused.value.message == error and refused.value.exit_code == 2


@pytest.mark.parametrize("args", [("run", "-s", "-sys", "-n", "2", "hi"), ("run", "-s", "-sp", "-n", "2", "hi"),
                                  ("run", "-n", "2", "--", "-p is a flag"),
                                  ("run", "-n", "2", "--stop", "--", "--", "-p")])  # --stop's value, then the end
def test_the_same_words_as_a_value_or_after_double_dash_are_text(args: tuple[str, ...]) -> None:
    result = run_localgen(*args[:1], "--temperature", "0", *args[1:])  # greedy: sampled, 2 tokens can be blank
    assert result.returncode == 0, result.err
    assert result.out.strip()


@pytest.mark.parametrize(("args", "same_as"), [
    (("help",), ("--help",)),
    (("help", "help"), ("--help",)),
    (("help", "run"), ("run", "--help")),
    (("help", "models", "list"), ("models", "list", "--help")),
])
def test_help_before_a_command_shows_its_help_as_git_and_ollama_do(args: tuple[str, ...],
                                                                    same_as: tuple[str, ...]) -> None:
    result, expected = run_localgen(*args), run_localgen(*same_as)
    assert result.returncode == 0 and result.err == "", result.err
    assert result.out == expected.out and result.out.startswith("Usage: localgen"), result.out
    if args == ("help", "run"):  # run's auto also turns flash attention on for --draft lookup; chat has no --draft
        assert "a context over 8,192 or --draft lookup; else off" in " ".join(result.out.split()), result.out


def test_help_of_a_command_that_is_not_there_is_refused() -> None:
    result = run_localgen("help", "serve")
    assert result.returncode == 2 and "no such command 'serve'" in result.err, result.err


def test_ollama_s_verbose_is_stats() -> None:
    result = run_localgen("run", "--verbose", "-n", "2", "--temperature", "0", "hi")
    assert result.returncode == 0, result.err
    assert "decode" in result.err and "tok/s" in result.err


@pytest.mark.parametrize(("args", "error", "hint"), [
    (("serve",), "no such command 'serve'",
     "localgen has no server: `localgen run` and `localgen chat` load the model in their own process"),
    (("push", "me/model"), "no such command 'push'",  # Ollama's; was: to ask the model: localgen run push
     "localgen has no registry to push a model to: models come from the Hugging Face Hub"),
    (("keys", "set", "openai"), "no such command 'keys'", "localgen runs models on this machine and needs no API key"),
    (("templates", "list"), "no such command 'templates'",  # llm's
     "llm's templates are models.toml entries here, each with a system prompt and settings"),
    (("install", "llm-gguf"), "no such command 'install'",
     "localgen has no plugins: models are entries of models.toml: add [models.NAME] to yours (README, Models)"),
    (("embed", "-c", "hello"), "no such command 'embed'", "localgen generates text: it makes no embeddings"),
    (("models", "ls"), "no such command 'ls'", "use `localgen models list`"),
    # Ollama's `version`: localgen's way, not also click's guess (Did you mean 'conversations'?)
    (("version",), "no such command 'version'", "use `localgen --version`"),
    (("conversations", "remove", "a", "b"), "no such command 'remove'", "use `localgen conversations rm a b`"),
    (("models", "pull", "smollm2"), "no such command 'pull'", "use `localgen pull smollm2`"),
    (("models", "info", "smollm2"), "no such command 'info'", "use `localgen models show smollm2`"),
    (("-m", "smollm2-135m", "hi there"), "no such option: -m",
     "options go after the command: `localgen run -m smollm2-135m 'hi there'`"),
    (("--offline", "chat", "-n", "5"), "no such option: --offline",
     "options go after the command: `localgen chat --offline -n 5`"),
    (("run", "-t", "summarize", "x"), "invalid value for '--threads' / '-t': 'summarize' is not a valid integer",
     "-t is --threads N; llm's templates are models.toml entries here, each with a system prompt and settings"),
    (("run", "-hi"), "no such option: -hi", "-h alone is --help: see `localgen run --help`"),  # was the help, exit 0
    (("models", "rm", "-hy", "x"), "no such option: -hy", "-h alone is --help: see `localgen models rm --help`"),
    (("run", "-hello there"), "no such option: -hello there",  # was no such option: -e
     "a prompt that starts with \"-\" goes after --: `localgen run -- '-hello there'`"),
    (("run", "--chat-template", "chatml", "hi"),  # was no such file alone; a path (./chatml, x.jinja) stays that
     "no such file: chatml; localgen's --chat-template takes a Jinja template file, where llama-cli's takes a built-in "
     "template's name", "leave it out to use the chat template in the model's GGUF, or pass a file that holds "
     "another's Jinja text, such as the chat_template of a model's tokenizer_config.json"),
    (("run", "--chat-template", "llama3.jinja", "hi"), "no such file: llama3.jinja",
     "check the path given to --chat-template"),
    (("run", "-f", "https://example.com/x.txt", "sum"),
     "-f/--file reads a local file, not an address: https://example.com/x.txt",
     'fetch it first: curl -sL https://example.com/x.txt | localgen run "..."'),
])
def test_other_tools_words_get_localgen_s_way(args: tuple[str, ...], error: str, hint: str) -> None:
    result = run_localgen(*args)
    assert result.returncode == 2 and result.out == ""
    assert result.err == f"localgen: error: {error} (hint: {hint})\n"


@pytest.mark.parametrize(("args", "hint"), [
    (("cache", "rm"), "use `localgen cache clear`"),
    (("cache", "delete", "x"), "use `localgen cache clear`"),  # clear takes no name: it deletes every entry
    (("cache", "purge"), "use `localgen cache clear`"),
    (("cache", "prune"), "use `localgen cache clear`"),
    (("conversations", "delete", "a"), "use `localgen conversations rm a`"),
    (("models", "delete", "foo"), "use `localgen models rm foo`"),  # not also click's guess: Did you mean 'default'?
    (("models", "ls"), "use `localgen models list`"),
])
def test_a_group_s_command_typed_by_another_name_is_told_its_own_in_process(capsys: pytest.CaptureFixture[str],
                                                                             args: tuple[str, ...], hint: str) -> None:
    from localgen import cli

    with pytest.raises(SystemExit) as info:
        cli.main(list(args))
    assert info.value.code == 2
    assert capsys.readouterr().err == f"localgen: error: no such command '{args[1]}' (hint: {hint})\n"


def test_a_system_prompt_that_names_a_file_gets_a_warning(tmp_path: Path) -> None:
    named = tmp_path / "sys.txt"
    named.write_text("Be terse.")
    result = run_localgen("run", "-s", str(named), "-n", "1", "hi")  # --system-file reads it; -s takes text
    assert result.returncode == 0, result.err
    assert f"the system prompt is the text '{named}', the name of a file, not what it holds " \
           f"(for that: --system-file {named})" in result.err, result.err
    assert "name of a file" not in run_localgen("run", "-s", "Be terse.", "-n", "1", "hi").err


def test_a_system_prompt_of_a_dash_gets_a_warning_naming_system_file() -> None:
    """-f - and a prompt of - read stdin; -s - sent a system prompt of '-' and attached stdin, silently."""
    result = run_localgen("run", "--print-prompt", "-s", "-", "hi", stdin=b"Be brief.")
    assert result.returncode == 0 and result.out.startswith("<|im_start|>system\n-<|im_end|>"), result.out
    assert result.err == ("localgen: warning: the system prompt is the text '-', not stdin "
                          "(for that: --system-file -)\n"), result.err
    read = run_localgen("run", "--print-prompt", "--system-file", "-", "hi", stdin=b"Be brief.")
    assert read.out.startswith("<|im_start|>system\nBe brief.<|im_end|>") and read.err == "", read.err


def test_a_prompt_that_names_a_file_gets_a_warning(tmp_path: Path) -> None:
    """`localgen run notes.md` (llama-cli's -f, or a habit of tools that read a named file) sent the name alone."""
    named = tmp_path / "notes.md"
    named.write_text("Ship v2 on Friday.")
    result = run_localgen("run", "--print-prompt", str(named))
    assert result.returncode == 0 and f"user\n{named}<|im_end|>" in result.out, "the text is sent, as typed"
    assert result.err == (f"localgen: warning: the prompt is the text '{named}', the name of a file, not what it holds "
                          f"(for that: -f {named})\n"), result.err
    for prompt in (f"Summarize {named}", "notes.md"):  # a sentence; a name with no such file here
        assert run_localgen("run", "--print-prompt", prompt).err == ""
    model = run_localgen("run", "--print-prompt", str(bundled_model_file()), stdin=b"x")
    assert "name of a file" not in model.err, "a model's file is no attachment meant"


@pytest.mark.parametrize("seed", ["42", "-1"])
def test_a_system_prompt_that_is_a_number_gets_a_warning_naming_seed(seed: str) -> None:
    """llama-cli's -s is its seed: `-s 42` ran with the system prompt "42", and said nothing."""
    result = run_localgen("run", "-s", seed, "--print-prompt", "hi")
    assert result.returncode == 0 and f"<|im_start|>system\n{seed}<|im_end|>" in result.out, result.err
    assert result.err == f"localgen: warning: the system prompt is the text '{seed}': -s is --system here, not " \
                         f"llama-cli's seed (for that: --seed {seed})\n"
    assert run_localgen("run", "-s", "Count to 42", "--print-prompt", "hi").err == ""


_CONVERSATION_MODE = ("--conversation NAME continues (or starts) conversation NAME: `localgen run --conversation NAME "
                      '"..."`; llama-cli\'s --conversation, its conversation mode, is `localgen chat`')


@pytest.mark.parametrize(("args", "error"), [
    (("run", "-m", "model.gguf", "--conversation"), "option '--conversation' requires an argument"),
    (("run", "--conversation", "-p", "hi"), "--conversation needs a value (NAME), and the word after it is the "
                                            "option -p"),  # was: '-p' is not a valid conversation name (e.g. p)
])
def test_llama_cli_s_conversation_mode_is_told_what_conversation_takes_here(args: tuple[str, ...], error: str) -> None:
    """llama-cli's --conversation (-cnv) is its conversation mode; localgen's names a conversation to continue."""
    result = run_localgen(*args)
    assert result.returncode == 2 and result.out == ""
    assert result.err == f"localgen: error: {error} (hint: {_CONVERSATION_MODE})\n"


_UNSAVED = "chat's --resume NAME reopens a saved conversation, and none is saved as"


@pytest.mark.parametrize(("args", "hint"), [
    (("chat", "-n", "5", "--conversation", "work"), "chat's is --resume NAME: `localgen chat --resume work -n 5`"),
    (("chat", "--conversation", "foo"), f"{_UNSAVED} foo: a chat is named with /save NAME in it (`localgen chat`, then "
                                        "`/save foo`)"),  # was: `localgen chat --resume foo`, which then failed
    (("chat", "-n", "5", "--conversation", "our work"), f"{_UNSAVED} our-work: a chat is named with /save NAME in it "
                                                         "(`localgen chat -n 5`, then `/save our-work`)"),
    (("chat", "--conversation=work"), "chat's is --resume NAME: `localgen chat --resume work`"),
    (("chat", "--conversation", "my work"), "chat's is --resume NAME, and 'my work' is no valid name: `localgen chat "
                                            "--resume my-work`"),  # was: --resume 'my work', which then failed
    (("chat", "--conversation", "a/b"), "chat's is --resume NAME, a saved conversation's name (`localgen "
                                        "conversations` lists them)"),
    (("chat", "--conversation", "-n", "5"), "`localgen chat` is a conversation already; --resume NAME reopens a saved "
                                            "one, --resume alone the latest"),  # llama-cli's conversation mode
])
def test_chat_given_run_s_conversation_option_is_told_its_resume(args: tuple[str, ...], hint: str, home: Path) -> None:
    """chat --conversation NAME got only `see localgen chat --help`; --resume NAME is offered for a saved one."""
    from localgen.conversation import Conversation, Turn
    from localgen.conversation_store import save_conversation

    for name in ("work", "my-work"):
        save_conversation(Conversation(name=name, turns=[Turn("hi", "Hello.")]))
    result = run_localgen(*args)
    assert result.returncode == 2 and result.out == ""
    assert result.err == f"localgen: error: no such option: --conversation (hint: {hint})\n"


_RUN_S = "run's is --conversation NAME (--continue goes on with the latest)"


@pytest.mark.parametrize(("args", "hint"), [
    (("run", "--resume", "x", "hi"), f"{_RUN_S}: `localgen run --conversation x hi`"),
    (("run", "-n", "5", "--resume=work", "Go on."), f"{_RUN_S}: `localgen run --conversation work -n 5 'Go on.'`"),
    (("run", "--resume", "work"), f'{_RUN_S}: `localgen run --conversation work "..."`'),
    (("run", "--resume", "my work", "hi"), f"{_RUN_S}, and 'my work' is no valid name: `localgen run --conversation "
                                           "my-work hi`"),
    (("run", "--resume", "a/b", "hi"), "run's is --conversation NAME, a conversation's name, and --continue goes on "
                                       "with the latest (`localgen conversations` lists them)"),
    (("run", "--resume"), 'run\'s --continue goes on with the latest conversation: `localgen run --continue "..."`'),
    (("run", "--resume", "-n", "5", "hi"), "run's --continue goes on with the latest conversation: `localgen run "
                                           "--continue -n 5 hi`"),
    (("run", "--resume", "What next?"),  # a prompt, not a name: the latest conversation was meant, with it
     "run's --continue goes on with the latest conversation: `localgen run --continue 'What next?'`"),
    (("run", "-n", "5", "--resume", "What next?"),
     "run's --continue goes on with the latest conversation: `localgen run --continue -n 5 'What next?'`"),
])
def test_run_given_chat_s_resume_option_is_told_its_conversation(args: tuple[str, ...], hint: str) -> None:
    """run --resume NAME got a bare `see localgen run --help`, where chat --conversation NAME is told --resume."""
    result = run_localgen(*args)
    assert result.returncode == 2 and result.out == ""
    assert result.err == f"localgen: error: no such option: --resume (hint: {hint})\n"


def test_default_typed_without_models_is_pointed_to_models_default(home: Path) -> None:
    """`localgen default NAME` was told `see localgen --help; to ask the model: localgen run 'default NAME'`, where
    `show`, `rm` and `list` are pointed to their `models` command."""
    bare = run_localgen("default")
    assert (bare.returncode, bare.err) == (
        2, "localgen: error: no such command 'default' (hint: use `localgen models default`)\n")
    named = run_localgen("default", "SmolLM2-135M")
    assert (named.returncode, named.err) == (
        2, "localgen: error: no such command 'default' (hint: use `localgen models default SmolLM2-135M`)\n")
    assert run_localgen("models", "default", "SmolLM2-135M").returncode == 0, "the command the hint names works"
