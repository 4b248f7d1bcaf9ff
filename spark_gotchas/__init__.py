"""spark-gotchas: checks a machine for the ten known DGX Spark training failure modes (G1-G10).

The package is pure Python and never imports torch at module level: the GPU work runs in a
child process (:mod:`spark_gotchas.worker`) so a crashing CUDA stack cannot take pytest down.
"""

__version__ = "0.1.0"
