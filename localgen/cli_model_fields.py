"""What `localgen models show` prints of a models.toml entry: its keys, and, for an entry none of whose files is here,
what it says of the file and how to download it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from localgen.units import binary_size

if TYPE_CHECKING:
    from localgen.fit import LoadPlan
    from localgen.hub_verify import Pin
    from localgen.partial_downloads import PartialDownload
    from localgen.registry import ModelSpec


def show_undownloaded(reference: str, spec: ModelSpec, quant: str, pin: Pin | None, lacking: str | None, *,
                      part: PartialDownload | None = None, json_output: bool) -> None:
    """`models show` of a registry entry none of whose files is here: what the entry says (pin: what it pins of the
    file), and how to download it (part: what a stopped pull kept of it, which a pull resumes), or what the repo
    lacked of it when localgen last listed it."""
    from localgen import console
    from localgen.cli_model_hub_quant import not_downloaded
    from localgen.partial_downloads import partial_json

    size, sha = (pin.size, pin.sha256) if pin else (None, None)
    if json_output:
        console.print_json({
            "name": spec.name, "architecture": None, "parameters": None, "quant": quant or None,
            **dict.fromkeys(("context_length", "layers", "embedding_size")),
            "chat_template": True if spec.template is not None else None, "license": spec.license,
            "size": size, **dict.fromkeys(("shards", "missing_shards")), "sha256": sha,
            "source": None, "verified": False, **dict.fromkeys(("path", "fits", "plan")), "problem": lacking,
            "downloaded": False, "partial": partial_json(part, reference), "entry": entry_json(spec)},
            indent=2)
        return
    console.print_fields([
        ("name", spec.name), *entry_fields(spec), ("quant", quant or "unknown"),
        *([("chat template", template_field(spec, None))] if spec.template is not None else []),
        *([("license", spec.license)] if spec.license else []),
        *([("file size", f"{binary_size(size)} ({size:,} bytes)")] if size else []),
        *([("sha256", sha)] if sha else []),
        ("downloaded", f"no ({lacking})" if lacking else not_downloaded(reference, part)),
    ])


def template_in_use(spec: ModelSpec | None, header: str | None) -> str | None:
    """The chat template a run uses: a models.toml entry's, in place of the model's own (header's), else that."""
    return spec.template if spec is not None and spec.template is not None else header


def template_field(spec: ModelSpec | None, header: str | None) -> str:
    """The `chat template` field: whether a run has one, and whose it is where an entry's stands in for the model's."""
    if spec is not None and spec.template is not None:
        return "yes, the entry's, in place of the model's (--template prints it)"
    return "yes (--template prints it)" if header else "no (plain completion)"


def entry_fields(spec: ModelSpec, maximum: int | None = None) -> list[tuple[str, str]]:
    """What a models.toml entry says of its model, as `models show` prints it (the keys it gives; a context beyond
    the model's maximum, when its file is here, said to be capped)."""
    from localgen.references import normalize_quant
    from localgen.stopping import escaped

    fields = [("description", spec.description)] if spec.description else []
    if spec.repo:
        fields += [("repo", spec.repo), ("default quant", normalize_quant(spec.quant))]
    if spec.context:
        capped = f" (capped at the model's maximum of {maximum:,})" if spec.context_beyond(maximum) else ""
        fields.append(("default context", f"{spec.context:,}{capped}"))
    if spec.system is not None:
        fields.append(("system prompt", spec.system or "(empty: the chat template leaves out its default)"))
    if spec.settings:
        fields.append(("settings", ", ".join(f"{key} = {value}" for key, value in spec.settings)))
    if spec.stop is not None:
        fields.append(("stop strings", ", ".join(map(escaped, spec.stop)) or "none ([defaults]' are not used)"))
    return [*fields, ("entry", spec.origin)]


def entry_json(spec: ModelSpec) -> dict[str, object]:
    """A models.toml entry as `models show --json` gives it."""
    return {"name": spec.name, "repo": spec.repo or None, "quant": spec.quant or None,
            "path": str(spec.path) if spec.path else None, "context": spec.context, "template": spec.template,
            "license": spec.license,
            "description": spec.description, "system": spec.system, "settings": dict(spec.settings),
            "stop": None if spec.stop is None else list(spec.stop), "defined_in": spec.source}


def load_plan_field(plan: LoadPlan | None, problem: str | None, *, counts_only: str | None = None) -> str:
    """The `load plan` field: the plan and about how much it takes, or why the model does not fit (counts_only: the
    shards of a split model it counts where the others' sizes are not known, "1 of 3 shards")."""
    only = f"counting only the {counts_only} here" if counts_only else None
    if plan is None:
        return f"does not fit: {problem}" + (f" ({only})" if only else "")
    return f"{plan.describe()} (about {binary_size(plan.estimate.total_bytes)}" + (f", {only})" if only else ")")
