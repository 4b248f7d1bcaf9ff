"""Runtime: work in child processes and over time: the GPU worker and its tasks, the head start, the
soak (``soak/``) and the watched run (``watch/``)."""
