"""`python tests/quick_stdin_note.py ARGS` runs `python -m localgen ARGS` whose quiet pipe is noted, and then read
blocking, after QUICK_NOTE_S rather than inputs.STDIN_QUIET_S (2 s): a test that signals a run once it blocks reading
its stdin waited 2 s for that each time."""

from __future__ import annotations

import os
import runpy
import sys

QUICK_NOTE_S = 0.2

if __name__ == "__main__":
    sys.path[0] = os.getcwd()  # as -m has it: the folder it runs in, not tests/
    import localgen.inputs

    localgen.inputs.STDIN_QUIET_S = QUICK_NOTE_S
    runpy.run_module("localgen", run_name="__main__", alter_sys=True)
