"""localgen's zsh and fish completion, in place of typer's: zsh's script offered each answer only where it began
with the word as typed, case and all (smollm2-135m:q offered nothing, where smollm2-135m:Q8_0 was meant), and both
took click's answer for `--model=smo`, the value alone, for the whole word, which it does not begin, so nothing was
offered. Here each answer is the whole word (cli_completion_answers), and zsh's script puts it in place of the word
as typed, in any case."""

from __future__ import annotations

import os
import re
from typing import Any

from typer._completion_classes import FishComplete, ZshComplete, _sanitize_help_text

from localgen.cli_completion_answers import NO_FILES, completion_answers

ZSH_SCRIPT = """\
#compdef %(prog_name)s

%(complete_func)s() {
    local -a answers words_offered shown keep
    local answer
    answers=("${(@f)$(_TYPER_COMPLETE_ARGS="${words[1,CURRENT-1]} $PREFIX" \\
        %(autocomplete_var)s=complete_zsh %(prog_name)s </dev/null)}")
    for answer in "${answers[@]}"; do
        [[ $answer == %(no_files)s ]] && return 1
        [[ -n $answer ]] || continue
        words_offered+=("${answer%%%%$'\\t'*}")
        shown+=("${answer/$'\\t'/  -- }")
    done
    if (( ${#words_offered} )); then
        [[ -n $SUFFIX ]] && keep=(-S '' -I "$SUFFIX")  # the word after the cursor (complete_in_word) stays, as in bash
        compadd -U "${keep[@]}" -l -d shown -- "${words_offered[@]}"
    else
        [[ $PREFIX == --*=* ]] && compset -P '*='  # --model=./no: the file's name after the =
        _files
    fi
}

compdef %(complete_func)s %(prog_name)s
"""
FISH_ACTION_VARIABLE = "_TYPER_COMPLETE_FISH_ACTION"  # what typer's fish script asks: get-args, or is-args (any?)


class ZshLine(ZshComplete):
    """Completion for zsh: each answer a line, the whole word then a tab and its help, put in place of the word."""

    source_template = ZSH_SCRIPT

    def complete(self) -> str:
        """The answers for the line up to the cursor (_TYPER_COMPLETE_ARGS), one a line."""
        args, incomplete = self.get_completion_args()
        return completion_answers(self, args, incomplete).lines(_answer_line)

    def source_vars(self) -> dict[str, Any]:
        """The script's names, and the line that asks for no file names either."""
        return {**super().source_vars(), "no_files": NO_FILES}


class FishLine(FishComplete):
    """Completion for fish, with typer's script: each answer the whole word, `--model=` kept."""

    def complete(self) -> str:
        """The answers (get-args), one a line, the word then a tab and its help; for is-args, whether there are any."""
        args, incomplete = self.get_completion_args()
        answers = completion_answers(self, args, incomplete)
        if os.environ.get(FISH_ACTION_VARIABLE) == "is-args":  # 1: fish completes file names
            raise SystemExit(0 if answers.words or not answers.files else 1)
        return "\n".join(_answer_line(word, help_text) for word, help_text in answers.words)


def _answer_line(word: str, help_text: str) -> str:
    """An answer as zsh's and fish's scripts read it: the word, then a tab and its help on one line where it has one."""
    shown = _sanitize_help_text(re.sub(r"\s+", " ", help_text)).strip() if help_text else ""
    return f"{word}\t{shown}" if shown else word
