"""What every microbenchmark's command line shares: is there torch and a CUDA device to measure, how
a result prints as JSON, how a duration reads, and how an error reads in a result: one line."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
from typing import Any, Callable, Optional

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
    print(json_text(value, indent=1))


def json_text(value: Any, **kwargs: Any) -> str:
    """Standard JSON (``allow_nan=False``): a NaN or an infinity a measurement gave is ``null``,
    as the suite writes it, so every JSON parser reads what a measurement prints or leaves."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(_finite(value), allow_nan=False, default=str, **kwargs)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def parse_seconds(text: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``2h`` -> seconds: the suite's duration words, for ``argparse``'s ``type=``."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 30, 30s, 5m, 1h)")
    return float(match.group(1)) * _SECONDS_PER[match.group(2)]


def in_span(lo: float, hi: float, unit: str = "", integer: bool = False,
            parse: Optional[Callable[[str], float]] = None) -> Callable[[str], Any]:
    """An ``argparse`` ``type=`` for a number from ``lo`` to ``hi`` (``parse``: how it is written,
    e.g. :func:`parse_seconds`): NaN, an infinity or a value out of the span is refused with the
    argument's name and its span, as a usage error, before anything is measured."""
    words = f"a {'whole ' if integer else ''}number{' of ' + unit if unit else ''} from {lo:g} to {hi:g}"

    def convert(text: str) -> Any:
        try:
            value = parse(text) if parse is not None else (int(text) if integer else float(text))
        except ValueError:  # not a number at all (parse's own ArgumentTypeError says how to write one)
            value = math.nan
        if not (math.isfinite(value) and lo <= value <= hi):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not {words}")
        return value

    return convert


def first_line(exc: BaseException, limit: int = 240) -> str:
    """``Type: first line of the message``, at most ``limit`` characters: an error as a result shows it."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:limit]
