"""``python -m microbench NAME [args…]``: run one microbenchmark's command line."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def available() -> list[str]:
    here = Path(__file__).parent
    names = []
    for info in pkgutil.iter_modules([str(here)]):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"microbench.{info.name}")
        if hasattr(module, "main"):
            names.append(info.name)
    return sorted(names)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m microbench NAME [args...]\n\nNAME is one of: " + ", ".join(available()))
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in available():
        print(f"unknown microbenchmark {name!r}; choose from: {', '.join(available())}", file=sys.stderr)
        return 2
    return int(importlib.import_module(f"microbench.{name}").main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
