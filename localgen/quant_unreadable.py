"""A repo named without a quant none of whose headers could be read before a download: refused where each quant's
header on the Hub (or its empty file) is one the download would be refused for, else the quant a download takes of
the others."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from localgen.errors import GGUFError
from localgen.hub_choice import EMPTY_ON_THE_HUB, choose_model
from localgen.hub_header_blame import AS_SENT
from localgen.units import alternatives, counted

if TYPE_CHECKING:
    from localgen.hub_types import HubFile
    from localgen.quant_choice import FitOption

DAMAGED = "damaged or not a model this llama.cpp can load"  # a header (or file) on the Hub a download is refused for


def choice_without_headers(reference: str | None, repo: str, options: Sequence[FitOption],
                           files: Sequence[HubFile]) -> tuple[str | None, tuple[str, ...]]:
    """The reference to download, and a note, where no option's header was read: the repo as named where no header
    was refused, the quant a download takes of those not refused where some were; GGUFError where all were."""
    from localgen.quant_choice import option_reference

    refused = [option for option in options if option.refused is not None]
    if not refused:
        return reference, ()  # no header to judge by: the load after the download will tell
    if len(refused) == len(options):
        raise none_loadable(repo, refused)
    skipped = {name for option in refused for name in option.filenames}
    group = choose_model([f for f in files if f.filename not in skipped], quant=None, filename=None, repo=repo)
    chosen = option_reference(repo, next(option for option in options if option.filenames[0] == group[0].filename))
    passed = alternatives([option.label for option in refused], "and")
    return chosen, (f"chose {chosen}, whose header could not be read, over {passed}, as the header or file on the Hub "
                    f"of {'each' if len(refused) > 1 else 'it'} is {DAMAGED} (`localgen fit {repo}` says why)",)


def none_loadable(repo: str, refused: Sequence[FitOption]) -> GGUFError:
    """The refusal, before any download, of a repo each of whose quants' headers (or empty files) would refuse it,
    quoting the first refusal of a header (an empty file says least); to try again where a header could not be read a
    second time."""
    errors = [option.refused for option in refused if option.refused is not None]
    if len(refused) == 1:
        return errors[0]  # its only quant: refused as naming it would be
    first = next((option.refused for option in refused if option.refused is not None
                  and option.problem != EMPTY_ON_THE_HUB), errors[0])
    fit = f"`localgen fit {repo}` says what is wrong with each"
    if any(error.message.endswith(AS_SENT) for error in errors):
        hint = (f"nothing was downloaded; a header that could not be read a second time may have been damaged on the "
                f"way: try again ({fit})")
    else:
        hint = f"nothing was downloaded; {fit}: choose another repository"
    return GGUFError(f"no quant of {repo} can be loaded: the header or file on the Hub of each of its "
                     f"{counted(len(refused), 'quant')} is {DAMAGED}; {first.message}", hint=hint)
