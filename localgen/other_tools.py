"""What users of Ollama, llm and llama.cpp's llama-cli type out of habit, and localgen's way to say it."""

from __future__ import annotations

import itertools
import shlex

from localgen.errors import UsageError
from localgen.other_tools_values import (
    conversation_hint,
    model_quant_option_hint,
    output_hint,
    quant_option,
    quant_option_hint,
    resume_hint,
    setting_option_hint,
    writes_a_file_or_json,
)
from localgen.typed_paths import reads_as_no_path

OTHER_TOOLS_COMMANDS = {  # what users of other tools type at the top level, and localgen's command for it
    "list": "localgen models list", "ls": "localgen models list", "rm": "localgen models rm NAME",
    "remove": "localgen models rm NAME", "show": "localgen models show NAME", "info": "localgen models show NAME",
    "download": "localgen pull NAME", "logs": "localgen conversations", "history": "localgen conversations",
    "version": "localgen --version", "default": "localgen models default NAME",
}
RUN_WORDS = ("prompt", "generate", "ask", "complete")  # `llm prompt "..."`, and other words for `localgen run "..."`
SEVERAL_NAMES = {"rm", "remove"}  # of those, the commands whose localgen command takes several names
NAME_OPTIONAL = {"default"}  # and those whose localgen command takes none too (`models default` names the default)
_NO_SERVER = "localgen has no server: `localgen run` and `localgen chat` load the model in their own process"
_MODELS_TOML = "models are entries of models.toml: add [models.NAME] to yours (README, Models)"
_NO_PLUGINS = "localgen has no plugins: " + _MODELS_TOML
OTHER_TOOLS_WORDS = {  # what other tools' users type at the top level that localgen has no command for
    "serve": _NO_SERVER, "ps": _NO_SERVER, "stop": _NO_SERVER, "create": _MODELS_TOML, "cp": _MODELS_TOML,
    "push": "localgen has no registry to push a model to: models come from the Hugging Face Hub",
    "keys": "localgen runs models on this machine and needs no API key", "aliases": _MODELS_TOML,
    "templates": "llm's templates are models.toml entries here, each with a system prompt and settings",
    "plugins": _NO_PLUGINS, "install": _NO_PLUGINS, "uninstall": _NO_PLUGINS,
    "embed": "localgen generates text: it makes no embeddings",
}
_REMOVAL = ("rm", "clear")  # `models rm NAME`, `conversations rm NAME`; `cache clear`, which takes no name
SUBCOMMAND_HABITS = {"ls": ("list",), "remove": _REMOVAL, "delete": _REMOVAL, "del": _REMOVAL, "rm": _REMOVAL,
                     "purge": ("clear",), "prune": ("clear",), "clean": ("clear",), "info": ("show",),
                     "inspect": ("show",)}
# ^ within a group (`models`, `conversations`, `cache`): its own names for a word, the first it has meant; below, a
# group's words for a top-level command: `models pull NAME`
GROUP_COMMAND_HABITS = {("models", "pull"): "pull", ("models", "download"): "pull"}

