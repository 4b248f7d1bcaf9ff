"""What every microbenchmark's command line shares: is there torch and a CUDA device to measure, how
a result prints as JSON, how a duration reads, and how an error reads in a result: one line."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from typing import Any, Optional

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_SECONDS_PER = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def no_torch_reason() -> Optional[str]:
    """None when torch imports; else why not, in one line."""
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            return "torch is not installed"
        return f"torch does not import: {first_line(exc)}"
    except Exception as exc:  # a broken install: a missing CUDA library, an ABI mismatch
        return f"torch does not import: {first_line(exc)}"
    return None


def no_cuda_reason() -> Optional[str]:
    """None when torch sees a CUDA device; else the one-line reason (printed by ``require_cuda``)."""
    reason = no_torch_reason()
    if reason:
        return reason
    import torch

    if not torch.cuda.is_available():
        return f"no CUDA device: torch {torch.__version__} (CUDA {torch.version.cuda}) sees none"
    return None


def require_torch() -> bool:
    """Print why to stderr and return False when torch does not import (the caller exits 2)."""
    reason = no_torch_reason()
    if reason:
        print(reason, file=sys.stderr)
    return reason is None


def require_cuda() -> bool:
    """Print why to stderr and return False when there is nothing to measure (the caller exits 2)."""
    reason = no_cuda_reason()
    if reason:
        print(reason, file=sys.stderr)
    return reason is None


def print_json(value: Any) -> None:
    """A result (a dataclass, or plain JSON values) as indented JSON on stdout."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    print(json.dumps(value, indent=1, default=str))


def parse_seconds(text: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``2h`` -> seconds: the suite's duration words, for ``argparse``'s ``type=``."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 30, 30s, 5m, 1h)")
    return float(match.group(1)) * _SECONDS_PER[match.group(2)]


def first_line(exc: BaseException, limit: int = 240) -> str:
    """``Type: first line of the message``, at most ``limit`` characters: an error as a result shows it."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:limit]
