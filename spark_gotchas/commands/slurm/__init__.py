"""Slurm: ``spark-gotchas node-health`` (HealthCheckProgram and prolog), the decision it takes from a
run's verdicts (``drain``, pure) and the one way it talks to Slurm (``scontrol``)."""