# Options of other tools for `run` and `chat`: the tool, what the option is for there, and localgen's way. Several would
# otherwise be read as one of localgen's short options with a value stuck to it: -sys as -s ys (a system prompt "ys"),
# -st as -s t, -fa as -f a (a file named a).
_SYSTEM = "localgen's is -s TEXT, or --system TEXT"
_SYSTEM_FILE = "localgen's is --system-file FILE, or -sysf FILE"
_CHAT = "`localgen chat` is localgen's conversation mode"
_MULTILINE = "`localgen chat` takes several lines by paste, or Alt+Enter for a new line"
_SPECIAL = "localgen prints the answer's text; --print-prompt shows the prompt, its special tokens included"
_ONE_GPU = "localgen leaves the GPUs' share to llama.cpp's default; --gpu-layers N or --no-gpu set the offload: drop it"
_PLAIN = "localgen prints the answer as plain text: drop it"
_TEMPLATE = "localgen uses the model's own chat template; --chat-template FILE gives another"
_ONE_TURN = "`localgen run` answers one turn and exits"
_KV = "localgen's is --kv-type f16|q8_0|q4_0, for K and V alike"
_PROMPT = 'the prompt is the argument: localgen run "PROMPT"'
_STOP = "localgen's is --stop TEXT"
_ESCAPES = "the shell writes escapes: localgen run $'one\\ntwo'"
_SETTINGS = "each setting has its own option here: --temperature 0.2, --top-p 0.9, ..."
_USAGE = "localgen's is --stats, token counts and speeds on stderr; --json has them too"
_EXTRACT = "localgen prints the whole answer: ask the model for the code alone, or cut it out of stdout"
_TEXT_ONLY = "localgen's models read text: -f FILE attaches a text file"
_SCHEMA = "localgen's is --json-schema SCHEMA, its JSON text or a file"
_HF_REPO = "localgen's is -m ORG/REPO[:QUANT]"
_HF_FILE = "localgen's is -m ORG/REPO/FILE.gguf"
_ONE_SEQUENCE = "localgen runs one sequence, its prompt in batches of --batch-size N: drop it"
_NO_DRAFT_MODEL = "localgen drafts from the prompt with --draft lookup, no second model"
_FIT = "localgen fits the quant, GPU layers and context to this machine itself (`localgen fit MODEL` shows it): drop it"
_OP_OFFLOAD = "localgen leaves that to llama.cpp's default: drop it"
_NO_RPC = "localgen runs the model in its own process, on this machine: drop it"
_CHECKPOINTS = "localgen keeps one sequence's KV cache, its prefix reused where the next prompt shares it: drop it"
_LAYERS = "localgen offloads whole layers: --gpu-layers N sets how many, --no-gpu none"
_NO_LOG = "localgen prints no log (LOCALGEN_DEBUG=1 shows llama.cpp's)"
_MMAP = "localgen memory-maps the model file, as llama.cpp does by default, and leaves its pages to the OS: drop it"
_NO_MIROSTAT = "localgen has no Mirostat: --temperature, --top-k, --top-p and --min-p set how it samples"
_SAMPLERS = ("localgen samples with --temperature, --top-k, --top-p and --min-p, and penalizes repeats with "
             "--repeat-penalty, --presence-penalty and --frequency-penalty")
_PROMPT_CACHE = ("localgen keeps a long prompt's KV state in its own on-disk cache, found again by the prompt "
                 "(`localgen cache` lists it; run --no-cache goes without): drop it")
_NO_LORA = "localgen loads no LoRA adapter: merge it into the model with llama.cpp's llama-export-lora, then run that"
_THINK = ("localgen's is --think off (or on), which sets the switch a hybrid reasoning model's chat template reads; "
          "GPT-OSS takes --think low, medium or high")
