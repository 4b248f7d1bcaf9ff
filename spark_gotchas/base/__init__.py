"""Base: helpers every layer uses, importing nothing of the suite: the one way in (``bounded_read``),
the one way out (``outward``), secrets masked (``scrub``) and control characters neutralised (``text``),
typed JSON (``serial``), whole-file writes (``atomic``), units, and child processes that end with the call
(``procs``)."""
