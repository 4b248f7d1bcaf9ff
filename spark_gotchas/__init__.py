"""spark-gotchas: checks a machine for the ten known DGX Spark training failure modes (G1-G10).

The package is pure Python and never imports torch at module level: the GPU work runs in a
child process (:mod:`spark_gotchas.runtime.worker`) so a crashing CUDA stack cannot take pytest down.

PYTEST_DONT_REWRITE: ``spark-gotchas`` imports this package before pytest starts, too early for
pytest's assertion rewriting (which would warn); this module holds no test asserts.
"""

import importlib.abc
import importlib.util
import sys
from pathlib import Path

__version__ = "0.2.0"

CHECKOUT = Path(__file__).resolve().parent.parent


def _is_checkout(root: Path) -> bool:
    """A source checkout (uninstalled or editable), not an installed wheel's site-packages."""
    return (root / "pyproject.toml").is_file() and (root / "tests_gotchas").is_dir() and \
        (root / "microbench" / "__init__.py").is_file()


class CheckoutMicrobench(importlib.abc.MetaPathFinder):
    """Serves the checkout's ``microbench/`` folder as ``spark_gotchas.microbench``.

    A wheel ships that folder inside the suite's namespace (PyPI's ``microbench`` is another
    project, so the suite takes no such top-level name). In a checkout the folder stays at the top,
    beside ``tests_gotchas/``; without this finder ``spark_gotchas.microbench`` would not exist in an
    uninstalled checkout. Only a checkout installs it.
    """

    NAMES = ("spark_gotchas.microbench",)

    def __init__(self, folder: Path):
        self.folder = folder

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.NAMES:
            return None
        return importlib.util.spec_from_file_location(fullname, self.folder / "__init__.py",
                                                      submodule_search_locations=[str(self.folder)])


if _is_checkout(CHECKOUT) and not any(isinstance(f, CheckoutMicrobench) for f in sys.meta_path):
    sys.meta_path.insert(0, CheckoutMicrobench(CHECKOUT / "microbench"))