OTHER_TOOLS_OPTIONS = {
    "-sys": ("llama-cli", "a system prompt", _SYSTEM),
    "--system-prompt": ("llama-cli", "a system prompt", _SYSTEM),
    "--system-prompt-file": ("llama-cli", "a system prompt file", _SYSTEM_FILE),
    "-cnv": ("llama-cli", "conversation mode", _CHAT),
    "--conversation-mode": ("llama-cli", "conversation mode", _CHAT),
    **dict.fromkeys(("-no-cnv", "--no-conversation"), ("llama-cli", "one-shot mode", _ONE_TURN)),
    "-st": ("llama-cli", "a single turn", _ONE_TURN),
    "--single-turn": ("llama-cli", "a single turn", _ONE_TURN),
    "-fa": ("llama-cli", "flash attention", "localgen's is --flash-attn auto|on|off"),
    "-tb": ("llama-cli", "threads for batches", "localgen's is --threads-batch N"),
    **dict.fromkeys(("-ctk", "--cache-type-k"), ("llama-cli", "the K cache type", _KV)),
    **dict.fromkeys(("-ctv", "--cache-type-v"), ("llama-cli", "the V cache type", _KV)),
    "-ub": ("llama-cli", "the physical batch size", "localgen's is --ubatch-size N"),
    "-b": ("llama-cli", "the batch size", "localgen's is --batch-size N"),
    "-p": ("llama-cli", "the prompt", _PROMPT),
    "--prompt": ("llama-cli", "the prompt", _PROMPT),
    "-r": ("llama-cli", "a reverse prompt", _STOP),
    "--reverse-prompt": ("llama-cli", "a reverse prompt", _STOP),
    "--n-predict": ("llama-cli", "a token limit", "localgen's is -n N, or --max-tokens N"),
    "--predict": ("llama-cli", "a token limit", "localgen's is -n N, or --max-tokens N"),
    "-e": ("llama-cli", "escape processing", _ESCAPES),
    "--escape": ("llama-cli", "escape processing", _ESCAPES),
    "-o": ("llm", "model settings", _SETTINGS),
    "--option": ("llm", "model settings", _SETTINGS),
    "--format": ("Ollama", "an output format",
                 "localgen's are --json-schema SCHEMA or --grammar GBNF for the answer, and --json for a record of "
                 "the run"),
    "--keepalive": ("Ollama", "the server's keep-alive", "localgen loads the model in its own process: drop it"),
    "-i": ("llama-cli", "interactive mode", _CHAT),
    "--interactive": ("llama-cli", "interactive mode", _CHAT),
    "-if": ("llama-cli", "interactive mode", _CHAT),
    "--interactive-first": ("llama-cli", "interactive mode", _CHAT),
    "-mli": ("llama-cli", "multi-line input", _MULTILINE),  # -m li: a model named li
    "--multiline-input": ("llama-cli", "multi-line input", _MULTILINE),
    "-sp": ("llama-cli", "special tokens in the output", _SPECIAL),  # -s p: a system prompt "p"
    "--special": ("llama-cli", "special tokens in the output", _SPECIAL),
    "-sm": ("llama-cli", "the split mode across GPUs", _ONE_GPU),  # -s m: a system prompt "m"
    "--split-mode": ("llama-cli", "the split mode across GPUs", _ONE_GPU),
    "-mg": ("llama-cli", "the main GPU", _ONE_GPU),  # -m g: a model named g
    "--main-gpu": ("llama-cli", "the main GPU", _ONE_GPU),
    "-ts": ("llama-cli", "the tensor split across GPUs", _ONE_GPU),  # -t s
    "--tensor-split": ("llama-cli", "the tensor split across GPUs", _ONE_GPU),
    "-co": ("llama-cli", "colored output", _PLAIN),  # -c o
    "--color": ("llama-cli", "colored output", _PLAIN),
    "-cml": ("llama-cli", "the ChatML template", _TEMPLATE),  # -c ml
    "--chatml": ("llama-cli", "the ChatML template", _TEMPLATE),
    "--verbose-prompt": ("llama-cli", "printing the prompt", "localgen's is --print-prompt, which prints it alone"),
    "--no-stream": ("llm", "printing the answer whole", "localgen streams it; --json prints it whole, in a record"),
    "--cid": ("llm", "the conversation to continue", "localgen's is --conversation NAME; --continue takes the latest"),
    "--save": ("llm", "saving a template", "llm's templates are models.toml entries here, each with a system prompt "
               "and settings"),
    "-u": ("llm", "token usage", _USAGE),
    "--usage": ("llm", "token usage", _USAGE),
    "-x": ("llm", "the first code block", _EXTRACT),
    "--extract": ("llm", "the first code block", _EXTRACT),
    "--xl": ("llm", "the last code block", _EXTRACT),
    "--extract-last": ("llm", "the last code block", _EXTRACT),
    "--sf": ("llm", "a system prompt fragment", _SYSTEM_FILE),
    "--system-fragment": ("llm", "a system prompt fragment", _SYSTEM_FILE),
    "--key": ("llm", "an API key", "localgen runs the model on this machine and needs no key: drop it"),
    **dict.fromkeys(("-a", "--attachment", "--at", "--attachment-type"), ("llm", "an attachment (an image, audio)",
                                                                           _TEXT_ONLY)),
    "--fragment": ("llm", "a fragment", "localgen's is -f FILE, a text file attached before the prompt"),
    "--reasoning-budget": ("llama-cli", "a reasoning budget", _THINK),  # 0: no thinking
    "--chat-template-kwargs": ("llama-cli", "chat template variables", _THINK),  # {"enable_thinking": false}
    "--schema": ("llm", "a JSON schema", _SCHEMA),  # chat has no like: its hint says so (_IN_CHAT)
    "-j": ("llama-cli", "a JSON schema", _SCHEMA),
    "-jf": ("llama-cli", "a JSON schema file", _SCHEMA),
    "--json-schema-file": ("llama-cli", "a JSON schema file", _SCHEMA),
    **dict.fromkeys(("-hf", "-hfr", "--hf-repo"), ("llama-cli", "a Hugging Face repo", _HF_REPO)),  # -h -f: help
    **dict.fromkeys(("-hff", "--hf-file"), ("llama-cli", "a file of a Hugging Face repo", _HF_FILE)),
    "--no-display-prompt": ("llama-cli", "leaving the prompt out of the output",
                            "localgen never prints the prompt: stdout is the answer alone; drop it"),
    "--log-disable": ("llama-cli", "turning its log off", _NO_LOG + "; -q leaves stderr to errors alone"),
    "--ignore-eos": ("llama-cli", "generating past the model's end of the answer",
                     "localgen ends the answer where the model does; `localgen bench -n N` measures decoding N tokens"),
    **dict.fromkeys(("-np", "--parallel"), ("llama-cli", "parallel sequences", _ONE_SEQUENCE)),  # -n p: a token limit
    **dict.fromkeys(("-cb", "--cont-batching", "-nocb", "--no-cont-batching"),  # -c b: a context size
                    ("llama-cli", "continuous batching", _ONE_SEQUENCE)),
    **dict.fromkeys(("-mm", "--mmproj", "-mmu", "--mmproj-url"),  # -m m: a model named m
                    ("llama-cli", "a multimodal projector", _TEXT_ONLY)),
    **dict.fromkeys(("-mu", "--model-url"), ("llama-cli", "a model's download address",  # -m u: a model named u
                                             "localgen downloads from the Hugging Face Hub: -m takes a Hub address "
                                             "(https://huggingface.co/ORG/REPO/blob/main/FILE.gguf) or ORG/REPO")),
    "--image": ("llama-cli", "an image", _TEXT_ONLY),
    **dict.fromkeys(("-md", "--model-draft"), ("llama-cli", "a draft model", _NO_DRAFT_MODEL)),  # -m d: a model "d"
    **dict.fromkeys(("-cd", "--ctx-size-draft"), ("llama-cli", "the draft model's context", _NO_DRAFT_MODEL)),  # -c d
    **dict.fromkeys(("-td", "--threads-draft", "-tbd", "--threads-batch-draft"),  # -t d, -t bd: a thread count
                    ("llama-cli", "the draft model's threads", _NO_DRAFT_MODEL)),
    **dict.fromkeys(("-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"),  # -n gld: a token limit
                    ("llama-cli", "the draft model's GPU layers", _NO_DRAFT_MODEL)),
    **dict.fromkeys(("-cmoe", "--cpu-moe", "-ncmoe", "--n-cpu-moe"),  # -c moe, -n cmoe
                    ("llama-cli", "keeping a mixture of experts' weights on the CPU", _LAYERS)),
    **dict.fromkeys(("-nr", "--no-repack"), ("llama-cli", "leaving the weights unrepacked",  # -n r: a token limit
                                             "localgen lets llama.cpp repack them for the CPU where it can: drop it")),
    **dict.fromkeys(("-nkvo", "--no-kv-offload"), ("llama-cli", "keeping the KV cache off the GPU",  # -n kvo
                                                   "localgen keeps it on the GPU with the offloaded layers, as "
                                                   "llama.cpp does; --gpu-layers N or --no-gpu set the offload")),
    "--op-offload": ("llama-cli", "offloading operations to the GPU", _OP_OFFLOAD),
    "--no-op-offload": ("llama-cli", "keeping operations off the GPU", _OP_OFFLOAD),
    "-nopo": ("llama-bench", "keeping operations off the GPU", _OP_OFFLOAD),  # -n opo: a token limit
    "--rpc": ("llama-cli", "offloading to RPC servers", _NO_RPC),
    **dict.fromkeys(("-hft", "--hf-token"), ("llama-cli", "a Hugging Face token",
                                             "localgen reads HF_TOKEN, or the token `hf auth login` saved")),
    "--mlock": ("llama-cli", "locking the model in RAM", _MMAP),
    "--no-warmup": ("llama-cli", "skipping its warm-up run", "localgen runs no warm-up before the prompt: drop it"),
    **dict.fromkeys(("--mmap", "--no-mmap"), ("llama-cli", "memory-mapping the model", _MMAP)),
    "--numa": ("llama-cli", "NUMA placement",
               "localgen has no NUMA setting: run it under numactl (numactl --interleave=all localgen run ...)"),
    **dict.fromkeys(("-dev", "--device"), ("llama-cli", "the devices to run on",
                                           "localgen uses the GPUs llama.cpp finds, as its default does: --no-gpu "
                                           "keeps to the CPU, CUDA_VISIBLE_DEVICES=N picks a CUDA GPU")),
    "--jinja": ("llama-cli", "Jinja chat templates",
                "localgen always renders the model's own chat template with Jinja (--chat-template FILE gives "
                "another): drop it"),
    **dict.fromkeys(("--mirostat", "--mirostat-lr", "--mirostat-ent"), ("llama-cli", "Mirostat sampling",
                                                                       _NO_MIROSTAT)),
    **dict.fromkeys(("--lora", "--lora-scaled"), ("llama-cli", "a LoRA adapter", _NO_LORA)),
    **dict.fromkeys(("--typical", "--samplers", "--sampling-seq", "--dry-multiplier", "--dry-base",
                     "--dry-allowed-length", "--dry-penalty-last-n", "--dry-sequence-breaker", "--xtc-probability",
                     "--xtc-threshold", "--top-nsigma", "--dynatemp-range", "--dynatemp-exp"),
                    ("llama-cli", "a sampler localgen lacks", _SAMPLERS)),
    **dict.fromkeys(("--prompt-cache", "--prompt-cache-all", "--prompt-cache-ro"),
                    ("llama-cli", "a prompt cache file", _PROMPT_CACHE)),
    **dict.fromkeys(("--in-prefix", "--in-suffix", "--in-prefix-bos"),
                    ("llama-cli", "text around each message", _TEMPLATE)),
    "--perf": ("llama-cli", "timings at the end", _USAGE),
    "--no-perf": ("llama-cli", "leaving out its timings", "localgen prints timings only with --stats: drop it"),
    "--simple-io": ("llama-cli", "plain input and output for scripts",
                    "localgen run reads stdin and writes the answer alone to stdout: drop it"),
    # llama.cpp's short options that begin with one of localgen's that take a value (-fit as -f it, -cram as -c ram)
    **dict.fromkeys(("-fit", "--fit", "-fitt", "--fit-target", "-fitc", "--fit-ctx"),  # -f it: a file "it"
                    ("llama-cli", "fitting the settings to the device memory", _FIT)),
    **dict.fromkeys(("-fitp", "--fit-print"), ("llama-fit-params", "printing the memory needed", _FIT)),
    **dict.fromkeys(("-cram", "--cache-ram"), ("llama-cli", "a cache of prompts' states", _PROMPT_CACHE)),  # -c ram
    **dict.fromkeys(("-ctxcp", "--ctx-checkpoints", "--swa-checkpoints"), ("llama-cli", "the context's checkpoints",
                                                                           _CHECKPOINTS)),  # -c txcp: --continue
    **dict.fromkeys(("-cms", "--checkpoint-min-step"), ("llama-server", "the context's checkpoints", _CHECKPOINTS)),
    **dict.fromkeys(("-cmoed", "--cpu-moe-draft", "-ncmoed", "--n-cpu-moe-draft", "-ctkd", "--cache-type-k-draft",
                     "-ctvd", "--cache-type-v-draft"), ("llama-cli", "the draft model's settings", _NO_DRAFT_MODEL)),
    **dict.fromkeys(("-ncffn", "--n-cpu-ffn"), ("llama-cli", "keeping dense FFN weights on the CPU", _LAYERS)),
    **dict.fromkeys(("-mmdev", "--mmproj-device"), ("llama-cli", "a multimodal projector's device", _TEXT_ONLY)),
    **dict.fromkeys(("-cl", "--cache-list"), ("llama-cli", "listing the models in its cache",
                                              "localgen's is `localgen models list`")),
    **dict.fromkeys(("-npl", "-npp", "-ntg", "-tgs"), ("llama-batched-bench", "batched benchmarks",
                                                       "`localgen bench` measures prefill (-p), decode (-n), TTFT")),
    **dict.fromkeys(("-ns", "--sequences"), ("llama-parallel", "parallel sequences", _ONE_SEQUENCE)),
    **dict.fromkeys(("-no-kvu", "--no-kv-unified"), ("llama-server", "a KV buffer per sequence", _ONE_SEQUENCE)),
    **dict.fromkeys(("-sps", "--slot-prompt-similarity", "-to", "--timeout", "-no-ag", "--no-agent"),
                    ("llama-server", "its server", _NO_SERVER)),
}
HUB_REPO_OPTIONS = {"-hf", "-hfr", "--hf-repo"}  # their value is what -m takes
_RUN_ONLY = {  # where chat has no like
    "--no-log": ("llm", "not logging the exchange",
                 "a plain run keeps only its own exchange, for --continue; LOCALGEN_NO_LAST_RUN=1 keeps none"),
}


