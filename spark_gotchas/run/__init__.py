"""One pytest run of the checks: its state (``session``) and how SIGTERM ends it as Ctrl-C does
(``interrupts``); the hooks themselves are :mod:`spark_gotchas.plugin` and :mod:`spark_gotchas.startup`."""
