"""What `localgen models show ORG/REPO` prints of a Hub repo none of whose quants is downloaded, online: the quants the
Hub has and their sizes, and the header's fields as `localgen fit` reads them, with `downloaded: no`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from localgen.units import binary_size

if TYPE_CHECKING:
    from localgen.cli_model_hub_quant import HubModelView
    from localgen.errors import HubError
    from localgen.estimate import ModelShape
    from localgen.gguf_info import GGUFInfo
    from localgen.hub_types import HubFile


@dataclass(frozen=True)
class HubView:
    """A Hub repo as the Hub lists it: its quants (label, size of all its files), smallest first, and the header of
    the smallest (with the model's shape from it), or why it could not be read."""

    repo: str
    quants: tuple[tuple[str, int], ...]
    read_from: str
    header: tuple[GGUFInfo, ModelShape] | None
    problem: str | None = None


def hub_view(text: str) -> HubView | HubModelView | HubError | None:
    """ORG/REPO named without a quant or file, as the Hub lists it now (one listing request and one header read, as
    fit reads it), or ORG/REPO:QUANT and ORG/REPO/FILE as HubModelView; the listing's error where the Hub has no model
    there or cannot be asked (its refusal says why, the Hub not asked again); None offline or for any other
    reference."""
    from localgen import hub
    from localgen.cli_model_hub_quant import hub_model_view
    from localgen.config import settings
    from localgen.errors import HubError, LocalgenError
    from localgen.quant_choice import quant_groups
    from localgen.registry import hub_target, load_registry

    registry = load_registry(settings().user_registry)
    ref = registry.reference(text)
    if ref.kind not in ("repo", "file") or settings().offline or hub.is_offline():
        return None
    if ref.quant is not None or ref.filename is not None:
        return hub_model_view(ref, registry.spec_for(ref))
    repo = hub_target(ref, registry.spec_for(ref))[0]
    try:
        groups = quant_groups(hub.list_gguf_files(repo, keep=True), repo, explain=True)
    except HubError as exc:
        return exc
    except LocalgenError:
        return None
    if not groups:
        return None
    return _read_smallest(groups)


def _read_smallest(groups: Sequence[tuple[HubFile, ...]]) -> HubView:
    """The view of a repo's quants, smallest first, with the header of the smallest that has bytes and can be read;
    where none can, the smallest's, with why it cannot."""
    from localgen.errors import LocalgenError
    from localgen.quant_choice import hub_header

    quants = tuple((group[0].quant or group[0].filename, sum(f.size for f in group)) for group in groups)
    unread: HubView | None = None
    for group in [group for group in groups if group[0].size] or groups[:1]:
        read_from = group[0].quant or group[0].filename
        try:
            return HubView(group[0].repo, quants, read_from, hub_header(group))
        except LocalgenError as exc:
            unread = unread or HubView(group[0].repo, quants, read_from, None, problem=exc.message)
    assert unread is not None
    return unread


def show_hub_view(view: HubView | HubModelView, *, template: bool = False, json_output: bool) -> None:
    """Print a Hub repo's view as `models show` prints a model (--json: its keys, `quants` added; --template: the
    header's chat template), or one quant or file of it (show_hub_model)."""
    from localgen import console
    from localgen.cli_model_hub_quant import HubModelView, show_hub_model

    if isinstance(view, HubModelView):
        show_hub_model(view, template=template, json_output=json_output)
        return
    if template:
        print_hub_template(view.repo, view.header[0] if view.header else None, view.problem)
        return

    info, shape = view.header if view.header else (None, None)
    counts = {"context_length": shape.context_length, "layers": shape.n_layer,
              "embedding_size": shape.n_embd} if shape else {}
    license_ = str(info.metadata.get("general.license", "unknown")) if info else None
    if json_output:
        console.print_json({
            "name": view.repo, "architecture": shape.architecture if shape else None,
            "parameters": (shape.parameter_count or None) if shape else None, "quant": None,
            **{key: counts.get(key) or None for key in ("context_length", "layers", "embedding_size")},
            "chat_template": bool(info.chat_template) if info else None, "license": license_,
            **dict.fromkeys(("size", "shards", "missing_shards", "sha256", "source")), "verified": False,
            **dict.fromkeys(("path", "fits", "plan")), "problem": view.problem, "downloaded": False, "partial": None,
            "entry": None,
            "quants": [{"quant": label, "size": size} for label, size in view.quants]}, indent=2)
        return
    quants = ", ".join(f"{label} ({binary_size(size)})" for label, size in view.quants)
    header: list[tuple[str, str]] = [("header", f"not readable: {view.problem}")]
    if info is not None and shape is not None:
        header = [("architecture", shape.architecture), ("parameters", parameters_text(shape.parameter_count)),
                  *((key.replace("_", " "), f"{value:,}" if value else "unknown") for key, value in counts.items()),
                  ("chat template", "yes" if info.chat_template else "no (plain completion)"),
                  ("license", license_ or "unknown")]
    from localgen.offline_words import localgen_command, pull_command

    pull, fit = pull_command(view.repo), localgen_command("fit", view.repo)
    console.print_fields([
        ("name", view.repo), ("quants", f"{quants} (on the Hub)"), *header,
        ("read from", f"the header of {view.read_from} on the Hub"),
        ("downloaded", f"no (`{pull}` downloads the quant that fits best here; `{fit}` compares them)"
                       if info is not None else
                       f"no (no quant's header on the Hub can be read, so none can be said to fit here; `{fit}` says "
                       "why of each)")])


def parameters_text(count: int) -> str:
    """A parameter count in millions, or unknown where the header counts none (a split model's tensorless shard)."""
    return f"{count / 1e6:,.1f} M" if count else "unknown"


def count_text(value: int | None) -> str:
    """A count from a GGUF header as `models show` prints it: `unknown` where the header does not give it."""
    return f"{value:,}" if value else "unknown"


def print_hub_template(name: str, info: GGUFInfo | None, problem: str | None) -> None:
    """Print the chat template of a header read from the Hub (info; None: not readable, for the problem said) as
    `models show --template` prints a downloaded model's."""
    from localgen.errors import LocalgenError

    if info is None:
        raise LocalgenError(f"{name}'s header on the Hub is not readable: {problem}")
    print_template(name, info.chat_template)


def print_template(name: str, template: str | None) -> None:
    """Print a model's chat template byte for byte (a terminal is shown its control characters), or fail without one."""
    import sys

    from localgen.control_chars import terminal_safe
    from localgen.errors import LocalgenError
    from localgen.output_writes import write_out

    if not template:
        raise LocalgenError(f"{name} has no chat template", hint="it runs as plain completion")
    text = template.rstrip("\n") + "\n"  # a terminal shows its control characters; a pipe gets them
    write_out(sys.stdout, terminal_safe(text) if sys.stdout.isatty() else text)
