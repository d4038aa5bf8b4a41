"""What the loopback Hub (hub_server.py) answers: the requests huggingface_hub's client really makes.

- GET /api/models/{org}/{name}[/revision/{rev}]: repo info; with ?blobs=true the siblings carry
  size, blobId and lfs {sha256, size, pointerSize} (HfApi.model_info(files_metadata=True)).
- HEAD and GET /{org}/{name}/resolve/{rev}/{path}: the file, with X-Repo-Commit, ETag,
  X-Linked-Etag and X-Linked-Size (LFS files), Content-Length, and Range requests (206, or 200 where told to
  ignore them); no redirects.

Each answer takes the faults its HubServer is set to: a status, a delay, a dropped, held, stalled, throttled or
corrupted body, a listing that is a web page.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

if TYPE_CHECKING:
    from hub_server import HubServer

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class Request:
    """One request the server received."""

    method: str
    path: str
    range: str | None
    status: int
    at: float = field(default_factory=time.monotonic)  # when the response was finished


def make_handler(server: HubServer) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to one HubServer, which answers as the Hub does, with the faults the server is
    set to."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:
            """Stay quiet."""

        def do_GET(self) -> None:
            self._handle(body=True)

        def do_HEAD(self) -> None:
            self._handle(body=False)

        def _send(self, status: int, headers: dict[str, str], payload: bytes = b"") -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", headers.get("Content-Length", str(len(payload))))
            self.end_headers()
            if payload and self.command != "HEAD":
                self.wfile.write(payload)

        def _error(self, status: int, code: str | None, message: str, extra: dict[str, str] | None = None) -> None:
            headers = {"Content-Type": "application/json", **(extra or {})}
            if code:
                headers["X-Error-Code"] = code
            headers["X-Error-Message"] = message
            self._send(status, headers, json.dumps({"error": message}).encode())

        def _handle(self, body: bool) -> None:
            server.begin()
            url = urlsplit(self.path)
            path = unquote(url.path)
            status = 200
            try:
                if (server.delay_s or server.delay_until is not None) and server.delay_only in path:
                    with server._lock:
                        server.delayed += 1
                    if server.delay_until is not None:
                        server.delay_until.wait(60)
                    else:
                        time.sleep(server.delay_s)
                if server.down:  # an outage's, or a rate limit's where the server is set to ask for a retry
                    status = 503
                    after = {} if server.retry_after is None else {"Retry-After": str(server.retry_after)}
                    self._error(503, None, "Service Unavailable", after)
                elif self.command == "HEAD" and server.head_status is not None:
                    status = server.head_status
                    self._error(status, None, "Internal Error")
                elif path.startswith("/api/models/"):
                    status = self._repo_info(path[len("/api/models/"):], parse_qs(url.query))
                elif "/resolve/" in path:
                    status = self._resolve(path.lstrip("/"), body)
                else:
                    status = 404
                    self._error(404, None, "Not Found")
            except (BrokenPipeError, ConnectionResetError):
                status = -1
            finally:
                server.log(Request(self.command, path, self.headers.get("Range"), status))

        def _override(self, repo: str) -> int | None:
            if repo in server.status:
                code, error_code = server.status[repo]
                self._error(code, error_code, {401: "Access to this repo is restricted", 403: "Forbidden",
                                               404: "Repository not found"}.get(code, "Internal Error"))
                return code
            if repo not in server.repos:
                self._error(404, "RepoNotFound", "Repository not found")
                return 404
            return None

        def _repo_info(self, rest: str, query: dict[str, list[str]]) -> int:
            parts = rest.split("/")
            repo = server.spelled("/".join(parts[:2]))
            overridden = self._override(repo)
            if overridden:
                return overridden
            if server.listing_page is not None:
                self._send(200, {"Content-Type": "text/html"}, server.listing_page)
                return 200
            info = server.repos[repo]
            if len(parts) > 2 and not (parts[2] == "revision" and parts[3] in ("main", info.commit)):
                self._error(404, "RevisionNotFound", "Invalid rev id")
                return 404
            blobs = query.get("blobs", ["false"])[0].lower() == "true"
            siblings = []
            for name in sorted(info.files):
                entry: dict[str, object] = {"rfilename": name}
                if blobs:
                    entry["size"] = info.size(name)
                    entry["blobId"] = info.etag(name) if name in info.non_lfs else secrets.token_hex(20)
                    if name not in info.non_lfs:
                        entry["lfs"] = {"size": info.size(name), "sha256": info.sha256(name), "pointerSize": 134}
                siblings.append(entry)
            for name in info.extra_siblings:
                siblings.append({"rfilename": name, "size": 10, "blobId": "0" * 40,
                                 "lfs": {"size": 10, "sha256": "0" * 64, "pointerSize": 134}})
            payload = {"_id": secrets.token_hex(12), "id": repo, "modelId": repo, "sha": info.commit,
                       "private": False, "gated": False, "disabled": False, "tags": ["gguf"],
                       "siblings": siblings, "lastModified": "2025-01-01T00:00:00.000Z"}
            self._send(200, {"Content-Type": "application/json"}, json.dumps(payload).encode())
            return 200

        def _resolve(self, rest: str, body: bool) -> int:
            repo_part, _, tail = rest.partition("/resolve/")
            repo_part = server.spelled(repo_part)
            overridden = self._override(repo_part)
            if overridden:
                return overridden
            info = server.repos[repo_part]
            revision, _, name = tail.partition("/")
            commit = {"X-Repo-Commit": info.commit}
            if revision not in ("main", info.commit):
                self._error(404, "RevisionNotFound", "Invalid rev id")
                return 404
            if name not in info.files:
                self._error(404, "EntryNotFound", "Entry not found", commit)
                return 404
            size = info.size(name)
            etag = info.etag(name)
            headers = {**commit, "ETag": f'"{etag}"', "Accept-Ranges": "bytes",
                       "Content-Type": "application/octet-stream"}
            if name not in info.non_lfs:
                headers["X-Linked-Etag"] = f'"{etag}"'
                headers["X-Linked-Size"] = str(size)
            start, end, status = 0, size - 1, 200
            match = _RANGE.match(self.headers.get("Range") or "")
            if match and body and not server.ignore_range:
                start = int(match[1]) if match[1] else max(size - int(match[2] or 0), 0)
                end = min(int(match[2]), size - 1) if match[1] and match[2] else size - 1
                if start >= size:
                    self._send(416, {"Content-Range": f"bytes */{size}"})
                    return 416
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            headers["Content-Length"] = str(end - start + 1)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            if body:
                self._stream(repo_part, name, start, end)
            return status

        def _stream(self, repo: str, name: str, start: int, end: int) -> None:
            key = (repo, name)
            info = server.repos[repo]
            src = info.files[name]
            deadline = time.monotonic() + 20
            while server.count_logged("HEAD", name) < server.hold_body_until_heads and time.monotonic() < deadline:
                time.sleep(0.01)
            abort_at = server.abort_after.get(key) if server.aborts_left > 0 else None
            corrupt = key in server.corrupt and server.corrupt_gets != 0
            if corrupt and server.corrupt_gets is not None:
                server.corrupt_gets -= 1
            pos = start
            handle = src.open("rb") if isinstance(src, Path) else None
            try:
                if handle:
                    handle.seek(start)
                while pos <= end:
                    if key in server.stall_at and pos >= server.stall_at[key]:
                        server.body_released.wait(30)  # the headers sent, the body goes quiet
                        return
                    n = min(server.chunk_size, end - pos + 1)
                    if abort_at is not None and pos + n > abort_at:
                        n = max(abort_at - pos, 0)
                    chunk = handle.read(n) if handle else src[pos:pos + n]
                    if corrupt:
                        chunk = bytes(b ^ 0xFF for b in chunk[:64]) + chunk[64:]
                    if chunk:
                        self.wfile.write(chunk)
                        server.add_sent(key, len(chunk))
                        pos += len(chunk)
                    if abort_at is not None and pos >= abort_at:
                        server.aborts_left -= 1
                        if server.down_after_abort:
                            server.down = True
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    if key in server.hold_body_at and pos >= server.hold_body_at[key]:
                        server.body_released.wait(20)
                    if server.bytes_per_s:
                        time.sleep(len(chunk) / server.bytes_per_s)
            finally:
                if handle:
                    handle.close()

    return Handler
