"""``python -m spark_gotchas.microbench NAME [args…]`` (or ``spark-gotchas microbench NAME``): run one
microbenchmark's command line."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

from ._cli import first_line, say

PACKAGE = __package__ or "spark_gotchas.microbench"  # the name this package was imported under
USAGE = "usage: spark-gotchas microbench NAME [args...]  (or: python -m spark_gotchas.microbench NAME [args...])"


def available() -> list[str]:
    here = Path(__file__).parent
    names = []
    for info in pkgutil.iter_modules([str(here)]):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        if hasattr(module, "main"):
            names.append(info.name)
    return sorted(names)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        say(USAGE, "", f"NAME is one of: {', '.join(available())}; NAME --help says what it takes")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in available():
        say(f"unknown microbenchmark {name!r}; choose from: {', '.join(available())}", err=True)
        return 2
    try:
        return int(importlib.import_module(f"{PACKAGE}.{name}").main(rest) or 0)
    except OSError as exc:  # a folder or file it was given: the user's to mend, in a line
        say(f"spark-gotchas microbench {name}: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
        return 2
    except Exception as exc:  # torch refusing the device it was given, a measurement that broke: a line, exit 3
        say(f"spark-gotchas microbench {name}: {first_line(exc)}", err=True)
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
