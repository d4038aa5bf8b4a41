"""localgen's zsh and fish completion, in place of typer's: zsh's script offered each answer only where it began
with the word as typed, case and all (smollm2-135m:q offered nothing, where smollm2-135m:Q8_0 was meant), and both
took click's answer for `--model=smo`, the value alone, for the whole word, which it does not begin, so nothing was
offered, and fish's started localgen twice a Tab (whether it had answers, then them). Here each answer is the whole
word (cli_completion_answers), zsh's script puts it in place of the word as typed, in any case, and fish's asks
once, completing file names itself where none is answered."""

from __future__ import annotations

import re

from typer._completion_classes import FishComplete, ZshComplete, _sanitize_help_text

from localgen.cli_completion_answers import Answers, NoFilesLine, completion_answers

ZSH_SCRIPT = """\
#compdef %(prog_name)s

%(complete_func)s() {
    local -a answers words_offered shown keep
    local answer typed=$PREFIX
    [[ -n $compstate[quote] ]] && typed=${(q)PREFIX}  # in a quote the word comes unquoted: one word again
    answers=("${(@f)$(_TYPER_COMPLETE_ARGS="${words[1,CURRENT-1]} $typed" \\
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
        local common=${words_offered[1]} offered
        for offered in "${words_offered[@]}"; do
            while [[ ${offered[1,${#common}]} != "$common" ]]; do common=${common[1,-2]}; done
        done
        # answers that part ways within the word typed, in its case (notes, NOTES for no): listed, the word kept, on
        # the first Tab alone (a second one, or menu_complete, goes through them)
        (( ${#words_offered} > 1 )) && [[ ${(L)common[1,${#PREFIX}]} != "${(L)PREFIX}" ]] \\
            && [[ $compstate[insert] == *unambiguous* ]] && compstate[insert]=''
    else
        [[ $PREFIX == --*=* ]] && compset -P '*='  # --model=./no: the file's name after the =
        _files
    fi
}

compdef %(complete_func)s %(prog_name)s
"""
FISH_SCRIPT = """\
function %(complete_func)s
    set -l answers (env %(autocomplete_var)s=complete_fish _TYPER_COMPLETE_ARGS=(commandline -cp) \\
        %(prog_name)s </dev/null)
    if test "$answers" = %(no_files)s
        return
    end
    if test -n "$answers"  # an empty line: none
        printf '%%s\\n' $answers
        return
    end
    complete -C"__%(prog_name)s_file_names "(commandline -ct)  # fish's own: ~/, --model=./no
end

complete --command %(prog_name)s --no-files --arguments '(%(complete_func)s)'
"""


class WholeWordAnswers(NoFilesLine):
    """The part zsh's and fish's completion classes share: the answers for the line up to the cursor
    (_TYPER_COMPLETE_ARGS, read by typer's get_completion_args), one a line, the whole word then a tab and its help."""

    def complete(self) -> str:
        """The answers, one a line (NO_FILES where no file's name is to be offered either)."""
        args, incomplete = self.get_completion_args()  # type: ignore[attr-defined]
        answers = completion_answers(self, args, incomplete)
        # a word with a tab or a newline (a conversation's file copied in so named) cannot be told apart from its help
        # or the next answer in the script's lines: left out, as the shell could not put it back together
        words = [(word, help_text) for word, help_text in answers.words if not re.search(r"[\t\n]", word)]
        return Answers(words, answers.files).lines(_answer_line)


class ZshLine(WholeWordAnswers, ZshComplete):
    """Completion for zsh, its script putting each answer in place of the word, the text after the cursor kept."""

    source_template = ZSH_SCRIPT


class FishLine(WholeWordAnswers, FishComplete):
    """Completion for fish, its script asking once a Tab (typer's asked twice: whether there were any, then them)."""

    source_template = FISH_SCRIPT


def _answer_line(word: str, help_text: str) -> str:
    """An answer as zsh's and fish's scripts read it: the word, then a tab and its help on one line where it has one."""
    shown = _sanitize_help_text(re.sub(r"\s+", " ", help_text)).strip() if help_text else ""
    return f"{word}\t{shown}" if shown else word
