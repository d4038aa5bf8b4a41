"""What bench_features.py's benchmarks share: the repository, progress lines, spreads, texts and `localgen` runs."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

TYPO_TEXT = (
    "The history of the printing press is a fascinating story of innovation and persistance. Before its invention, "
    "books were copied by hand, a slow and expensive proccess that kept knowledge in the hands of a few. Monks in "
    "monasteries spent years copying a single manuscript, and errors crept into every copy. In the middle of the "
    "fifteenth century, Johannes Gutenberg, a goldsmith from Mainz, developed a system of movable metal type that "
    "could be arranged, inked, and pressed onto paper again and again. His press was adapted from the screw presses "
    "used to make wine and olive oil, and his inks were based on oil rather than water, so they stuck to the metal "
    "type. The first major book he printed was the Bible, and around one hundred and eighty copies were made. "
    "Within a few decades, printing shops had spread to more than two hundred citys across Europe. The price of "
    "books fell dramaticaly, and literacy began to rise. Scholars could compare identical copies of a text, which "
    "made it easier to correct mistakes and build on the work of others. The printing press also helped spread new "
    "ideas quickly, from scientific discoveries to religious reforms, and it changed how people thought about "
    "authorship and ownership of words. Newspapers, pamphlets, and posters followed, and ordinary people began to "
    "read about events far from their own towns. Governments and churches tried to control what was printed, but "
    "the flood of paper was hard to stop. Today we take printed and digital text for granted, but every book on a "
    "shelf and every page on a screen owes something to that workshop in Mainz. The story reminds us that a single "
    "tecnology can reshape a whole society, often in ways its inventor never imagined. It also shows that access to "
    "information is a powerfull force for change, and that the tools we use to share words matter as much as the "
    "words themselves."
)
FREE_PROMPT = "Write a long, original story about a lighthouse keeper who finds a mysterious map."
DRAFT_TASKS = {  # each task's instruction and the text piped or attached with it (see draft_message)
    "copy-heavy (fix typos, ~300 words piped: `localgen run \"Fix the typos in this text:\" < text`)":
        ("Fix the typos in this text:", [TYPO_TEXT]),
    "copy-heavy (fix typos, ~300 words after the instruction, in one message)":
        (f"Fix the typos in this text:\n\n{TYPO_TEXT}", []),
    "free writing (story)": (FREE_PROMPT, [])}


def draft_message(instruction: str, attached: list[str]) -> str:
    """A draft task's user message as `localgen run` builds it: a piped or attached text first, then the
    instruction."""
    from localgen.chat import compose_user_message

    return compose_user_message(instruction, attached)


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[bench_features] {message}", file=sys.stderr, flush=True)


def spread(values: list[float], digits: int = 3) -> str:
    """Median (min-max)."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def document(words: int) -> str:
    """A long, varied, deterministic document."""
    colours = ["red", "green", "blue", "amber", "violet", "grey", "white"]
    places = ["harbour", "market", "library", "station", "orchard", "bridge", "mill"]
    lines, count = [], 0
    i = 0
    while count < words:
        line = (f"Record {i}: on day {i * 7 % 31 + 1} the {colours[i % 7]} cart left the {places[i * 3 % 7]} "
                f"with {i * 13 % 97} crates, and {places[(i + 2) % 7]} reported {i * 5 % 23} delays.")
        lines.append(line)
        count += len(line.split())
        i += 1
    return "\n".join(lines)


def localgen(*args: str, env: dict[str, str]) -> dict:
    """Run `python -m localgen ARGS --json` and parse the record."""
    out = subprocess.run([sys.executable, "-m", "localgen", *args], check=True, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL,
                         env=env, cwd=REPO_ROOT).stdout
    return json.loads(out) if out.strip().startswith("{") else {}

