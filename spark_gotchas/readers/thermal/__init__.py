"""Readers of the ``thermal.*`` keys (G4), one module per key: :mod:`.snapshot` (``thermal.snapshot``,
and the NVML sampling and counters the others use), :mod:`.spot_check` (``thermal.spot_check``),
:mod:`.reboot` (``thermal.reboot``) and :mod:`.soak` (``thermal.soak``). Their types are in
:mod:`spark_gotchas.readings.thermal`.
"""
