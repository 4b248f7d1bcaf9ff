"""What every microbenchmark's command line checks first (is there a CUDA device to measure), and how
an error reads in a result: one line."""

from __future__ import annotations

import sys
from typing import Optional


def no_cuda_reason() -> Optional[str]:
    """None when torch sees a CUDA device; else the one-line reason (printed by ``require_cuda``)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"no CUDA device: torch {torch.__version__} (CUDA {torch.version.cuda}) sees none"
    return None


def require_cuda() -> bool:
    """Print why to stderr and return False when there is nothing to measure."""
    reason = no_cuda_reason()
    if reason:
        print(reason, file=sys.stderr)
    return reason is None


def first_line(exc: BaseException, limit: int = 240) -> str:
    """``Type: first line of the message``, at most ``limit`` characters: an error as a result shows it."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:limit]
