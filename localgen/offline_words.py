"""How hints word leaving offline mode: as it was entered (--offline, or the environment's variables), before what
needs the network."""

from __future__ import annotations

from localgen.config import OFFLINE_ENVS, settings


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


def online_pull(reference: str) -> str:
    """The `localgen pull REF` a hint names (reference: as typed, quoted), led, where the environment turns offline mode
    on, by how to unset it: pull takes no --offline, so --offline alone leaves it free to download."""
    pull = f"`localgen pull {reference}`"
    return f"{unset_offline_envs()}, then {pull}" if settings().offline_envs else pull
