"""The reader of ``thermal.soak``: the soak's engine run for ``--soak-duration``.

The soak itself (load, sampler, CSV, heartbeat, signals, progress) is :mod:`.engine`; this module
only registers it under its key, and :func:`spark_gotchas.machine.readers.load_all` imports it by name (the
readers package imports nothing of the soak). What it returns
(:class:`~spark_gotchas.knowledge.readings.thermal.SoakReading`) is a reading, so a snapshot replays the
verdict without the machine. The full-resolution samples stay in the CSV, which ``python -m
spark_gotchas.runtime.soak.record CSV`` can judge again on its own.

Key: ``thermal.soak``.
"""

from __future__ import annotations

from ...knowledge.readings.thermal import SoakReading
from ...machine.readers import ReadContext, reader


@reader("thermal.soak")
def read_soak(ctx: ReadContext) -> SoakReading:
    """Sustained BF16 GEMM for ``--soak-duration`` with a 1 Hz sampler; the CSV in ``--soak-dir``."""
    from .engine import run_soak_check

    return run_soak_check(ctx)
