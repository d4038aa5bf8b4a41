"""Every sampler setting (SamplingParams' fields but grammar) reaches the sampler from an option of the same name:
each command whose options name any of them names all of them, and a renamed one is a mistake the suite finds, where
the setting was left at its default unsaid."""

from __future__ import annotations

import pytest
import typer

from localgen.cli import app
from localgen.cli_options import sampling_from
from localgen.params import SamplingParams

SAMPLER_OPTIONS = {"temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "presence_penalty",
                   "frequency_penalty", "seed"}


def _contexts(group: typer.core.TyperGroup, parent: typer.Context) -> list[typer.Context]:
    """A context of each command and subcommand of the app, its options parsed from no words (their defaults)."""
    found = []
    for name, command in group.commands.items():
        ctx = command.make_context(name, [], parent=parent, resilient_parsing=True)
        found += _contexts(command, ctx) if isinstance(command, typer.core.TyperGroup) else [ctx]
    return found


def test_each_command_with_a_sampler_option_has_them_all_for_sampling_from() -> None:
    """A command whose options name a sampler setting gives sampling_from every one, as the command line has them."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    sampling = {ctx.info_name: sampling_from(ctx) for ctx in _contexts(group, group.make_context("localgen", ["run"]))
                if SAMPLER_OPTIONS & set(ctx.params)}
    assert set(sampling) == {"run", "chat"}
    assert all(settings == SamplingParams() for settings in sampling.values()), sampling


def test_a_sampler_setting_with_no_option_of_its_name_is_a_mistake_said_by_name() -> None:
    """With --top-k renamed, run's top_k was left at its default, the option given taken for nothing."""
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    ctx = command.make_context("run", ["--top-k", "5", "hi"])
    assert sampling_from(ctx).top_k == 5
    del ctx.params["top_k"]  # as a renamed option leaves it
    with pytest.raises(TypeError, match=r"`localgen run` has no option named as SamplingParams' top_k"):
        sampling_from(ctx)


def test_the_sampler_options_are_samplingparams_fields_but_grammar() -> None:
    """The list above is SamplingParams' own: a new field needs an option of its name in run and chat."""
    from dataclasses import fields

    assert {f.name for f in fields(SamplingParams)} - {"grammar"} == SAMPLER_OPTIONS
