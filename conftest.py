"""pytest glue for a checkout.

The suite's glue (options, markers, the ``spark`` fixture, verdict reporting, the G-line summary,
JSON report metadata, snapshot and replay) lives in :mod:`spark_gotchas.plugin`, which an
installed suite loads through its ``pytest11`` entry point, early enough for
``--spark-replay PATH`` to parse from any directory. From an uninstalled checkout this file
loads the same plugin (under the same name, so it is never registered twice).
"""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

pytest_plugins = ["spark_gotchas.plugin"]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config):
    """Collect only ``tests_gotchas/`` from the repo root even when pytest lost the ini file.

    pytest picks the rootdir and ini file from path-like arguments before it knows the suite's
    options: ``pytest -m fast --spark-replay ~/runs/spark1.json`` (with a space) makes it look in
    ~/runs, find no ini and forget ``testpaths``, so collection would start at the repo root and
    take in the suite's own tests (``tests/``), which are no preflight.
    """
    if config.inipath is not None or config.args_source is not pytest.Config.ArgsSource.INVOCATION_DIR:
        return None
    if collection_path.parent == HERE and collection_path.is_dir() and collection_path.name != "tests_gotchas":
        return True
    return None
