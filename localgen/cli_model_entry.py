"""What `localgen models show NAME` prints of a models.toml entry none of whose files is here: online, the Hub's view
of the quant it names, as `models show ORG/REPO:QUANT` prints it, with the entry's keys; offline, or where the Hub
cannot be asked, the entry alone and a line saying why the Hub's view is missing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localgen.cli_model_hub_quant import HubModelView
    from localgen.errors import HubError, ModelNotFoundError
    from localgen.hub_types import HubModel
    from localgen.hub_verify import Pin
    from localgen.registry import ModelSpec

UndownloadedEntry = tuple["ModelSpec", str, "Pin | None", "str | None"]  # resolve.undownloaded_entry's


def show_entry(text: str, entry: UndownloadedEntry, not_here: ModelNotFoundError, *, template: bool,
               json_output: bool) -> None:
    """`models show` of the registry entry text names (entry: what resolve.undownloaded_entry found of it): online, as
    the Hub lists its quant (--template: the header's chat template); else the entry and why the Hub's view is
    missing, said on stderr (--template fails: not_here, the error of a model not downloaded, says why)."""
    from localgen import console
    from localgen.cli_model_fields import show_undownloaded
    from localgen.cli_model_hub import print_template
    from localgen.cli_model_hub_quant import HubModelView, show_hub_model
    from localgen.config import settings
    from localgen.partial_downloads import listed_part
    from localgen.registry import hub_target, load_registry

    spec, quant, pin, lacking = entry
    if template and spec.template is not None:  # the entry's own, which runs use: known without the Hub
        print_template(spec.name, spec.template)
        return
    found = _entry_view(text, spec, quant, pin) if lacking is None else None
    if isinstance(found, HubModelView):
        show_hub_model(found, template=template, json_output=json_output)
        return
    lack = found if isinstance(found, tuple) else None  # the repo lacks it now: the Hub's error, and what it says
    if lack is not None:
        lacking, found = lack[1], None
    if template:
        if lacking:  # no pull can fetch it: what the Hub has said, with a hint that can work (the entry to fix)
            _refuse_lacking(text, spec, lack)
        if not settings().offline and found:  # offline: not_here says so, and how to go online
            not_here.message = f"{not_here.message}, and {found}"
            not_here.args = (not_here.message,)
        raise not_here
    if found is not None:
        name = f"{spec.repo}:{quant}" if quant else spec.repo
        console.say(f"localgen: the Hub's view of {name} (its file size, header and load plan) is not shown: "
                    f"{found}")
    part = listed_part(*hub_target(load_registry(settings().user_registry).reference(text), spec))  # a stopped pull's
    show_undownloaded(text, spec, quant, pin, lacking, part=part, json_output=json_output)


def _refuse_lacking(text: str, spec: ModelSpec, lack: tuple[HubError, str] | None) -> None:
    """Refuse the entry text names, whose repo lacks its quant or is gone (lack: as the Hub just said it; else as
    localgen last listed the repo, asked again online), as a run refuses it, its hint the entry's fix, not a pull."""
    from localgen.config import settings
    from localgen.hub_lack import known_lack, lacking_refusal
    from localgen.registry import hub_target, load_registry

    ref = load_registry(settings().user_registry).reference(text)
    lack = lack or known_lack(*hub_target(ref, spec))
    if lack is not None:
        raise lacking_refusal(ref, spec, lack) from None


def _entry_view(text: str, spec: ModelSpec, quant: str, pin: Pin | None) -> (
        HubModelView | tuple[object, str] | str):
    """The entry's quant (quant: as text names it) as the Hub lists it now, named as `models` names it; what its repo
    lacks of it (as hub_lack gives it); or why the Hub was not asked, or could not be (the end of a line)."""
    from localgen.cli_model_hub_quant import listed_model, model_view
    from localgen.config import settings
    from localgen.hub_types import HubModel, RepoNotFoundError
    from localgen.references import normalize_quant
    from localgen.registry import load_registry

    if settings().offline:
        envs = " and ".join(settings().offline_envs)
        why = [*([f"{envs} {'are' if ' and ' in envs else 'is'} set"] if envs else []),
               *(["--offline is given"] if settings().offline_flag else [])]
        return f"localgen is offline ({' and '.join(why)})" if why else "localgen is offline"
    ref = load_registry(settings().user_registry).reference(text)
    found = listed_model(ref, spec)
    if isinstance(found, RepoNotFoundError):  # asked: the repo is not there
        return found, found.message
    if not isinstance(found, HubModel):
        return found if isinstance(found, tuple) else f"the Hub could not be asked: {found.message}"
    name = spec.name if quant == normalize_quant(spec.quant) else f"{spec.name}:{quant}"
    return model_view(found, name, spec, typed=text, refused=_pin_refusal(found, pin))


def _pin_refusal(model: HubModel, pin: Pin | None) -> str | None:
    """Why a pull refuses the Hub's file, which the entry's pin does not match (None: it matches, or nothing pinned)."""
    from localgen.errors import LocalgenError
    from localgen.hub_verify import check_pin

    if pin is None:
        return None
    first = model.files[0]
    try:
        check_pin(f"{first.repo}/{first.filename}", first.sha256, first.size, pin)
    except LocalgenError as exc:
        return f"{exc.message}: `localgen pull` refuses it"
    return None
