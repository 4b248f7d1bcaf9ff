"""pytest glue for a checkout.

The suite's glue (options, markers, the ``spark`` fixture, verdict reporting, the G-line summary,
JSON report metadata, snapshot and replay) lives in :mod:`spark_gotchas.plugin`, which an
installed suite loads through its ``pytest11`` entry point, early enough for
``--spark-replay PATH`` to parse from any directory. From an uninstalled checkout this file
loads the same plugin (under the same name, so it is never registered twice).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

pytest_plugins = ["spark_gotchas.plugin"]
