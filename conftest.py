"""pytest glue for a checkout.

The suite's glue (options, markers, the ``spark`` fixture, verdict reporting, the G-line summary,
JSON report metadata, snapshot and replay) lives in :mod:`spark_gotchas.plugin`, and what it
settles as pytest starts in :mod:`spark_gotchas.startup`; an installed suite loads both through
their ``pytest11`` entry points. From an uninstalled checkout this file loads the same plugins
(under the same names, so neither is registered twice).
"""

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

pytest_plugins = ["spark_gotchas.plugin", "spark_gotchas.startup"]
