"""Test-only preload module: an import that takes a second, as torch's does cold."""

import time

time.sleep(1.0)
