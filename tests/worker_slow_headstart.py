"""Test-only preload module: adds a head-start part that runs for seconds (the child's registry)."""

import time

from spark_gotchas.runtime import headstart

headstart.IN_WORKER["slow"] = lambda: time.sleep(5) or "slept"
