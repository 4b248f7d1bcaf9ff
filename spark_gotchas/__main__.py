"""``python -m spark_gotchas``: the same command as ``spark-gotchas`` (see :mod:`spark_gotchas.commands.cli`)."""

import sys

from .commands.cli import main

if __name__ == "__main__":
    sys.exit(main())
