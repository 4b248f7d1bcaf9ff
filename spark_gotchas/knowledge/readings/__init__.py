"""The types of the readings: what each reader returns, one module per key area.

A reading keyed ``area.name`` has its type in ``spark_gotchas.knowledge.readings.<area>`` and its reader in
``spark_gotchas.machine.readers.<area>``. These modules are pure: dataclasses, their properties and the
small constants they need. They import nothing of the suite but each other (and the result types
of :mod:`spark_gotchas.microbench` that bench readings embed), so the judges can read them without depending on
how a reading is taken, and a snapshot replays into them without any reader.
"""