# llama-bench's options that `localgen bench` spells otherwise or has not; several would otherwise be read as one of
# its short options with a value stuck to it: -mmp as -m mp (a model named mp), -mg as -m g, -rpc as -r pc, -ts as
# -t s, -nopo as -n opo. -ngl is bench's own, as run's.
LLAMA_BENCH_OPTIONS = {
    **{name: ("llama-bench", *OTHER_TOOLS_OPTIONS[name][1:])
       for name in ("-fa", "-ub", "-b", "-ctk", "--cache-type-k", "-ctv", "--cache-type-v", "-nkvo",
                    "--no-kv-offload", "-mg", "--main-gpu", "-ts", "--tensor-split", "-sm", "--split-mode", "-ncmoe",
                    "--n-cpu-moe", "-dev", "--device", "-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hft",
                    "--hf-token", "-nopo", "--no-op-offload", "-fitt", "--fit-target", "-fitc", "--fit-ctx")},
    **dict.fromkeys(("-rpc", "--rpc"), ("llama-bench", "offloading to RPC servers", _NO_RPC)),
    "-mmp": ("llama-bench", "memory-mapping the model", "localgen bench has no such setting: drop it"),
    "-o": ("llama-bench", "an output format", "localgen's is --json; the default is a table"),
    "-d": ("llama-bench", "a context depth", "localgen bench's follow-up TTFT test measures a turn after -p tokens"),
    "-pg": ("llama-bench", "a prompt and generation test", "localgen bench measures prefill (-p), decode (-n), TTFT"),
}
OPTIONS_OF_OTHER_TOOLS = {"run": {**OTHER_TOOLS_OPTIONS, **_RUN_ONLY}, "chat": OTHER_TOOLS_OPTIONS,
                          "bench": LLAMA_BENCH_OPTIONS}

