"""Open issues of NVIDIA/dgx-spark-playbooks that concern the playbooks about to be used (G8).

One listing of the repository's open issues (pull requests dropped) and of its playbook
folders (``nvidia/<name>/``) serves every ``--spark-playbook``; it is cached on disk for an
hour because users run the preflight often and GitHub allows 60 unauthenticated requests an
hour. ``GITHUB_TOKEN`` is sent when set and is never recorded. The whole fetch runs under one
time budget in a helper thread, so a dead network (no DNS, a black-holed route, a server that
trickles bytes) costs at most the budget, never a hang.

Environment: ``SPARK_GOTCHAS_GITHUB_API`` (default https://api.github.com),
``SPARK_GOTCHAS_GITHUB_TIMEOUT`` (seconds for the whole fetch, default 8),
``XDG_CACHE_HOME`` (cache in ``$XDG_CACHE_HOME/spark-gotchas``, default ``~/.cache``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from .. import __version__
from . import ReadContext, reader

REPO = "NVIDIA/dgx-spark-playbooks"
DEFAULT_API = "https://api.github.com"
CACHE_TTL_S = 3600.0
DEFAULT_BUDGET_S = 8.0
PER_PAGE = 100
MAX_PAGES = 5
MAX_BODY_BYTES = 8 << 20
BODY_CHARS_KEPT = 20000


class FetchError(Exception):
    """The listing could not be fetched; ``kind`` is offline|timeout|rate_limited|http|malformed."""

    def __init__(self, kind: str, message: str, status: Optional[int] = None, reset_utc: Optional[str] = None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.reset_utc = reset_utc


@dataclass
class PlaybookIssue:
    number: int
    title: str
    url: str
    created_at: str
    updated_at: str = ""
    labels: list[str] = field(default_factory=list)
    matched: list[str] = field(default_factory=list)  # where the name appears: title, labels, body

    @property
    def date(self) -> str:
        return self.created_at[:10]


@dataclass
class PlaybookIssues:
    """``curl -s 'https://api.github.com/repos/NVIDIA/dgx-spark-playbooks/issues?state=open&per_page=100'
    | jq -r '.[] | select(.pull_request | not) | "#\\(.number) \\(.created_at) \\(.title)"'``"""

    playbooks: list[str] = field(default_factory=list)
    api: str = DEFAULT_API
    repo: str = REPO
    fetched: bool = False  # False when no playbook was named (nothing asked of the network)
    error: Optional[str] = None
    error_kind: Optional[str] = None  # offline | timeout | rate_limited | http | malformed
    http_status: Optional[int] = None
    rate_limit_reset_utc: Optional[str] = None
    authenticated: bool = False  # GITHUB_TOKEN was sent (its value is never recorded)
    from_cache: bool = False
    fetched_at_utc: Optional[str] = None
    cache_age_s: Optional[float] = None
    open_issues: int = 0  # open issues listed, pull requests excluded
    pull_requests_skipped: int = 0
    truncated: bool = False  # more pages than MAX_PAGES
    folders: Optional[list[str]] = None  # playbook folders under nvidia/, None when not listed
    folders_error: Optional[str] = None
    by_playbook: dict[str, list[PlaybookIssue]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def unknown(self) -> list[str]:
        """Named playbooks that are not a folder under nvidia/ (empty when folders are unknown)."""
        if not self.folders:
            return []
        return [name for name in self.playbooks if name not in self.folders]


def manual_url(playbooks: list[str] | tuple[str, ...] = ()) -> str:
    """The issue search to open by hand when the API cannot be reached."""
    query = "is:issue is:open " + " ".join(playbooks)
    return f"https://github.com/{REPO}/issues?q=" + urllib.parse.quote_plus(query.strip())


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
def _iso(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).replace(microsecond=0).isoformat()


def _rate_limit_reset(headers: Any) -> Optional[str]:
    reset = headers.get("X-RateLimit-Reset") if headers is not None else None
    if reset and str(reset).isdigit():
        return _iso(int(reset))
    retry = headers.get("Retry-After") if headers is not None else None
    if retry and str(retry).isdigit():
        return _iso(time.time() + int(retry))
    return None


def _get(url: str, token: Optional[str], deadline: float) -> tuple[Any, Any]:
    """GET a JSON document before ``deadline`` (monotonic); returns (json, headers)."""
    request = urllib.request.Request(url, headers={
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": f"spark-gotchas/{__version__}",
    })
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise FetchError("timeout", "time budget used up")
    try:
        with urllib.request.urlopen(request, timeout=remaining) as response:
            chunks, size = [], 0
            while True:
                if time.monotonic() > deadline:
                    raise FetchError("timeout", "the response did not arrive within the time budget")
                chunk = response.read1(1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise FetchError("malformed", f"response larger than {MAX_BODY_BYTES >> 20} MB")
                chunks.append(chunk)
            headers = response.headers
    except urllib.error.HTTPError as exc:
        body = ""
        try:
            body = exc.read(2000).decode(errors="replace")
        except Exception:
            pass
        message = body
        try:
            message = json.loads(body).get("message", body)
        except Exception:
            pass
        remaining_calls = exc.headers.get("X-RateLimit-Remaining") if exc.headers is not None else None
        if exc.code == 429 or (exc.code == 403 and (remaining_calls == "0" or "rate limit" in message.lower())):
            raise FetchError("rate_limited", f"HTTP {exc.code}: {message.strip()[:160]}", exc.code,
                             _rate_limit_reset(exc.headers)) from None
        raise FetchError("http", f"HTTP {exc.code} {exc.reason}: {message.strip()[:160]}", exc.code) from None
    except FetchError:
        raise
    except TimeoutError as exc:
        raise FetchError("timeout", f"no answer within the time budget ({exc})") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise FetchError("timeout", f"no answer within the time budget ({reason})") from None
        if isinstance(reason, socket.gaierror):
            host = urllib.parse.urlsplit(url).hostname
            raise FetchError("offline", f"cannot resolve {host} ({reason.strerror or reason}): offline?") from None
        raise FetchError("offline", f"cannot connect: {reason}") from None
    except (OSError, ValueError) as exc:  # connection reset, bad URL
        raise FetchError("offline", f"{type(exc).__name__}: {exc}") from None
    try:
        return json.loads(b"".join(chunks).decode("utf-8")), headers
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FetchError("malformed", f"the response is not JSON: {exc}") from None


def _next_link(headers: Any) -> Optional[str]:
    for part in (headers.get("Link") or "").split(","):
        if 'rel="next"' in part:
            match = re.search(r"<([^>]+)>", part)
            if match:
                return match.group(1)
    return None


def _trim(item: dict[str, Any]) -> dict[str, Any]:
    labels = [lab.get("name", "") if isinstance(lab, dict) else str(lab) for lab in item.get("labels") or ()]
    return {
        "number": int(item["number"]),
        "title": str(item.get("title") or ""),
        "url": str(item.get("html_url") or ""),
        "created_at": str(item.get("created_at") or ""),
        "updated_at": str(item.get("updated_at") or ""),
        "labels": labels,
        "body": str(item.get("body") or "")[:BODY_CHARS_KEPT],
    }


def fetch_issues(api: str, token: Optional[str], deadline: float) -> dict[str, Any]:
    """Every open issue (pull requests dropped), following ``Link: rel="next"`` up to MAX_PAGES."""
    url: Optional[str] = f"{api}/repos/{REPO}/issues?state=open&per_page={PER_PAGE}"
    issues, prs, pages = [], 0, 0
    while url and pages < MAX_PAGES:
        data, headers = _get(url, token, deadline)
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


def fetch_folders(api: str, token: Optional[str], deadline: float) -> list[str]:
    data, _ = _get(f"{api}/repos/{REPO}/contents/nvidia", token, deadline)
    if not isinstance(data, list):
        raise FetchError("malformed", "expected a list of folder entries")
    return sorted(str(e["name"]) for e in data if isinstance(e, dict) and e.get("type") == "dir" and e.get("name"))


# -- cache ----------------------------------------------------------------------------------------
def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "spark-gotchas"


def _cache_path(api: str) -> Path:
    key = hashlib.sha256(f"{api} {REPO}".encode()).hexdigest()[:16]
    return cache_dir() / f"github-{key}.json"


def load_cache(api: str, now: float) -> Optional[dict[str, Any]]:
    try:
        data = json.loads(_cache_path(api).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("api") != api or not isinstance(data.get("issues"), list):
        return None
    age = now - float(data.get("fetched_at", 0))
    return data if 0 <= age < CACHE_TTL_S else None


def save_cache(api: str, listing: dict[str, Any], now: float) -> None:
    """Write the listing (never the token) atomically; a read-only home just skips the cache."""
    path = _cache_path(api)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**listing, "api": api, "fetched_at": now}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


# -- the reading ----------------------------------------------------------------------------------
def budget_s() -> float:
    try:
        return max(0.1, float(os.environ.get("SPARK_GOTCHAS_GITHUB_TIMEOUT", DEFAULT_BUDGET_S)))
    except ValueError:
        return DEFAULT_BUDGET_S


def listing(api: str, token: Optional[str], budget: float) -> dict[str, Any]:
    """Issues and folders, from the cache when fresh, else from the API within ``budget`` seconds."""
    now = time.time()
    cached = load_cache(api, now)
    if cached is not None:
        return {**cached, "from_cache": True, "cache_age_s": now - float(cached["fetched_at"])}
    box: dict[str, Any] = {}

    def work() -> None:
        deadline = time.monotonic() + budget
        try:
            got = fetch_issues(api, token, deadline)
            try:
                got["folders"] = fetch_folders(api, token, deadline)
            except FetchError as exc:
                got["folders"], got["folders_error"] = None, str(exc)
            box["ok"] = got
        except FetchError as exc:
            box["error"] = exc
        except Exception as exc:  # never let a surprise escape the thread silently
            box["error"] = FetchError("http", f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=work, name="spark-gotchas-github", daemon=True)
    thread.start()
    thread.join(budget + 0.5)
    if "ok" in box:
        save_cache(api, box["ok"], now)
        return {**box["ok"], "from_cache": False, "fetched_at": now, "cache_age_s": 0.0}
    if "error" in box:
        raise box["error"]
    raise FetchError("timeout", f"no answer within {budget:g} s (DNS or connect stalled)")


def recorded_playbooks_only(ctx: ReadContext, recorded: PlaybookIssues) -> PlaybookIssues:
    """In a replay, ``--spark-playbook`` may only name playbooks the snapshot's run looked up."""
    asked = _playbook_names(ctx.options.spark_playbook)
    missing = [p for p in asked if p not in recorded.playbooks]
    if missing:
        from ..provider import ReadingUnavailable

        have = ", ".join(recorded.playbooks) or "none"
        raise ReadingUnavailable("github.playbook_issues",
                                 f"the snapshot looked up playbooks: {have}; not {', '.join(missing)} (run live to "
                                 "look them up)")
    return replace(recorded, playbooks=asked, by_playbook={p: recorded.by_playbook.get(p, []) for p in asked})


def _playbook_names(options: tuple[str, ...] | list[str]) -> list[str]:
    return list(dict.fromkeys(p.strip().strip("/").removeprefix("nvidia/") for p in options))


@reader("github.playbook_issues", replay_input=("spark_playbook", recorded_playbooks_only))
def read_playbook_issues(ctx: ReadContext) -> PlaybookIssues:
    """Open issues of NVIDIA/dgx-spark-playbooks mentioning each ``--spark-playbook`` (newest first)."""
    playbooks = _playbook_names(ctx.options.spark_playbook)
    api = os.environ.get("SPARK_GOTCHAS_GITHUB_API", DEFAULT_API).rstrip("/")
    token = os.environ.get("GITHUB_TOKEN") or None
    out = PlaybookIssues(playbooks=playbooks, api=api, authenticated=token is not None)
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
