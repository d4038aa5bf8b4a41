"""A Hugging Face Hub-protocol HTTP server on 127.0.0.1 for tests, and fixtures that point at it.

It serves what huggingface_hub's client really calls (hub_handler.py answers each request). Per test it can serve
corrupted bytes, drop the connection after N bytes, hold or stall a body, answer with a status (404 repo, 401 gated,
500...), list extra (hostile) file names, slow down, and it logs every request.
"""

from __future__ import annotations

import hashlib
import locale
import os
import secrets
import struct
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from hub_handler import Request, make_handler

REPO_ROOT = Path(__file__).resolve().parent.parent
CHUNK = 256 * 1024


def git_blob_id(data: bytes) -> str:
    """The git object id of a blob (what the Hub reports as blobId / ETag for non-LFS files)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


_FILE_SHA256: dict[tuple[str, int, int, int, int], str] = {}  # (path, inode, size, mtime, ctime) -> its sha256


def file_sha256(source: bytes | Path) -> str:
    """sha256 of bytes or of a file: a file's is kept for the process while it stays as it was (the bundled model,
    94 MiB, is served by many tests and was hashed again for each, a third of a second of CPU every time)."""
    if isinstance(source, bytes):
        return hashlib.sha256(source).hexdigest()
    key = _file_state(source)
    if key in _FILE_SHA256:
        return _FILE_SHA256[key]
    digest = hashlib.sha256()
    with source.open("rb") as handle:
        while chunk := handle.read(8 * 1024 * 1024):
            digest.update(chunk)
    if _file_state(source) == key:  # not rewritten while it was read
        _FILE_SHA256[key] = digest.hexdigest()
    return digest.hexdigest()


def _file_state(path: Path) -> tuple[str, int, int, int, int]:
    """What changes when a file is replaced or written: its real path, inode, size, mtime and ctime."""
    stat = path.stat()
    return str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


@dataclass
class HubRepo:
    """One repo the server knows: files (bytes or a path served from disk) at one commit."""

    files: dict[str, bytes | Path]
    commit: str = field(default_factory=lambda: secrets.token_hex(20))
    non_lfs: set[str] = field(default_factory=set)
    extra_siblings: list[str] = field(default_factory=list)
    _sha: dict[str, str] = field(default_factory=dict)

    def size(self, name: str) -> int:
        """Byte size of a file."""
        src = self.files[name]
        return len(src) if isinstance(src, bytes) else src.stat().st_size

    def sha256(self, name: str) -> str:
        """sha256 of a file (cached)."""
        if name not in self._sha:
            self._sha[name] = file_sha256(self.files[name])
        return self._sha[name]

    def etag(self, name: str) -> str:
        """The ETag the Hub gives: the sha256 for LFS files, the git blob id otherwise."""
        if name in self.non_lfs:
            src = self.files[name]
            return git_blob_id(src if isinstance(src, bytes) else src.read_bytes())
        return self.sha256(name)


class HubServer:
    """The loopback Hub. Configure it through its attributes; read `requests` to count calls."""

    def __init__(self) -> None:
        self.repos: dict[str, HubRepo] = {}
        self.requests: list[Request] = []
        self.status: dict[str, tuple[int, str | None]] = {}   # repo -> (status, X-Error-Code)
        self.corrupt: set[tuple[str, str]] = set()            # (repo, file) served with flipped bytes
        self.corrupt_gets: int | None = None                   # ... in only this many GETs (None: in every one)
        self.abort_after: dict[tuple[str, str], int] = {}     # (repo, file) -> drop the connection at byte N
        self.aborts_left = 1                                   # how many GETs are dropped
        self.down_after_abort = False                          # after a drop, answer 503 to everything
        self.delay_s = 0.0                                     # before every response
        self.delay_only = ""                                   # ... or only those whose path holds this text
        self.delayed = 0                                       # how many requests the delay held
        self.delay_until: threading.Event | None = None       # ... set: they wait for it instead (60 s at most)
        self.bytes_per_s: float | None = None                  # throttle file bodies
        self.chunk_size = CHUNK                                # bytes per write of a file body
        self.hold_body_until_heads = 0                         # GETs wait until this many HEADs came
        self.hold_body_at: dict[tuple[str, str], int] = {}     # (repo, file) -> its body stops at byte N ...
        self.body_released = threading.Event()                 # ... until this is set
        self.stall_at: dict[tuple[str, str], int] = {}         # (repo, file) -> every body sends nothing past byte N
        self.ignore_range = False                              # answer a Range request with the whole file (200)
        self.bytes_sent: dict[tuple[str, str], int] = {}
        self.down = False
        self.retry_after: int | None = None                    # a 503 asks to be retried after N s (None: an outage's)
        self.listing_page: bytes | None = None                 # an HTML page instead of the repo info (a proxy's)
        self.head_status: int | None = None                    # every HEAD answered so (its metadata failing)
        self._lock = threading.Condition()
        self._in_flight = 0                                    # requests being answered right now
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="hub-server", daemon=True)

    @property
    def url(self) -> str:
        """The endpoint to put in HF_ENDPOINT."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def add_repo(self, repo: str, files: dict[str, bytes | Path], **kwargs: object) -> HubRepo:
        """Serve a repo."""
        self.repos[repo] = HubRepo(files=dict(files), **kwargs)  # type: ignore[arg-type]
        return self.repos[repo]

    def spelled(self, repo: str) -> str:
        """The repo as it was added, whatever the case it is asked in: the Hub's repo ids ignore case."""
        if repo in self.repos or repo in self.status:
            return repo
        return next((name for name in (*self.repos, *self.status) if name.lower() == repo.lower()), repo)

    def count(self, method: str | None = None, contains: str = "") -> int:
        """How many requests matched, once the ones being answered are logged (a client can have read a whole
        response before the handler thread logs it)."""
        with self._lock:
            self._lock.wait_for(lambda: self._in_flight == 0, timeout=2.0)
            return self.count_logged(method, contains)

    def answered(self) -> list[Request]:
        """Every request, once the ones being answered are logged (see count)."""
        with self._lock:
            self._lock.wait_for(lambda: self._in_flight == 0, timeout=2.0)
            return list(self.requests)

    def count_logged(self, method: str | None = None, contains: str = "") -> int:
        """How many logged requests matched, without waiting (for the handlers themselves)."""
        with self._lock:
            return sum(1 for r in self.requests if (method is None or r.method == method) and contains in r.path)

    @property
    def in_flight(self) -> int:
        """Requests being answered right now."""
        with self._lock:
            return self._in_flight

    def begin(self) -> None:
        """A request arrived."""
        with self._lock:
            self._in_flight += 1

    def log(self, request: Request) -> None:
        """Record an answered request."""
        with self._lock:
            self.requests.append(request)
            self._in_flight -= 1
            self._lock.notify_all()

    def add_sent(self, key: tuple[str, str], n: int) -> None:
        """Count body bytes sent for a file."""
        with self._lock:
            self.bytes_sent[key] = self.bytes_sent.get(key, 0) + n

    def start(self) -> HubServer:
        """Start serving in a thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# ----------------------------------------------------------------------------- environment helpers


def server_env(server: HubServer, tmp_path: Path) -> dict[str, str]:
    """Environment for a process that talks to this server with isolated caches."""
    return {
        "HF_ENDPOINT": server.url,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
        "LOCALGEN_HOME": str(tmp_path / "localgen"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
        "HF_HUB_DOWNLOAD_TIMEOUT": "5",
        "PYTHONPATH": str(REPO_ROOT),
    }


_CLEARED = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "LOCALGEN_OFFLINE", "TRANSFORMERS_OFFLINE",
            "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME")


def child_env(server: HubServer, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The full environment for a subprocess."""
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    return {**env, **server_env(server, tmp_path), **extra}


