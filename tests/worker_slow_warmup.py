"""Test-only preload module: adds a warm-up that runs for seconds (the child's registry)."""

import time

from spark_gotchas import warmup

warmup.WARMUPS["slow"] = lambda: time.sleep(5) or "slept"
