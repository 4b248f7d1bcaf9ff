"""Open issues of NVIDIA/dgx-spark-playbooks that concern the playbooks about to be used (G8).

One listing of the repository's open issues (pull requests dropped) and of its playbook
folders (``nvidia/<name>/``) serves every ``--spark-playbook``; it is cached on disk for an
hour because users run the preflight often and GitHub allows 60 unauthenticated requests an
hour. ``GITHUB_TOKEN`` is sent when set, only to the API's own scheme, host and port (a
redirect or a next-page link elsewhere is not followed), and is never recorded. What a server
answers is untrusted: an error keeps only GitHub's JSON ``message``, masked and cut short. The
whole fetch, cache included, runs under one time budget in a helper thread, so a dead network (no
DNS, a black-holed route, a server that never accepts, never answers, trickles bytes or never
ends its answer) costs at most the budget, never a hang.

Environment: ``SPARK_GOTCHAS_GITHUB_API`` (default https://api.github.com),
``SPARK_GOTCHAS_GITHUB_TIMEOUT`` (seconds for the whole fetch, default 8),
``XDG_CACHE_HOME`` (cache in ``$XDG_CACHE_HOME/spark-gotchas``, default ``~/.cache``).

Key: ``github.playbook_issues``; its types are in :mod:`spark_gotchas.knowledge.readings.github`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import http.client
import json
import math
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import replace
from http import HTTPStatus
from pathlib import Path
from typing import Any, Optional

from ... import __version__
from ...base import atomic, bounded_read, scrub
from ...base.serial import dumps, number_problem
from ...knowledge.readings.github import DEFAULT_API, REPO, PlaybookIssue, PlaybookIssues
from . import ReadContext, reader

CACHE_TTL_S = 3600.0
DEFAULT_BUDGET_S = 8.0
MAX_BUDGET_S = 300.0
GRACE_S = 0.5  # past the budget, the reading gives up on the helper thread and shuts its sockets
PER_PAGE = 100
MAX_PAGES = 5
MAX_BODY_BYTES = 8 << 20
BODY_CHARS_KEPT = 20000


class FetchError(Exception):
    """The listing could not be fetched; ``kind`` is offline|timeout|rate_limited|http|malformed|config.
    Its text is masked (no credential of the environment or of a known shape survives)."""

    def __init__(self, kind: str, message: str, status: Optional[int] = None, reset_utc: Optional[str] = None):
        super().__init__(scrub.mask_text(message))
        self.kind = kind
        self.status = status
        self.reset_utc = reset_utc


def name_pattern(name: str) -> re.Pattern:
    """``pytorch-fine-tune`` also matches "PyTorch fine tune", ``llama-cpp`` "llama.cpp"; whole words only."""
    parts = [re.escape(p) for p in re.split(r"[-_. /]+", name.lower()) if p]
    return re.compile(r"(?<![a-z0-9])" + r"[-_. /]?".join(parts) + r"(?![a-z0-9])")


def concerns(issue: dict[str, Any], name: str) -> list[str]:
    """Where an issue mentions a playbook: any of title, labels, body."""
    pattern = name_pattern(name)
    where = []
    if pattern.search((issue.get("title") or "").lower()):
        where.append("title")
    if any(pattern.search(label.lower()) for label in issue.get("labels") or ()):
        where.append("labels")
    if pattern.search((issue.get("body") or "").lower()):
        where.append("body")
    return where


def match_issues(issues: list[dict[str, Any]], playbooks: list[str]) -> dict[str, list[PlaybookIssue]]:
    out: dict[str, list[PlaybookIssue]] = {}
    for name in playbooks:
        found = []
        for issue in issues:
            where = concerns(issue, name)
            if where:
                found.append(PlaybookIssue(number=issue["number"], title=issue["title"], url=issue["url"],
                                           created_at=issue["created_at"], updated_at=issue.get("updated_at", ""),
                                           labels=list(issue.get("labels") or ()), matched=where))
        out[name] = sorted(found, key=lambda i: (i.created_at, i.number), reverse=True)
    return out


# -- HTTP -----------------------------------------------------------------------------------------
# What a server answers is untrusted: error texts keep only GitHub's JSON ``message`` (masked and
# cut short), never a raw body, a status line's reason or a header; every text is masked before
# it is kept. The token goes only to the API's own scheme, host and port: a redirect or a next-page
# link elsewhere is not followed.
REDIRECT_CODES = (301, 302, 303, 307, 308)
MAX_REDIRECTS = 5
ERROR_BODY_BYTES = 4096  # enough for GitHub's {"message": …, "documentation_url": …}
MESSAGE_CHARS = 160
DEFAULT_PORTS = {"http": 80, "https": 443}


def _iso(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.UTC).replace(microsecond=0).isoformat()


def _rate_limit_reset(headers: Any) -> Optional[str]:
    try:
        reset = headers.get("X-RateLimit-Reset") if headers is not None else None
        if reset and str(reset).isdigit():
            return _iso(int(reset))
        retry = headers.get("Retry-After") if headers is not None else None
        if retry and str(retry).isdigit():
            return _iso(time.time() + int(retry))
    except (OverflowError, OSError, ValueError):  # a reset time beyond any calendar
        pass
    return None


def origin(url: str) -> tuple[str, str, Optional[int]]:
    """(scheme, host, port) of ``url``: the one place the token may go. ValueError for a bad port."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme)


