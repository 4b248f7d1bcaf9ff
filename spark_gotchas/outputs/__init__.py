"""Outputs: what a run writes for people and tools: the JSON report section and the terminal block
(``reports``), the report file, the Markdown summary, JUnit XML, Prometheus metrics, the soak's last step
and the watch's report."""
