"""Start `python -m localgen` children by fork from a process whose interpreter is up and whose imports are done,
so that a test's CLI run skips that part of a start (run by conftest: the suite starts localgen a thousand times).

What is imported ahead does the same whatever a child's environment: localgen's command line, runner, engine and
chat (the engine's import sets one environment variable, set again in each child), their third-party and standard
modules; not huggingface_hub, which reads its settings from the environment as it is imported (a child imports it
when it needs it). Each child then sets up as a fresh `python -m localgen` would be: its own environment, folder,
standard streams and CPUs, the resource limits its request gives (as `ulimit -d` before a fresh start sets them, but
set just before localgen runs: what the zygote holds counts against them, which is more than a fresh start of a run
holds, as the chat's modules are imported ahead too: about 17 MiB of VmData more for `run`, 1-4 MiB for `chat` and
4 more for rich and markdown-it, which a chat imports as it shows its first answer (some 0.1 s of every chat's); and
no failure can come in Python's own start or those imports, so a test of a limit near them starts afresh),
localgen's __main__ run as -m runs it, and the interpreter's own exit. Over a Unix socket: a request (JSON) with the
child's three standard streams as passed descriptors; the replies are the child's pid, then its exit status. A
watched request's child (a test's Popen, tests/forked_popen.py, or a chat in a pty for pexpect, tests/forked_pty.py)
has a watcher forked for it (the zygote goes on serving meanwhile) as its parent, which sends its pid and wait status
over a socket the request passed; a pty's child gets the pty's end as its three streams and its controlling terminal,
in a session of its own. What a child cannot have of its own is the zygote's, as the worker had it when the zygote
started: the limits its request does not give, its umask, its string hash seed, what the C libraries read from the
environment as they load (conftest starts such a run afresh), the folder rich's tracebacks name files from (localgen
shows none); a traceback shows this file's frames first. The
zygote's own objects are frozen out of the garbage collector before it serves (gc.freeze): a child's collections,
and its exit's above all, would touch each of them and so copy every page of the zygote's memory (a child's
`--version` took twice as long).
"""

from __future__ import annotations

import fcntl
import gc
import importlib
import io
import json
import os
import resource
import runpy
import socket
import sys
import termios
import time
import types

AHEAD = (
    "typer", "jinja2", "markupsafe", "certifi", "shellingham", "annotated_doc", "typing_extensions",
    "ctypes", "dataclasses", "datetime", "decimal", "difflib", "fractions", "hashlib", "hmac", "inspect",
    "ipaddress", "json", "logging", "lzma", "bz2", "pathlib", "pickle", "platform", "random", "secrets",
    "selectors", "shlex", "shutil", "signal", "statistics", "subprocess", "tempfile", "textwrap", "threading",
    "tomllib", "unicodedata", "urllib.parse", "uuid", "zipfile",
    "localgen.cli", "localgen.cli_run", "localgen.runner", "localgen.engine", "localgen.cli_chat_flow", "localgen.repl",
    "localgen.launcher", "localgen.cli_run_flow", "localgen.run_conversation", "localgen.last_run",
    "localgen.cli_output", "localgen.stdout_reader", "localgen.interrupt_echo", "localgen.load_locks",
    "localgen.promptcache", "localgen.template_bounded", "localgen.template_compare", "localgen.model_names",
    "localgen.hub_names", "localgen.shards_missing", "jinja2.sandbox",
    "jinja2.ext",  # what a run imports as it goes (test_conftest checks it)
    "localgen.markdown_render", "localgen.conversation_saveable", "prompt_toolkit.input.vt100",
    "prompt_toolkit.patch_stdout", "prompt_toolkit.key_binding.bindings.search", "rich.live",  # and a chat's answer
)


def serve(sock: socket.socket) -> tuple[dict, list[int]]:
    """Fork a child for each request and report its pid and exit status; return, in a child, its request."""
    while True:
        message, fds, _flags, _address = socket.recv_fds(sock, 1 << 20, 4)  # three streams and a reply socket
        if not message:
            sys.exit(0)  # the test worker is gone
        request = json.loads(message)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sock.close()
            if request.get("watched"):
                _watch(fds.pop())
            return request, fds
        if request.get("watched"):  # its watcher reports to the test; this first fork ends at once
            for fd in fds:
                os.close(fd)
            os.waitpid(pid, 0)
            continue
        for fd in fds:
            os.close(fd)
        sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        sock.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


