"""The G4 soak's reading: the per-window series a verdict is judged from, and where its files are.

The soak itself (load, sampler, CSV, heartbeat, signals, progress) lives in
:mod:`spark_gotchas.soak`; this module only declares what it returns, so a snapshot replays
the verdict without the machine. The full-resolution samples stay in the CSV, which
``python -m spark_gotchas.soak_record CSV`` can re-judge on its own.
"""

from __future__ import annotations

from ..readings.thermal import SoakReading
from . import ReadContext, reader


@reader("thermal.soak")
def read_soak(ctx: ReadContext) -> SoakReading:
    """Sustained BF16 GEMM for ``--soak-duration`` with a 1 Hz sampler; CSV and PNG in ``--soak-dir``."""
    from ..soak import run_soak_check

    return run_soak_check(ctx)
