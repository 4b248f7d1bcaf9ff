"""The environment a user's shell gives a command: this one's, without the variables that change
how Python itself runs (``PYTHONUNBUFFERED``, ``PYTHONDONTWRITEBYTECODE``, ``PYTHONIOENCODING`` …).

A developer's shell or a CI runner may set them, and each hides a class of fault: a buffered stdout
fails only in the interpreter's flush at exit, bytecode is written into the install tree only when
Python may write it. ``PYTHONPATH`` is kept: it says where the code is, not how it runs.
"""

from __future__ import annotations

import os
from typing import Optional

KEPT = {"PYTHONPATH"}


def user_env(extra: Optional[dict[str, str]] = None, base: Optional[dict[str, str]] = None) -> dict[str, str]:
    """``base`` (this process's environment) less every ``PYTHON*`` variable but PYTHONPATH, plus ``extra``."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("PYTHON") or k in KEPT}
    env.update(extra or {})
    return env
