"""G8 — stale official playbooks.

Rules:

- no playbook named → **INFO** saying how to name one.
- the listing failed — offline, timed out, HTTP error (a redirect elsewhere included), rate
  limited (with the reset time), a malformed answer, or `SPARK_GOTCHAS_GITHUB_API` not an
  http(s) URL → **SKIP** with the reason and the URL to check by hand (the error itself in the
  detail).
- open issues concern a named playbook → **WARN** listing them (the newest three per playbook in
  the line by number, with their titles in the detail, all in the JSON report): read these
  before trusting the recipe.
- a name that is not a folder under `nvidia/` → **WARN** with the closest folder name.
- otherwise → **PASS**, with how many open issues were checked and the cache's age.
"""

from __future__ import annotations

import difflib

from ..readings.github import PlaybookIssues, manual_url
from ..verdict import Status, Verdict

G = 8
SHOWN = 3
EXAMPLES = "vllm, unsloth, nccl, pytorch-fine-tune, connect-two-sparks"


def _age(reading: PlaybookIssues) -> str:
    if reading.from_cache and reading.cache_age_s is not None:
        return f", cached {reading.cache_age_s / 60:.0f} min ago"
    return ""


def _short(title: str, limit: int = 60) -> str:
    return title if len(title) <= limit else title[: limit - 1].rstrip() + "…"


def _issue_list(reading: PlaybookIssues) -> tuple[list[str], list[str]]:
    """Per playbook with open issues: its count and numbers (for the line), and its issues in full."""
    short, full = [], []
    for name in reading.playbooks:
        issues = reading.by_playbook.get(name) or []
        if not issues:
            continue
        numbers = ", ".join(f"#{i.number}" for i in issues[:SHOWN])
        more = f" +{len(issues) - SHOWN}" if len(issues) > SHOWN else ""
        short.append(f"{name}: {len(issues)} open issue{'s' if len(issues) != 1 else ''} ({numbers}{more})")
        shown = "; ".join(f'#{i.number} {i.date} "{_short(i.title)}"' for i in issues[:SHOWN])
        full.append(f"{name}: {shown}" + (f"; +{len(issues) - SHOWN} more" if len(issues) > SHOWN else ""))
    return short, full


def judge_playbooks(reading: PlaybookIssues) -> Verdict:
    readings = {
        "playbooks": reading.playbooks,
        "issues": {name: [{"number": i.number, "date": i.date, "title": i.title, "url": i.url}
                          for i in reading.by_playbook.get(name) or []] for name in reading.playbooks},
        "open_issues_checked": reading.open_issues,
        "from_cache": reading.from_cache,
        "error_kind": reading.error_kind,
        "unknown": reading.unknown,
    }
    if not reading.playbooks:
        return Verdict(G, Status.INFO, "no playbook named (--spark-playbook NAME lists its open issues)",
                       detail=f"NAME is a folder of {reading.repo}/nvidia/, e.g. {EXAMPLES}", readings=readings)
    url = manual_url(reading.playbooks)
    if reading.error:
        what = {"rate_limited": "GitHub's rate limit is used up", "offline": "no network",
                "timeout": "GitHub did not answer in time", "malformed": "GitHub's answer was not usable",
                "http": "GitHub answered with an error",
                "config": "a bad API address"}.get(reading.error_kind or "",
                                                                                  "the listing failed")
        if reading.error_kind == "offline" and "CERTIFICATE" in (reading.error or "").upper():
            what = "the server's TLS certificate is not trusted here (a proxy? set SSL_CERT_FILE)"
        until = f" until {reading.rate_limit_reset_utc}" if reading.rate_limit_reset_utc else ""
        token = "" if reading.authenticated or reading.error_kind != "rate_limited" else " (set GITHUB_TOKEN)"
        return Verdict(G, Status.SKIP, f"{what}{until}{token}; check by hand: {url}",
                       detail=f"cannot list open issues of {reading.repo}: {reading.error}", readings=readings)
    parts, listed = _issue_list(reading)
    unknown = reading.unknown
    for name in unknown:
        near = difflib.get_close_matches(name, reading.folders or [], n=1)
        parts.append(f"{name} is not a playbook folder" + (f" (did you mean {near[0]}?)" if near else ""))
    if parts:
        urls = " ".join(i.url for name in reading.playbooks for i in (reading.by_playbook.get(name) or [])[:SHOWN])
        fix = f"read these before trusting the recipe for an expensive run: {urls}" if urls else ""
        if unknown:
            fix += ("; " if fix else "") + ("name playbooks by their folder under nvidia/: "
                                            + ", ".join(reading.folders or []))[:300]
        return Verdict(G, Status.WARN, "; ".join(parts)[:500], detail="; ".join(listed)[:1000], fix=fix,
                       readings=readings)
    names = ", ".join(reading.playbooks)
    return Verdict(G, Status.PASS, f"no open issue mentions {names} ({reading.open_issues} checked)",
                   detail=f"{reading.open_issues} open issues of {reading.repo} checked{_age(reading)}",
                   readings=readings)