def _shown(url: str) -> str:
    """Where ``url`` points, for an error text: scheme, host and port only, masked."""
    try:
        scheme, host, port = origin(url)
    except ValueError:
        return "an invalid address"
    return scrub.mask_text(f"{scheme}://{host}:{port}")[:100]


def _clip(text: str, limit: int = MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _api_message(body: bytes) -> str:
    """GitHub's JSON ``message`` of an error body, masked and cut short; "" for anything else."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, str):
        return ""
    return _clip(scrub.mask_text(" ".join(message.split())))


def _phrase(code: int) -> str:
    """The standard reason of a status code (the server's own reason text is not shown)."""
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return ""


class Session:
    """One fetch: the API's origin, the token, the deadline, and the sockets opened so far, so
    that ``abort`` can end a read blocked in the helper thread once the budget is spent."""

    def __init__(self, api: str, token: Optional[str], deadline: float):
        self.api = api
        self.origin = origin(api)
        self.token = token
        self.deadline = deadline
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._aborted = False
        self.opener = _opener(self)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def same_origin(self, url: str) -> bool:
        try:
            return origin(url) == self.origin
        except ValueError:
            return False

    def opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            aborted = self._aborted
        if aborted:
            _shut(sock)

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Wake a read blocked on ``sock`` in another thread (it sees the end of the stream)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, also under TLS
    except OSError:
        pass


def _tracked(base: type, session: Session) -> type:
    class Tracked(base):  # type: ignore[valid-type, misc]
        def connect(self) -> None:
            super().connect()
            session.opened(self.sock)

    return Tracked


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, session: Session):
        super().__init__()
        self.session = session

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_tracked(http.client.HTTPConnection, self.session), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, session: Session):
        super().__init__()
        self.session = session

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_tracked(http.client.HTTPSConnection, self.session), req, context=self._context)


def _opener(session: Session) -> urllib.request.OpenerDirector:
    """urllib for http(s) only, without its redirect handler (``_get`` follows redirects itself,
    only within the API's host) and with connections whose sockets the session can shut."""
    opener = urllib.request.OpenerDirector()
    for handler in (urllib.request.ProxyHandler(), _HTTPHandler(session), _HTTPSHandler(session),
                    urllib.request.HTTPDefaultErrorHandler(), urllib.request.HTTPErrorProcessor()):
        opener.add_handler(handler)
    return opener


class _Redirect(Exception):
    def __init__(self, code: int, location: str):
        super().__init__(code)
        self.code = code
        self.location = location