# Where chat's way differs from run's.
_CHAT_USAGE = "localgen's is chat --stats, token counts and speeds after every answer (/stats in the chat)"
_CHAT_EXTRACT = 'chat shows code blocks as written, to copy; to extract one, pipe the answer of localgen run "..."'
_CHAT_PROMPT = 'chat shows the answer\'s text; `localgen run --print-prompt "..."` prints a prompt, special tokens too'
_CHAT_DRAFT = "chat drafts nothing; `localgen run --draft lookup` drafts from the prompt, with no second model"
_CHAT_CACHE = "chat keeps the conversation's KV cache in memory, each message computing only its own tokens: drop it"
_IN_CHAT = {"-p": "type the prompt at chat's >>> prompt", "--prompt": "type the prompt at chat's >>> prompt",
            "-cnv": "`localgen chat` is a conversation already: drop it",
            "--conversation-mode": "`localgen chat` is a conversation already: drop it",
            **dict.fromkeys(("-i", "--interactive", "-if", "--interactive-first"),
                            "`localgen chat` is interactive already: drop it"),
            "--no-stream": "chat streams each answer: drop it",
            **dict.fromkeys(("-sp", "--special", "--verbose-prompt"), _CHAT_PROMPT),
            **{name: _CHAT_DRAFT for name, (*_, instead) in OTHER_TOOLS_OPTIONS.items() if instead == _NO_DRAFT_MODEL},
            "--log-disable": _NO_LOG + ": drop it",
            **dict.fromkeys(("--prompt-cache", "--prompt-cache-all", "--prompt-cache-ro"), _CHAT_CACHE),
            "--cid": "localgen's is chat --resume NAME; --resume alone takes the latest",
            **dict.fromkeys(("-u", "--usage", "--perf"), _CHAT_USAGE),
            "--simple-io": "chat is for a terminal; `localgen run` reads pipes and writes the answer alone to stdout",
            **dict.fromkeys(("-x", "--extract", "--xl", "--extract-last"), _CHAT_EXTRACT),
            **dict.fromkeys(("--schema", "-j", "-jf", "--json-schema-file", "--format"),
                            "chat answers in free text; localgen run --json-schema SCHEMA answers in JSON that follows "
                            "it")}


