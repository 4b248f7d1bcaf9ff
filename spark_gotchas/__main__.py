"""``python -m spark_gotchas COMMAND …``: the suite's commands outside pytest.

The checks themselves run under pytest (``pytest -m fast``); these commands work on what a
run left behind (JSON reports, snapshots). Each command is a module with ``main(argv) -> int``,
imported only when asked for.
"""

from __future__ import annotations

import importlib
import sys
from typing import Optional

from . import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "diff": ("spark_gotchas.diff", "what changed between two runs or machines (JSON reports or snapshots)"),
    "check-report": ("spark_gotchas.report_check", "fail unless a JSON report holds its tests and a G-line per gotcha"),
}


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: python -m spark_gotchas COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_module, text) in COMMANDS.items()]
    lines += ["", "python -m spark_gotchas COMMAND --help shows a command's arguments;",
              "the checks themselves run under pytest: pytest -m fast"]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        (sys.stdout if argv else sys.stderr).write(usage())
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"spark-gotchas {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"python -m spark_gotchas: unknown command {name!r} (commands: {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
