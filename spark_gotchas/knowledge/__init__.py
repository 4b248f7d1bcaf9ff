"""Knowledge: what the suite knows, as pure functions and data: the verdict model and the one G-line
formatter (``verdict``), the platforms and their envelopes (``profiles``), the servers and trainers and
their bounds (``workloads``), the planned run (``plan``), the reading types (``readings/``), one judge
module per gotcha (``judges/``) and the watch's states (``watch_judge``). Nothing here reads the machine,
imports torch, or lets one judge import another."""