# Options people guess, from other programs, that localgen spells otherwise: the option meant, where the command has it.
GUESSED_OPTIONS = {**dict.fromkeys(("--context", "--context-length", "--num-ctx", "--n-ctx"), "-c/--ctx-size"),
                   "-N": "-n", "-T": "--temperature"}  # a capital slipped (-N 5), or -T for temperature (-t: threads)
OUTPUT_OPTIONS = ("--output", "--output-file", "--outfile", "--out", "-o")  # curl's, sort's, gcc's: a file to write


QUANT_OPTIONS = ("--quant", "--quantization", "-q", "--include")  # a quant as an option (huggingface-cli download's
# --include "*Q4_K_M*" picks files by a pattern): localgen's references carry it, ORG/REPO:QUANT


def option_habit_hint(command: str, typed: str, words: list[str]) -> str | None:
    """For an option that command lacks, typed out of another tool's habit (words: the command's words after its
    name): localgen's way to say it, or None."""
    at = next((at for at, word in enumerate(words) if _spells(word, typed)), None)
    if at is None:  # -q, --quiet, with a quant stuck on (-qQ8_0, -q=Q8_0, -quant Q8_0): click read -q, then typed
        at = _quant_after_quiet(words, typed)
        typed = typed if at is None else "-q"
    if at is None:  # (not in the words: the hints below name it from them)
        return None
    if typed in ("-y", "--yes"):  # models rm and conversations rm take it
        return f"`localgen {command}` asks no question, so it takes no {typed}"
    if typed in OUTPUT_OPTIONS:
        return output_hint(command, words, at)
    if typed in QUANT_OPTIONS and command in ("pull", "fit"):
        return quant_option_hint(command, words, at)
    if typed in QUANT_OPTIONS and command in ("run", "chat"):
        return model_quant_option_hint(command, words, at)
    if typed == "--conversation" and command == "chat":  # run's, and llama-cli's conversation mode
        return resume_hint(words, at)
    if typed == "--resume" and command == "run":  # chat's
        return conversation_hint(words, at)
    if command == "pull" and typed in ("--local-dir", "--cache-dir"):  # huggingface-cli download's
        return ("localgen keeps models in the Hugging Face cache and prints each one's path; HF_HUB_CACHE=DIR "
                "localgen pull ... keeps the cache in DIR")
    if command == "pull" and typed == "--token":
        from localgen.hub_errors import LOGIN

        return f"for a private or gated repo, {LOGIN}"
    return None


