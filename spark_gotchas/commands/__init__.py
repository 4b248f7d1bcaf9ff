"""Commands: ``spark-gotchas`` and its subcommands (``cli``): diff, fleet, check-report, watch, the
soak's cost, and Slurm's node health (``slurm/``)."""
