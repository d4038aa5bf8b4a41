"""localgen's bash completion, in place of click's: bash splits the words it gives a completer at the characters of
COMP_WORDBREAKS (`:` and `=` among them), so that click's script, which sends those words, asked for `Q8` of
`-m acme/Tiny-GGUF:Q8` and for `smo` of `--model=smo` with no option before it. This script sends the line as typed up
to the cursor, and each answer comes back cut to the piece bash replaces: the word's end after its last break
character (as bash-completion's __ltrim_colon_completions cuts them)."""

from __future__ import annotations

import os
import re

from typer._click.shell_completion import split_arg_string
from typer._completion_classes import BashComplete

from localgen.cli_completion_answers import NoFilesLine, completion_answers
from localgen.conversation_names import typed

SCRIPT = """\
%(complete_func)s() {
    local answer
    COMPREPLY=()
    while IFS= read -r answer; do
        if [[ $answer == %(no_files)s ]]; then
            compopt +o default
        elif [[ -n $answer ]]; then
            COMPREPLY+=("$answer")
        fi
    done < <(COMP_LINE="${COMP_LINE:0:COMP_POINT}" COMP_TEXT="$2" %(autocomplete_var)s=complete_bash "$1" </dev/null)
    return 0
}

complete -o default -F %(complete_func)s %(prog_name)s
"""
LINE_VARIABLE = "COMP_LINE"  # the command line up to the cursor, as typed
TEXT_VARIABLE = "COMP_TEXT"  # the end of the word being completed that bash replaces ($2 of a completion function)
_DOUBLE_QUOTED_SPECIAL = re.compile(r'[$`"\\]')  # what a backslash must keep literal inside "..."


class BashLine(NoFilesLine, BashComplete):
    """Completion for bash from the line as typed (COMP_LINE), each answer cut to the piece bash replaces."""

    source_template = SCRIPT

    def get_completion_args(self) -> tuple[list[str], str]:
        """The words before the one being completed, and that word so far ("" after a space)."""
        line = os.environ.get(LINE_VARIABLE, "")
        words = split_arg_string(line)[1:]
        if words and not line[-1:].isspace():
            return words[:-1], words[-1]
        return words, ""

    def complete(self) -> str:
        """The answers for the line, one a line, each the piece that replaces the end of the word bash replaces."""
        args, incomplete = self.get_completion_args()
        text = os.environ.get(TEXT_VARIABLE, incomplete)
        quote = _open_quote(os.environ.get(LINE_VARIABLE, ""))
        return completion_answers(self, args, incomplete).lines(
            lambda word, _: _as_typed(replacing(word, incomplete, text), quote))


def _open_quote(line: str) -> str | None:
    """The quote the line as typed ends inside (' or "), where bash quotes what it puts there itself, or None."""
    quote, escaped = None, False
    for char in line:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is None and char in "'\"":
            quote = char
        elif char == quote:
            quote = None
    return quote


def _as_typed(answer: str, quote: str | None) -> str:
    """An answer as bash must put it in the line, which it does as given: quoted as a shell types it (my notes:
    'my notes'), but inside a quote opened in the word, which bash closes after it, as that quote reads it back (it's
    in '...': it'\\''s; $, `, " and \\ after a backslash in "...")."""
    if quote == "'":
        return answer.replace("'", "'\\''")
    if quote == '"':
        return _DOUBLE_QUOTED_SPECIAL.sub(r"\\\g<0>", answer)
    return typed(answer)


def replacing(answer: str, typed: str, text: str) -> str:
    """The piece of answer, which completes all of typed, that replaces text, the end of typed that bash replaces
    (acme/Tiny-GGUF:Q8_0 for acme/Tiny-GGUF:Q8, where bash replaces Q8: Q8_0); answer whole where it does not begin
    with the rest of typed."""
    lead = typed[:len(typed) - len(text)]
    if not lead or not typed.lower().endswith(text.lower()) or not answer.lower().startswith(lead.lower()):
        return answer
    return answer[len(lead):]