def _quant_after_quiet(words: list[str], typed: str) -> int | None:
    """The index of a word that gives -q with a quant stuck on (-qQ8_0, -q=Q8_0, or -quant before one), which click,
    where -q is --quiet, read as -q and typed (its next letter) unknown; None where no word does."""
    return next((at for at, word in enumerate(words) if word[:2] == "-q" and len(typed) == 2 and word[2:3] == typed[1]
                 and quant_option(words, at)[1] is not None), None)


def _spells(word: str, typed: str) -> bool:
    """True when word gives option typed: alone, with =VALUE, or a short one with its value stuck on (-qQ8_0)."""
    short = len(typed) == 2 and typed[0] == "-" and typed[1] != "-"
    return word.partition("=")[0] == typed or (short and word.startswith(typed))


def mentions_other_tools_options(command: str, args: list[str]) -> bool:
    """Whether any argument of command is spelt as another tool's option (a cheap test before the careful one)."""
    options = OPTIONS_OF_OTHER_TOOLS.get(command, {})
    return any(word.partition("=")[0] in options for word in args)


def check_options(command: str, args: list[str], takes_value: dict[str, bool]) -> None:
    """Refuse another tool's option among the arguments of `run`, `chat` or `bench` (command) before --, unless it is
    an option's value."""
    options = OPTIONS_OF_OTHER_TOOLS[command]
    expects_value = False
    for index, word in enumerate(args):
        if word == "--" and not expects_value:
            return
        name = word.partition("=")[0]
        if not expects_value and name in options and name not in takes_value:
            value = word.partition("=")[2] or (args[index + 1] if index + 1 < len(args) else "")
            if name == "-o" and command in ("run", "chat") and writes_a_file_or_json(value):  # not llm's -o KEY VALUE
                raise UsageError("no such option: -o", hint=output_hint(command, args, index))
            tool, purpose, instead = options[name]
            hint = setting_option_hint(command, args, index) or (
                _IN_CHAT.get(name, instead) if command == "chat" else _format_hint(name, value) or instead)
            from localgen.other_tools_command import in_localgen_s_words

            written = in_localgen_s_words(name, args, takes_value, hint) if command == "run" else None
            raise UsageError(f"{name} is {tool}'s option for {purpose}", hint=written or _with_repo(hint, args[index:]))
        expects_value = not expects_value and takes_value.get(word, False)


