"""Readers of the ``thermal.*`` keys (G4), one module per key: :mod:`.snapshot` (``thermal.snapshot``,
and the NVML sampling and counters the others use), :mod:`.spot_check` (``thermal.spot_check``)
and :mod:`.reboot` (``thermal.reboot``). ``thermal.soak``'s reader lives with the soak
(:mod:`spark_gotchas.runtime.soak.reader`). Their types are in :mod:`spark_gotchas.knowledge.readings.thermal`.
"""
