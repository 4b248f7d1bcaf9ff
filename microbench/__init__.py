"""Active GPU measurements (bandwidth, GEMM, soak load, collectives), each runnable alone.

``python -m microbench NAME [args]`` runs ``microbench.NAME.main(args)``. The same functions
run inside the suite's GPU worker, so the figures a check judges are the figures this prints.
"""
