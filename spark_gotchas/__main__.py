"""``python -m spark_gotchas``: the same command as ``spark-gotchas`` (see :mod:`spark_gotchas.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
