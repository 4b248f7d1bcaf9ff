"""Loopback stand-ins for GitHub's REST API, for G8's tests: an HTTP server answering recorded
replies per path (and recording what each request carried), and raw socket servers that misbehave
below HTTP (never answer, trickle, never end, never accept)."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional

FIXTURES = Path(__file__).parent / "fixtures" / "g08"
ISSUES = "/repos/NVIDIA/dgx-spark-playbooks/issues"
CONTENTS = "/repos/NVIDIA/dgx-spark-playbooks/contents/nvidia"
PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"[]"
    headers: dict = field(default_factory=dict)  # "{url}" in a value becomes the server's own URL
    delay_s: float = 0.0
    trickle: bool = False  # send the body one byte at a time, slowly
    reason: Optional[str] = None  # the status line's reason text, when not the standard one


@dataclass
class Seen:
    path: str
    authorization: Optional[str]
    host: Optional[str]


class GitHub(ThreadingHTTPServer):
    """Answers ``routes[path]`` (the query dropped; ``page=2`` asks for ``routes["page2"]``)."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, host: str = "127.0.0.1", tls: Optional[ssl.SSLContext] = None):
        super().__init__((host, 0), Handler)
        self.routes: dict = {}
        self.seen: list[Seen] = []
        self.host = host
        self.scheme = "https" if tls else "http"
        if tls:
            self.socket = tls.wrap_socket(self.socket, server_side=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.server_address[1]}"

    def start(self) -> GitHub:
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802
        server: GitHub = self.server  # type: ignore[assignment]
        server.seen.append(Seen(self.path, self.headers.get("Authorization"), self.headers.get("Host")))
        key = "page2" if "page=2" in self.path else self.path.split("?")[0]
        reply = server.routes.get(key, Reply(404, b'{"message": "Not Found"}'))
        time.sleep(reply.delay_s)
        self.send_response(reply.status, reply.reason)
        for k, v in reply.headers.items():
            self.send_header(k, v.replace("{url}", server.url))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        try:
            if reply.trickle:
                for i in range(len(reply.body)):
                    self.wfile.write(reply.body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(0.05)
            else:
                self.wfile.write(reply.body)
        except OSError:
            pass


def recorded(srv: GitHub) -> None:
    """The recorded two pages of open issues and the playbook folders."""
    srv.routes[ISSUES] = Reply(body=fixture("issues_page1.json"),
                               headers={"Link": '<{url}' + ISSUES + '?state=open&per_page=100&page=2>; rel="next", '
                                                '<{url}' + ISSUES + '?state=open&per_page=100&page=2>; rel="last"'})
    srv.routes["page2"] = Reply(body=fixture("issues_page2.json"))
    srv.routes[CONTENTS] = Reply(body=fixture("contents_nvidia.json"))


class RawServer:
    """A TCP server on 127.0.0.1 that misbehaves below HTTP. ``behaviour``:

    - ``silent``: accepts, reads the request, never answers;
    - ``trickle_headers``: starts a status line and headers, then one byte a second forever;
    - ``trickle_body``: headers promising a large body, then one byte a second forever;
    - ``endless_body``: headers without a length, then a JSON array that never ends, fast;
    - ``endless_error``: a 500 whose body never ends;
    - ``stalled``: listens, but never accepts (the kernel completes the handshake);
    - ``backlog_full``: listens with its backlog filled, so new connections are never set up;
    - ``refused``: bound, not listening (connections are refused);
    - ``raw``: answers ``payload`` as it is, then closes.
    """

    def __init__(self, behaviour: str, payload: bytes = b"", tls: Optional[ssl.SSLContext] = None):
        self.behaviour = behaviour
        self.payload = payload
        self.tls = tls
        self.stop_event = threading.Event()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.fillers: list[socket.socket] = []
        self.conns: list[socket.socket] = []
        if behaviour == "backlog_full":
            self.sock.listen(0)
            self._fill_backlog()
        elif behaviour == "stalled":
            self.sock.listen(8)
        elif behaviour != "refused":
            self.sock.listen(8)
            self.sock.settimeout(0.1)
            threading.Thread(target=self._accept_loop, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.sock.getsockname()[1]}"

    def _fill_backlog(self) -> None:
        """Connect without accepting until a connection no longer completes: the queue is full."""
        for _ in range(64):
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            filler.connect_ex(self.sock.getsockname())
            self.fillers.append(filler)
            time.sleep(0.05)
            try:
                filler.send(b"")
                filler.getpeername()
            except OSError:
                return  # this one never completed: the backlog is full
        raise RuntimeError("could not fill the listen backlog")

    def _accept_loop(self) -> None:
        while not self.stop_event.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        stop = self.stop_event
        try:
            if self.tls:
                conn = self.tls.wrap_socket(conn, server_side=True)
                self.conns.append(conn)
            conn.recv(65536)  # the request
            if self.behaviour == "raw":
                conn.sendall(self.payload)
            elif self.behaviour == "silent":
                stop.wait()
            elif self.behaviour == "trickle_headers":
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not stop.wait(1.0):
                    conn.sendall(b"a")
            elif self.behaviour == "trickle_body":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n[")
                while not stop.wait(1.0):
                    conn.sendall(b" ")
            elif self.behaviour in ("endless_body", "endless_error"):
                status = b"200 OK" if self.behaviour == "endless_body" else b"500 Internal Server Error"
                conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[")
                chunk = b"0," * 32768
                while not stop.is_set():
                    conn.sendall(chunk)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop_event.set()
        for s in [*self.fillers, *self.conns, self.sock]:
            try:
                s.close()
            except OSError:
                pass


def self_signed(directory: Path) -> Optional[tuple[Path, ssl.SSLContext]]:
    """A certificate for 127.0.0.1 made with the openssl command (None without it): the file a
    client trusts through SSL_CERT_FILE, and the server's TLS context."""
    if shutil.which("openssl") is None:
        return None
    cert, key = directory / "cert.pem", directory / "key.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                           "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                           "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True, timeout=30)
    if made.returncode != 0:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return cert, context