def _watch(reply_fd: int) -> None:
    """In a watched request's fork: fork again (the zygote waits for the first fork alone), fork the child, and, as
    its parent, send its pid with a pidfd of it (signals sent through it reach this child or none), then its wait
    status (the test cannot wait for it); return in the child."""
    if os.fork():
        os._exit(0)
    reply = socket.socket(fileno=reply_fd)
    child = os.fork()
    if child == 0:
        reply.close()
        return
    os.closerange(0, reply_fd)  # the streams passed (a pty, pipes) and the standard ones are the child's alone
    os.closerange(reply_fd + 1, max(int(name) for name in os.listdir("/proc/self/fd")) + 1)
    socket.send_fds(reply, [json.dumps({"pid": child}).encode()], [os.pidfd_open(child)])
    _, status = os.waitpid(child, 0)
    reply.sendall(json.dumps({"status": status}).encode())
    os._exit(0)


def become_localgen(request: dict, fds: list[int]) -> None:
    """Set this forked process up as `python -m localgen ARGS` started fresh would be, and run localgen (in a pty:
    as the leader of a session of its own whose controlling terminal the pty is)."""
    if request.get("pty"):
        os.setsid()
        fcntl.ioctl(fds[0], termios.TIOCSCTTY, 0)
        fds = fds * 3
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, max(int(name) for name in os.listdir("/proc/self/fd")) + 1)  # as subprocess's close_fds
    sys.stdin, sys.stdout, sys.stderr = (_standard_stream(fd, old) for fd, old in enumerate(
        (sys.stdin, sys.stdout, sys.stderr)))
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    quiet_native_aborts()  # what importing localgen.engine.native does to the environment, done again in this one
    os.sched_setaffinity(0, request["cpus"])
    sys.argv = ["-m", *request["args"]]
    sys.path[0] = request["cwd"]
    python_path = [entry for entry in request["env"].get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[1:1] = [entry for entry in python_path if entry not in sys.path]  # after the folder, as at a start
    sys.modules["__main__"] = types.ModuleType("__main__")
    for name, limit in request.get("limits", {}).items():  # e.g. {"RLIMIT_DATA": bytes}: soft and hard, as ulimit sets
        resource.setrlimit(getattr(resource, name), (limit, limit))
    runpy._run_module_as_main("localgen", alter_argv=True)  # type: ignore[attr-defined]  (what -m runs)


def _standard_stream(fd: int, old: io.TextIOWrapper) -> io.TextIOWrapper:
    """A standard stream over fd made as the interpreter makes it at its start (its stream objects know whether
    their file can seek, and the zygote's were made over /dev/null), in the encoding the zygote's has."""
    unbuffered = fd > 0 and old.write_through  # python -u, PYTHONUNBUFFERED: the zygote's own were made so
    buffer = open(fd, "wb" if fd else "rb", buffering=0 if unbuffered else -1, closefd=False)  # noqa: SIM115
    raw = buffer if unbuffered else buffer.raw
    raw.name = f"<{('stdin', 'stdout', 'stderr')[fd]}>"
    stream = io.TextIOWrapper(buffer, encoding=old.encoding, errors=old.errors, newline="\n", write_through=unbuffered,
                              line_buffering=not unbuffered and (fd == 2 or raw.isatty()))
    stream.mode = "w" if fd else "r"
    return stream


def build_commands_ahead() -> None:
    """Build the click commands of localgen's Typer app here, once (cli_args.click_command keeps them while the app
    keeps its commands): each child then finds them built, where each built them afresh (20-40 ms)."""
    from localgen.cli import app
    from localgen.cli_args import click_command

    click_command(app)


if __name__ == "__main__":
    sys.path[0] = os.getcwd()  # the checkout it was started in (as -m has it), not tests/: its localgen, not another
    for name in AHEAD:
        importlib.import_module(name)
    build_commands_ahead()
    if "huggingface_hub" in sys.modules:  # its settings would be the zygote's environment's in every child
        sys.exit("tests/zygote.py: importing localgen ahead imported huggingface_hub; import less ahead")
    from localgen.engine.native import quiet_native_aborts
    gc.freeze()  # the imports' objects: a child's collections, its exit's above all, pass them over, copying no page
    become_localgen(*serve(socket.socket(fileno=int(sys.argv[1]))))