def _read_body(response: Any, session: Session) -> bytes:
    """The whole body, before the deadline and at most MAX_BODY_BYTES."""
    chunks, size = [], 0
    while True:
        if session.remaining() <= 0:
            raise FetchError("timeout", "the response did not arrive within the time budget")
        chunk = response.read1(1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise FetchError("malformed", f"response larger than {MAX_BODY_BYTES >> 20} MB")
        chunks.append(chunk)


def _read_some(fp: Any, session: Session, limit: int) -> bytes:
    """Up to ``limit`` bytes of an error body, what arrives before the deadline."""
    chunks, size = [], 0
    try:
        while fp is not None and size < limit and session.remaining() > 0:
            chunk = fp.read1(limit - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except (OSError, ValueError, http.client.HTTPException):
        pass
    return b"".join(chunks)


def _http_error(exc: urllib.error.HTTPError, session: Session) -> Exception:
    location = exc.headers.get("Location") if exc.headers is not None else None
    if exc.code in REDIRECT_CODES and location:
        return _Redirect(exc.code, location)
    message = _api_message(_read_some(exc.fp, session, ERROR_BODY_BYTES))
    remaining_calls = exc.headers.get("X-RateLimit-Remaining") if exc.headers is not None else None
    if exc.code == 429 or (exc.code == 403 and (remaining_calls == "0" or "rate limit" in message.lower())):
        return FetchError("rate_limited", f"HTTP {exc.code}" + (f": {message}" if message else ""), exc.code,
                          _rate_limit_reset(exc.headers))
    phrase = _phrase(exc.code)
    return FetchError("http", f"HTTP {exc.code}" + (f" {phrase}" if phrase else "") + (f": {message}" if message else ""),
                      exc.code)


def _get_once(session: Session, url: str) -> tuple[Any, Any]:
    request = urllib.request.Request(url, headers={
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": f"spark-gotchas/{__version__}",
    })
    if session.token and session.same_origin(url):
        # Unredirected: urllib would not copy it to a redirect's request even if one were followed.
        request.add_unredirected_header("Authorization", f"Bearer {session.token}")
    remaining = session.remaining()
    if remaining <= 0:
        raise FetchError("timeout", "time budget used up")
    try:
        with session.opener.open(request, timeout=remaining) as response:
            body = _read_body(response, session)
            headers = response.headers
    except urllib.error.HTTPError as exc:
        with exc:
            raise _http_error(exc, session) from None
    except FetchError:
        raise
    except TimeoutError as exc:
        raise FetchError("timeout", f"no answer within the time budget ({exc})") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise FetchError("timeout", f"no answer within the time budget ({reason})") from None
        if isinstance(reason, socket.gaierror):
            raise FetchError("offline", f"cannot resolve {origin(url)[1]} ({reason.strerror or reason}): "
                                        "offline?") from None
        raise FetchError("offline", f"cannot connect: {reason}") from None
    except http.client.IncompleteRead:
        raise FetchError("malformed", "the answer was cut short") from None
    except http.client.RemoteDisconnected:
        raise FetchError("offline", "the server closed the connection without an answer") from None
    except http.client.HTTPException as exc:  # a status line or header that is not HTTP: not echoed
        raise FetchError("malformed", f"not an HTTP answer ({type(exc).__name__})") from None
    except ValueError as exc:  # an address http.client refuses (control characters …): not echoed
        raise FetchError("malformed", f"an address it gave is not valid ({type(exc).__name__})") from None
    except OSError as exc:  # connection reset
        raise FetchError("offline", f"{type(exc).__name__}: {exc}") from None
    try:
        return bounded_read.parse_json(body.decode("utf-8")), headers  # nested 100 levels at most, no key twice
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FetchError("malformed", f"the response is not JSON: {exc}") from None


def _get(session: Session, url: str) -> tuple[Any, Any]:
    """GET a JSON document before the session's deadline; returns (json, headers). A redirect is
    followed only within the API's scheme, host and port (where a renamed repository's API
    redirects), at most MAX_REDIRECTS times and never back to an address already asked."""
    visited = [url]
    for _ in range(MAX_REDIRECTS + 1):
        try:
            return _get_once(session, url)
        except _Redirect as hop:
            target = urllib.parse.urljoin(url, hop.location)
            if not session.same_origin(target):
                raise FetchError("http", f"HTTP {hop.code}: redirected to {_shown(target)}, not the API's host "
                                         f"{_shown(session.api)}: not followed", hop.code) from None
            if target in visited:
                raise FetchError("http", f"HTTP {hop.code}: redirected in a loop (back to an address already "
                                         "asked)", hop.code) from None
            visited.append(target)
            url = target
    raise FetchError("http", f"more than {MAX_REDIRECTS} redirects")


def _next_link(headers: Any) -> Optional[str]:
    for part in (headers.get("Link") or "").split(","):
        if 'rel="next"' in part:
            match = re.search(r"<([^>]+)>", part)
            if match:
                return match.group(1)
    return None


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?)?")
_WEB_URL = re.compile(r"https?://[^\s\x00-\x1f\x7f-\x9f]+")


def _trim(item: dict[str, Any]) -> dict[str, Any]:
    """The fields G8 uses, with the texts that are shown masked and the shaped ones checked."""
    try:
        number = int(item["number"])
    except (KeyError, TypeError, ValueError, OverflowError):
        raise FetchError("malformed", "an item of the issue list has no number") from None
    labels = [lab.get("name", "") if isinstance(lab, dict) else str(lab) for lab in item.get("labels") or ()]
    url = str(item.get("html_url") or "")
    if not _WEB_URL.fullmatch(url) or len(url) > 300:
        url = f"https://github.com/{REPO}/issues/{number}"
    created, updated = (scrub.clip(str(item.get(k) or ""), 40, mark="") for k in ("created_at", "updated_at"))
    return {
        "number": number,
        "title": scrub.clip(str(item.get("title") or ""), 1000, mark=""),
        "url": scrub.mask_text(url),
        "created_at": created if _DATE.fullmatch(created) else "",
        "updated_at": updated if _DATE.fullmatch(updated) else "",
        "labels": [scrub.clip(str(lab), 100, mark="") for lab in labels],
        "body": scrub.clip(str(item.get("body") or ""), BODY_CHARS_KEPT, mark=""),
    }


def fetch_issues(session: Session) -> dict[str, Any]:
    """Every open issue (pull requests dropped), following ``Link: rel="next"`` up to MAX_PAGES."""
    url: Optional[str] = f"{session.api}/repos/{REPO}/issues?state=open&per_page={PER_PAGE}"
    issues, prs, pages = [], 0, 0
    while url and pages < MAX_PAGES:
        if not session.same_origin(url):
            raise FetchError("malformed", f"the next page is on {_shown(url)}, not the API's host "
                                          f"{_shown(session.api)}: not followed")
        data, headers = _get(session, url)
        if not isinstance(data, list):
            raise FetchError("malformed", f"expected a list of issues, got {type(data).__name__}")
        for item in data:
            if not isinstance(item, dict) or "number" not in item:
                raise FetchError("malformed", "an item of the issue list has no number")
            if "pull_request" in item:
                prs += 1
                continue
            issues.append(_trim(item))
        pages += 1
        url = _next_link(headers)
    return {"issues": issues, "pull_requests": prs, "truncated": bool(url)}


def fetch_folders(session: Session) -> list[str]:
    data, _ = _get(session, f"{session.api}/repos/{REPO}/contents/nvidia")
    if not isinstance(data, list):
        raise FetchError("malformed", "expected a list of folder entries")
    return sorted(scrub.clip(str(e["name"]), 100, mark="") for e in data
                  if isinstance(e, dict) and e.get("type") == "dir" and e.get("name"))


# -- cache ----------------------------------------------------------------------------------------
def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "spark-gotchas"


def _cache_path(api: str) -> Path:
    key = hashlib.sha256(f"{api} {REPO}".encode()).hexdigest()[:16]
    return cache_dir() / f"github-{key}.json"


_ISSUE_FIELDS = {"number": int, "title": str, "url": str, "created_at": str}


def _usable(data: Any, api: str) -> bool:
    """A cache file as ``save_cache`` writes it (a damaged or foreign one is fetched afresh)."""
    if not isinstance(data, dict) or data.get("api") != scrub.mask_text(api):
        return False
    fetched = data.get("fetched_at")
    if not isinstance(fetched, (int, float)) or isinstance(fetched, bool) or number_problem(fetched) \
            or not isinstance(data.get("issues"), list):
        return False
    folders = data.get("folders")
    if folders is not None and not (isinstance(folders, list) and all(isinstance(f, str) for f in folders)):
        return False
    return all(isinstance(i, dict) and all(isinstance(i.get(k), t) for k, t in _ISSUE_FIELDS.items())
               for i in data["issues"])


def load_cache(api: str, now: float) -> Optional[dict[str, Any]]:
    try:
        data = bounded_read.read_json(_cache_path(api), bounded_read.GITHUB_CACHE)
    except (OSError, bounded_read.Refused):  # a damaged, foreign or endless file is fetched afresh
        return None
    if not _usable(data, api):
        return None
    age = now - float(data["fetched_at"])
    return data if 0 <= age < CACHE_TTL_S else None


def save_cache(api: str, listing: dict[str, Any], now: float) -> None:
    """Write the listing (never the token; its texts are masked already) atomically; a read-only
    home just skips the cache."""
    try:
        atomic.write_text(_cache_path(api), dumps({**listing, "api": scrub.mask_text(api), "fetched_at": now}),
                          parents=True)
    except OSError:
        pass


# -- the reading ----------------------------------------------------------------------------------
def budget_s() -> float:
    """SPARK_GOTCHAS_GITHUB_TIMEOUT, kept within 0.1 s .. MAX_BUDGET_S (the default when unset or
    not a number). A pytest run refuses a value outside that span before any check runs
    (:data:`options.ENVIRONMENT`); a program calling the reader alone gets the nearest end."""
    try:
        value = float(os.environ.get("SPARK_GOTCHAS_GITHUB_TIMEOUT") or DEFAULT_BUDGET_S)
    except ValueError:
        return DEFAULT_BUDGET_S
    if not math.isfinite(value):
        return DEFAULT_BUDGET_S
    return min(MAX_BUDGET_S, max(0.1, value))


def _checked_api(api: str) -> None:
    try:
        scheme, host, _ = origin(api)
    except ValueError:
        scheme, host = "", ""
    if scheme not in DEFAULT_PORTS or not host:
        raise FetchError("config", f"SPARK_GOTCHAS_GITHUB_API is not an http(s) URL: {_clip(api, 80)!r}")


def _fetch(session: Session) -> dict[str, Any]:
    got = fetch_issues(session)
    try:
        got["folders"] = fetch_folders(session)
    except FetchError as exc:
        got["folders"], got["folders_error"] = None, str(exc)
    return got


def listing(api: str, token: Optional[str], budget: float) -> dict[str, Any]:
    """Issues and folders, from the cache when fresh, else from the API, within ``budget`` seconds.

    Everything that could wait (reading and writing the cache, connecting, redirects, reading the
    answer) runs in a helper thread; this thread waits for it at most the budget plus GRACE_S,
    then shuts the helper's sockets so that it ends too (only a DNS lookup cannot be cut short;
    the helper then ends when the resolver gives up)."""
    _checked_api(api)
    session = Session(api, token, time.monotonic() + budget)
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            now = time.time()
            cached = load_cache(api, now)
            if cached is not None:
                box["ok"] = {**cached, "from_cache": True, "cache_age_s": now - float(cached["fetched_at"])}
                return
            got = _fetch(session)
            box["ok"] = {**got, "from_cache": False, "fetched_at": now, "cache_age_s": 0.0}
            save_cache(api, got, now)
        except FetchError as exc:
            box["error"] = exc
        except Exception as exc:  # never let a surprise escape the thread silently
            box["error"] = FetchError("http", f"{type(exc).__name__}: {exc}")
        finally:
            done.set()

    thread = threading.Thread(target=work, name="spark-gotchas-github", daemon=True)
    thread.start()
    finished = done.wait(budget + GRACE_S)
    if not finished:
        session.abort()
    if "ok" in box:  # a cache write that stalled does not lose the listing
        return box["ok"]
    if finished and "error" in box:
        raise box["error"]
    raise FetchError("timeout", f"no answer within {budget:g} s: a DNS lookup, a connection or the answer stalled")


def recorded_playbooks_only(ctx: ReadContext, recorded: PlaybookIssues) -> PlaybookIssues:
    """In a replay, ``--spark-playbook`` may only name playbooks the snapshot's run looked up."""
    asked = _playbook_names(ctx.options.spark_playbook)
    missing = [p for p in asked if p not in recorded.playbooks]
    if missing:
        from ..provider import ReadingUnavailable

        have = ", ".join(recorded.playbooks) or "none"
        raise ReadingUnavailable("github.playbook_issues",
                                 f"the snapshot did not look up {', '.join(missing)}: it holds {have}; run live to "
                                 "look them up")
    return replace(recorded, playbooks=asked, by_playbook={p: recorded.by_playbook.get(p, []) for p in asked})


def _playbook_names(options: tuple[str, ...] | list[str]) -> list[str]:
    return list(dict.fromkeys(p.strip().strip("/").removeprefix("nvidia/") for p in options))


@reader("github.playbook_issues", replay_input=("spark_playbook", recorded_playbooks_only))
def read_playbook_issues(ctx: ReadContext) -> PlaybookIssues:
    """Open issues of NVIDIA/dgx-spark-playbooks mentioning each ``--spark-playbook`` (newest first)."""
    playbooks = _playbook_names(ctx.options.spark_playbook)
    api = os.environ.get("SPARK_GOTCHAS_GITHUB_API", DEFAULT_API).rstrip("/")
    token = os.environ.get("GITHUB_TOKEN") or None
    out = PlaybookIssues(playbooks=playbooks, api=scrub.mask_text(api), authenticated=token is not None)
    if not playbooks:
        return out
    t0 = time.monotonic()
    out.fetched = True
    try:
        got = listing(api, token, budget_s())
    except FetchError as exc:
        out.error, out.error_kind, out.http_status = str(exc), exc.kind, exc.status
        out.rate_limit_reset_utc = exc.reset_utc
        out.seconds = time.monotonic() - t0
        return out
    out.from_cache = bool(got.get("from_cache"))
    out.cache_age_s = got.get("cache_age_s")
    out.fetched_at_utc = _iso(float(got["fetched_at"]))
    out.open_issues = len(got["issues"])
    out.pull_requests_skipped = int(got.get("pull_requests", 0))
    out.truncated = bool(got.get("truncated"))
    out.folders = got.get("folders")
    out.folders_error = got.get("folders_error")
    out.by_playbook = match_issues(got["issues"], playbooks)
    out.seconds = time.monotonic() - t0
    return out
