"""The suite's own tests: judges on recorded readings, readers on fixture files, the plugin via pytester."""

import importlib.util

pytest_plugins = ["pytester"]

# numpy cannot be imported twice in one process, and pytester removes the modules an in-process run
# imported: where an installed plugin first imports numpy inside such a run, the next run and every
# later numpy (or torch) import would fail. Imported here first, it stays.
if importlib.util.find_spec("numpy") is not None:
    import numpy  # noqa: F401