def run_python(code: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a Python snippet in a fresh interpreter (fresh huggingface_hub constants)."""
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT)


def run_cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `python -m localgen ARGS` in a subprocess with this whole environment (stdin /dev/null, text output as
    subprocess.run's text=True reads it), forked by tests/zygote.py as conftest's run_localgen forks its children."""
    from tests.conftest import run_localgen_in

    result = run_localgen_in(env, *args, timeout=timeout)
    return subprocess.CompletedProcess([sys.executable, "-m", "localgen", *args], result.returncode,
                                       _as_text(result.stdout), _as_text(result.stderr))


def pulled_too_big(server: HubServer, env: dict[str, str], repo: str) -> tuple[dict[str, str], str, str]:
    """REPO with a Q8_0 and a Q4_K_M file, neither fitting a machine of 8 MiB (each is said to need some 11 MiB at
    the least), its Q8_0 pulled there: that machine's environment, and the warning the pull gave that a run will
    refuse it, split before its last clause (which quant fits instead) and that clause."""
    server.add_repo(repo, {"m-Q8_0.gguf": make_gguf_bytes("q8", 2**17), "m-Q4_K_M.gguf": make_gguf_bytes("q4")})
    small = {**env, "LOCALGEN_MEMORY_LIMIT": "8MiB"}
    first = run_cli(small, "pull", f"{repo}:Q8_0")
    assert first.returncode == 0, first.stderr
    warned, _, instead = first.stderr.splitlines()[0].rpartition("; ")
    assert warned.startswith(f"localgen: warning: a run will refuse {repo}:Q8_0 here: "), first.stderr
    return small, warned, instead


def _as_text(output: bytes) -> str:
    """A child's output as subprocess.run(text=True) gives it: in the locale's encoding, newlines universal."""
    return output.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


@dataclass
class HubEnv:
    """What an in-process test gets: the server, the caches, and the env for subprocesses."""

    server: HubServer
    tmp_path: Path
    hf_cache: Path
    localgen_home: Path
    env: dict[str, str]

    def blobs(self, repo: str) -> list[Path]:
        """Every entry in a repo's blobs folder (complete or not)."""
        folder = self.hf_cache / ("models--" + repo.replace("/", "--")) / "blobs"
        return sorted(folder.iterdir()) if folder.is_dir() else []

    def snapshot_files(self, repo: str) -> list[Path]:
        """Every entry under a repo's snapshots."""
        folder = self.hf_cache / ("models--" + repo.replace("/", "--")) / "snapshots"
        return sorted(p for p in folder.rglob("*") if not p.is_dir()) if folder.is_dir() else []

    def incomplete_files(self) -> list[Path]:
        """Any *.incomplete file anywhere in the HF cache."""
        return sorted(self.hf_cache.rglob("*.incomplete")) if self.hf_cache.is_dir() else []


@pytest.fixture(name="loopback_hub")
def loopback_hub_fixture() -> Iterator[HubServer]:
    """A running loopback Hub."""
    with HubServer() as server:
        yield server


@pytest.fixture(name="hub")
def hub_fixture(loopback_hub: HubServer, tmp_path: Path) -> tuple[HubServer, dict[str, str]]:
    """A running loopback Hub and the environment of a localgen child pointed at it (child_env)."""
    return loopback_hub, child_env(loopback_hub, tmp_path)


@pytest.fixture(name="hubenv")
def hubenv_fixture(loopback_hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HubEnv:
    """Point this process's huggingface_hub and localgen at the loopback Hub and temporary caches (see point_at)."""
    return point_at(loopback_hub, tmp_path, monkeypatch)


def point_at(loopback_hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HubEnv:
    """Point this process's huggingface_hub and localgen at the loopback Hub and temporary caches until monkeypatch
    is undone. huggingface_hub reads its environment once at import (and some of its modules copy its constants), so
    it is imported first, under the environment there was, and the constants it uses at call time are patched."""
    import huggingface_hub.utils  # noqa: F401  (its modules' copies of constants: HF_HUB_CACHE, ENDPOINT, ...)
    from huggingface_hub import constants, file_download

    for key in _CLEARED:
        monkeypatch.delenv(key, raising=False)
    env = server_env(loopback_hub, tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(constants, "ENDPOINT", loopback_hub.url)
    template = loopback_hub.url + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setattr(constants, "HF_HOME", env["HF_HOME"])
    monkeypatch.setattr(constants, "HF_HUB_CACHE", env["HF_HUB_CACHE"])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    # With telemetry on, huggingface_hub 2.x GETs {ENDPOINT}/api/agent-harnesses once per process to build
    # its user agent: an extra request in whichever test first calls the Hub (utils/_detect_agent.py).
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", True, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 5, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 5, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf" / "token"), raising=False)
    # A dropped or stalled download is resumed at once, not a second later: a pause of huggingface_hub's own that
    # nothing here changes, and a second of each test that drops a connection.
    monkeypatch.setattr(file_download, "time", time_without_sleep())
    from localgen import config

    monkeypatch.setattr(config, "_settings", None)
    return HubEnv(server=loopback_hub, tmp_path=tmp_path, hf_cache=Path(env["HF_HUB_CACHE"]),
                  localgen_home=Path(env["LOCALGEN_HOME"]), env=child_env(loopback_hub, tmp_path))


def time_without_sleep(waits: list[float] | None = None) -> types.SimpleNamespace:
    """The time module, for a module's global `time`, but for its sleep, which returns at once (noting each wait asked
    for in waits): whatever else the module asks of time, now or in a later version, is time's own."""
    stand_in = types.SimpleNamespace(**vars(time))
    stand_in.sleep = (lambda _seconds: None) if waits is None else waits.append
    return stand_in


def stopped_pull(hubenv: HubEnv, repo: str = "test/Cut-GGUF", *, other_quant: bool = True) -> None:
    """Serve repo (cut-Q8_0.gguf of 4 MiB, and cut-Q4_0.gguf where other_quant) and stop a pull of its Q8_0 part way:
    a part of it is kept."""
    from localgen import hub
    from localgen.errors import HubError

    files = {"cut-Q8_0.gguf": make_gguf_bytes("cut", 4 * 2**20)}
    hubenv.server.add_repo(repo, {**files, **({"cut-Q4_0.gguf": make_gguf_bytes("small")} if other_quant else {})})
    hubenv.server.abort_after[(repo, "cut-Q8_0.gguf")] = 2_500_000  # past a piece of 1 MiB
    hubenv.server.down_after_abort = True  # huggingface_hub's own retry fails too: the part is kept
    with pytest.raises(HubError):
        hub.download_model(repo, quant="Q8_0", filename=None, quiet=True)
    hubenv.server.down = False
    assert hubenv.incomplete_files(), "a part is kept"


def make_gguf_bytes(tag: str, size: int = 64 * 1024, *, shard: tuple[int, int] | None = None) -> bytes:
    """A small GGUF file that passes localgen's header checks (no tensors, general.architecture = llama), padded to
    size with bytes unique per tag; shard (number, count) adds the split metadata of that shard of a split model."""
    key, value = b"general.architecture", b"llama"
    pairs = struct.pack("<Q", len(key)) + key + struct.pack("<IQ", 8, len(value)) + value  # a string (8)
    for name, number in ((b"split.no", shard[0] - 1), (b"split.count", shard[1])) if shard else ():
        pairs += struct.pack("<Q", len(name)) + name + struct.pack("<IH", 2, number)  # a uint16 (2)
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 3 if shard else 1) + pairs
    seed = hashlib.sha256(tag.encode()).digest()
    body = (seed * (size // len(seed) + 1))[: max(size - len(header), 0)]
    return header + body
