"""Keep secrets out of everything the suite writes (JSON report, snapshot, summaries).

A variable is secret when its name looks like a credential (HF_TOKEN, GITHUB_TOKEN,
WANDB_API_KEY, AWS_*, *_PASSWORD …). Its value is replaced by ``***`` wherever it occurs,
inside any string of the document, not only where the environment is recorded.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Mapping

SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|"
    r"AUTH|COOKIE|SESSION_?KEY|^AWS_|^AZURE_|^GCP_|^GOOGLE_APPLICATION|_KEY$|^KEY$|_PAT$|DSN$)",
    re.IGNORECASE,
)
MASK = "***"
MIN_SECRET_LEN = 4


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables, longest first (so overlapping values mask fully)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def scrub_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of an environment with secret-looking variables' values masked."""
    return {k: (MASK if is_secret_name(k) else v) for k, v in environ.items()}


def scrub(obj: Any, secrets: Iterable[str] | None = None) -> Any:
    """Return ``obj`` with every secret value masked in every string, key and value alike."""
    values = list(secret_values() if secrets is None else secrets)
    if not values:
        return obj

    def clean(x: Any) -> Any:
        if isinstance(x, str):
            for value in values:
                if value in x:
                    x = x.replace(value, MASK)
            return x
        if isinstance(x, dict):
            return {clean(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return clean(obj)