def _format_hint(name: str, value: str) -> str | None:
    """For run's --format json (Ollama's any JSON) or --format SCHEMA (its JSON schema): localgen's --json-schema with
    it; None for another option or value."""
    if name != "--format":
        return None
    if value.lower() == "json":
        return ("for an answer in JSON, localgen's is --json-schema '{}' (any JSON), or --json-schema SCHEMA to "
                "follow a schema; --json prints a record of the run")
    import json  # here, not at start-up: every command reads this module

    try:  # only a schema that parses is offered as written: '{bad' would be refused as no valid JSON
        json.loads(value)
    except ValueError:
        return None
    return f"localgen's is --json-schema SCHEMA: --json-schema {shlex.quote(value)}" if value.startswith("{") else None


def _with_repo(hint: str, words: list[str]) -> str:
    """For llama-cli's -hf REPO[:QUANT] (words[0], then the rest): localgen's -m with that reference, where the option
    has its value."""
    name, eq, value = words[0].partition("=")
    if name not in HUB_REPO_OPTIONS:
        return hint
    if not eq:
        value = words[1] if len(words) > 1 and not words[1].startswith("-") else ""
    return f"localgen's is -m {shlex.quote(value)}" if value else hint


def check_template_name(value: str) -> None:
    """Refuse a --chat-template value that names no file and reads as a built-in template's name (chatml, llama3),
    which llama-cli's --chat-template takes, where localgen's takes a Jinja file."""
    if not reads_as_no_path(value):
        return
    raise UsageError(f"no such file: {value}; localgen's --chat-template takes a Jinja template file, where "
                     "llama-cli's takes a built-in template's name",
                     hint="leave it out to use the chat template in the model's GGUF, or pass a file that holds "
                          "another's Jinja text, such as the chat_template of a model's tokenizer_config.json")


def other_tool_hint(word: str, rest: list[str]) -> str | None:
    """For what users of other tools type at the top level (`ls`, `rm foo`, `serve`): localgen's command, with the
    names given before any option (the other tool's, not localgen's) in place of NAME, as many as it takes, or its
    way."""
    command = OTHER_TOOLS_COMMANDS.get(word)
    names = list(itertools.takewhile(lambda arg: not arg.startswith("-"), rest))  # not the other tool's options
    if word == "download" and len(names) == 2:  # huggingface-cli's REPO FILE: one reference
        names = ["/".join(names)]
    if command and command.endswith(" NAME") and names:
        kept = names if word in SEVERAL_NAMES else names[:1]
        command = shlex.join([*command.removesuffix(" NAME").split(), *kept])
    elif command and word in NAME_OPTIONAL:
        command = command.removesuffix(" NAME")
    if word in ("logs", "history"):
        command = _history_command(rest)
    return f"use `{command}`" if command else OTHER_TOOLS_WORDS.get(word)


def _history_command(rest: list[str]) -> str:
    """llm logs' words (rest: those after `logs`) as localgen's command: its -c/--current, the latest conversation,
    as `localgen conversations show`; its -n/--count N (-n3 too) and --json as `localgen conversations` takes them,
    its -n 0 (all) left out, as conversations lists all without -n (and refuses -n 0)."""
    if any(word in ("-c", "--current") for word in rest):  # show prints one conversation: no count
        return shlex.join(["localgen", "conversations", "show", *[word for word in rest if word == "--json"]])
    kept: list[str] = []
    for at, word in enumerate(rest):
        name, equals, value = word.partition("=")
        if name in ("-n", "--count") or (name.startswith("-n") and not equals):  # -n 3, --count=3, -n3
            value = value if equals else name[2:] or (rest[at + 1] if at + 1 < len(rest) else "")
            kept += ["-n", value] if value.isascii() and value.isdigit() and int(value) > 0 else []
        elif word == "--json":
            kept.append(word)
    return shlex.join(["localgen", "conversations", *kept])
