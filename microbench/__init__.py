"""Active GPU measurements (bandwidth, GEMM, attention, soak load, safetensors load, collectives),
each runnable alone.

``spark-gotchas microbench NAME [args]`` (``python -m spark_gotchas.microbench NAME``) runs
``NAME.main(args)``. The same functions run inside the suite's GPU worker, so the figures a check
judges are the figures this prints. A leaf package: it imports nothing of the suite; what the suite
adds (progress, stop requests, its memory reader) comes in as arguments.
"""
