"""The G4 soak's reading: the per-window series a verdict is judged from, and where its files are.

The soak itself (load, sampler, CSV, heartbeat, signals, progress) lives in
:mod:`spark_gotchas.soak`; this module only registers it as the reader of ``thermal.soak``. What
it returns (:class:`~spark_gotchas.readings.thermal.SoakReading`, in
:mod:`spark_gotchas.readings.thermal`) is a reading, so a snapshot replays the verdict without the
machine. The full-resolution samples stay in the CSV, which ``python -m spark_gotchas.soak_record
CSV`` can re-judge on its own.

Key: ``thermal.soak``.
"""

from __future__ import annotations

from ...readings.thermal import SoakReading
from .. import ReadContext, reader


@reader("thermal.soak")
def read_soak(ctx: ReadContext) -> SoakReading:
    """Sustained BF16 GEMM for ``--soak-duration`` with a 1 Hz sampler; CSV and PNG in ``--soak-dir``."""
    from ...soak import run_soak_check

    return run_soak_check(ctx)
