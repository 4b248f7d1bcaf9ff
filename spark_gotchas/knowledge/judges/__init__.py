"""One judge module per gotcha (``gNN_<name>.py``): pure functions readings -> Verdict.

Judges never read the machine; they take readings (live or replayed) and a profile, and
say which rule decided. Every FAIL and WARN carries a fix.
"""
