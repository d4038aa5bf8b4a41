"""--offline, turned on for the command that takes it while it runs (config.offline_given)."""

from __future__ import annotations

from localgen.config import offline_given, settings
from localgen.runner import ModelOptions
from localgen.session_room import _loading_options


def test_a_chat_s_restart_command_keeps_its_offline_flag() -> None:
    """The command that starts a chat again (a larger context, another model) keeps chat --offline, as it keeps
    --no-gpu; LOCALGEN_OFFLINE=1, in the environment still, is not typed."""
    with offline_given(True):
        assert _loading_options(ModelOptions(no_gpu=True), same_model=True) == ["--no-gpu", "--offline"]
    assert _loading_options(ModelOptions(no_gpu=True), same_model=True) == ["--no-gpu"]
    assert not settings().offline_flag
