"""The ten gotchas' short titles, for reports people read (the numbers are the contract)."""

from __future__ import annotations

TITLES: dict[int, str] = {
    1: "CUDA 12/13 ABI mismatch",
    2: "flash-attn build and Unsloth auto-detect",
    3: "unified-memory OOM below 128 GB",
    4: "thermal throttling",
    5: "bandwidth ceiling",
    6: "unified-memory contention",
    7: "NVFP4 slower than FP8 on SM121",
    8: "stale official playbooks",
    9: "container first, not bare pip",
    10: "dual Spark is DDP/FSDP only",
}


def title(gotcha: int | str) -> str:
    """``title(4)`` or ``title("G4")`` -> ``"thermal throttling"``; unknown ids -> ``""``."""
    text = str(gotcha).upper().lstrip("G")
    return TITLES.get(int(text), "") if text.isdigit() and len(text) <= 2 else ""  # int() of 10,000 digits is an error
