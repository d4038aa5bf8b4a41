"""What `localgen models rm` asks and says: each model's space, the data it keeps for the models whose files are the
same bytes, and what else removing it deletes or leaves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from localgen.partial_downloads import PARTLY_DOWNLOADED
from localgen.units import alternatives, binary_size, counted

if TYPE_CHECKING:
    from localgen.model_removal import Removals, RemovedModel


def asked_of(plan: RemovedModel) -> str:
    """What the question before removing names of a model (its dry run): its name, the space freed (and whether it is
    only partly downloaded), the bytes kept for the models that share them, the models removed after it whose file it
    is, and its prompt cache entries."""
    state = f", {PARTLY_DOWNLOADED}" if plan.in_part else ""
    return (f"{plan.described} ({binary_size(plan.bytes_freed)}{state}{_kept_for(plan)}{_same_later(plan)})"
            f"{_its_states(plan)}")


def removals_around(plans: list[tuple[str, RemovedModel]], index: int) -> Removals:
    """What the models removed before and after the one at index take (from their dry runs)."""
    from localgen.model_removal import Removals

    gone = frozenset(path for _, plan in plans[:index] for path in plan.paths)
    later = tuple((entry, plan.described) for _, plan in plans[index + 1:] for entry in plan.entries)
    return Removals(gone=gone, later=later)


def removed_line(removed: RemovedModel) -> str:
    """What `models rm` says of a model it removed: the space freed, the data it kept for others, and the files of
    the user's outside the cache it kept (only its links to them went), and their links to the data it deleted."""
    kept, later = removed.kept_shared, removed.shared_later
    state = f" ({PARTLY_DOWNLOADED})" if removed.in_part else ""
    line = f"localgen: removed {removed.described}{state}: freed {binary_size(removed.bytes_freed)}"
    line += _its_states(removed)
    if pids := [str(pid) for pid in removed.loaded_by]:  # its data stays on disk (and in use) until they end
        line += (f" once process {pids[0]} ends (it has the model loaded, and runs on until then)" if len(pids) == 1
                 else f" once processes {alternatives(pids, 'and')} end (they have the model loaded, and run on until "
                      "then)")
    if later:
        line += f" (the data it shares with {' and '.join(later)} goes with {'them' if len(later) > 1 else 'it'})"
    line += f", kept {counted(len(kept), 'file')} {_users(removed)} {'use' if len(removed.kept_for) > 1 else 'uses'}" \
        if kept else ""
    line += "".join(f", kept {mine} (outside the Hugging Face cache: only the link to it was removed)"
                    for mine in removed.kept_outside)
    return line + "".join(f", kept {link} (a link of yours to the model's file, which is deleted: it leads nowhere now)"
                          for link in removed.links_left)


def _kept_for(removed: RemovedModel) -> str:
    """'; its 93.8 MiB are shared with test/M:Q8_0 and stay': what rm of a model keeps for the models whose
    files are the same bytes ('': nothing kept so)."""
    if not removed.kept_shared:
        return ""
    kept = sum(path.stat().st_size for path in removed.kept_shared if path.is_file())
    return f"; its {binary_size(kept)} are shared with {_users(removed)} and stay"


def _same_later(removed: RemovedModel) -> str:
    """'; the same file as mine:Q5_0, which this command removes too: counted once': why a model's bytes are not
    counted in its size ('': none are another's removed later)."""
    if not removed.shared_later:
        return ""
    return f"; the same file as {alternatives(list(removed.shared_later), 'and')}, which this command removes too: " \
           "counted once"


def _users(removed: RemovedModel) -> str:
    """The models that keep data rm of removed leaves, by name ('another model' where none can be named)."""
    return alternatives(list(removed.kept_for), "and") if removed.kept_for else "another model"


def _its_states(removed: RemovedModel) -> str:
    """' and its 3 prompt cache entries (12.0 MiB)': the entries removing a model deletes with its file ('': none)."""
    from localgen.promptcache_models import their_states

    return their_states(removed.prompt_states, removed.prompt_states_bytes)
