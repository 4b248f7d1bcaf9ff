"""Reading types of the ``github.*`` keys (G8): open issues of NVIDIA/dgx-spark-playbooks by playbook,
and the search to open by hand when the API cannot be reached.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Optional

from ...microbench.quantities import Seconds

REPO = "NVIDIA/dgx-spark-playbooks"
DEFAULT_API = "https://api.github.com"


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
    error_kind: Optional[str] = None  # offline | timeout | rate_limited | http | malformed | config
    http_status: Optional[int] = None
    rate_limit_reset_utc: Optional[str] = None
    authenticated: bool = False  # GITHUB_TOKEN was sent (its value is never recorded)
    from_cache: bool = False
    fetched_at_utc: Optional[str] = None
    cache_age_s: Optional[Seconds] = None
    open_issues: int = 0  # open issues listed, pull requests excluded
    pull_requests_skipped: int = 0
    truncated: bool = False  # more pages than MAX_PAGES
    folders: Optional[list[str]] = None  # playbook folders under nvidia/, None when not listed
    folders_error: Optional[str] = None
    by_playbook: dict[str, list[PlaybookIssue]] = field(default_factory=dict)
    seconds: Seconds = 0.0

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
