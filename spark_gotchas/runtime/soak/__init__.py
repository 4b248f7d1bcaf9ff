"""The G4 soak: hours of GEMM load with a 1 Hz sampler, one package, importing nothing up front.

- :mod:`.engine` plans and runs a soak and returns its reading
  (:class:`~spark_gotchas.knowledge.readings.thermal.SoakReading`); it never judges.
- :mod:`.record` writes the CSV and the heartbeat as the soak goes and builds the per-window series
  (live and from a recorded CSV alike); ``python -m spark_gotchas.runtime.soak.record CSV`` (or
  ``spark-gotchas soak-record CSV``) judges a recorded CSV again.
- :mod:`.reader` registers the engine as the reader of ``thermal.soak``
  (:func:`spark_gotchas.machine.readers.load_all` imports it by name).
- :mod:`.plot` draws the PNG from a reading and the verdict line; the check's last step after it
  judged (the PNG titled with the verdict, the files named) is on top, in
  :mod:`spark_gotchas.outputs.soak_finish`, and what the sampler costs the load is a command,
  ``python -m spark_gotchas.commands.soak_cost``.

The judge (:func:`spark_gotchas.knowledge.judges.g04_thermal.judge_soak`) imports none of these.
"""
