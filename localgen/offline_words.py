"""How hints word leaving offline mode: as it was entered (--offline, or the environment's variables), before what
needs the network."""

from __future__ import annotations

import shlex

from localgen.config import OFFLINE_ENVS, settings


def pull_command(name: str) -> str:
    """The `localgen pull NAME` of a model's name as given (quoted for a shell where it must be: org/repo:it's)."""
    return localgen_command("pull", name)


def localgen_command(command: str, name: str) -> str:
    """A localgen command (pull, fit, models show) a hint names on a model's name as given, quoted for a shell where
    it must be."""
    return f"localgen {command} {shlex.quote(name)}"


def leave_offline() -> str:
    """How to turn offline mode off: drop --offline where the running command was given it, and unset the variables
    that turned it on."""
    names, flag = " and ".join(settings().offline_envs), settings().offline_flag
    if names and flag:
        return f"drop --offline and unset {names} (set in the environment)"
    if names:
        return unset_offline_envs()
    if flag:
        return "drop --offline"
    return f"turn offline mode off (drop --offline, unset {', '.join(OFFLINE_ENVS[:-1])} and {OFFLINE_ENVS[-1]})"


def unset_offline_envs() -> str:
    """How to turn off the offline mode the environment's variables turned on (as a command with no --offline needs)."""
    names = settings().offline_envs
    them = "them" if len(names) > 1 else "it"
    return f"offline mode comes from {' and '.join(names)} in the environment: unset {them}"


def online_pull(reference: str, does: str = "") -> str:
    """The `localgen pull REF` a hint names (reference: as typed, which pull_command quotes), with what it does where
    given ('downloads it'); led, where the environment turns offline mode on, by how to unset it (pull takes no
    --offline, so --offline alone leaves it free to download): 'unset it, then run `localgen pull REF`, which
    downloads it'."""
    return online_command(pull_command(reference), does)


def online_command(command: str, does: str = "") -> str:
    """A command that needs the network (a pull) in a hint, as online_pull gives it."""
    pull = f"`{command}`"
    if settings().offline_envs:
        return f"{unset_offline_envs()}, then run {pull}" + (f", which {does}" if does else "")
    return f"{pull} {does}" if does else pull


def after_leaving_offline(step: str) -> str:
    """A step that needs the network (`run `localgen pull REF``), led by how to leave offline mode as it was entered."""
    return f"{leave_offline()}, then {step}"


def offline_hint(reference: str) -> str:
    """How to get a model offline mode keeps out: leave offline mode as it was entered, then download it (`pull` and
    `fit` reach the Hub themselves: run again; other commands name `pull`)."""
    from localgen.hub_errors import running_command

    again = running_command() in ("pull", "fit")
    return after_leaving_offline("run the command again" if again else f"run `{pull_command(reference)}`")


def checking_pull_hint(reference: str, *, offline: bool) -> str:
    """The pull that checks a copy here against the Hub, downloading it again where it does not match (offline: after
    leaving offline mode); named to `fit` too, whose run online reads the Hub's header and leaves the copy as it is."""
    from localgen.hub_errors import running_command

    if not offline:
        return f"run `{pull_command(reference)}`"
    return after_leaving_offline("run the command again" if running_command() == "pull"
                                 else f"run `{pull_command(reference)}`")
