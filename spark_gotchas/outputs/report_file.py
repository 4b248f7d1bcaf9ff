"""The JSON report written as the suite writes its own files: whole, or not at all.

pytest-json-report builds the report (and lets every plugin change it through
``pytest_json_modifyreport``), then saves it with a plain ``open(path, "w")``: on a full disk
that leaves half a file where the last report was, and two runs writing one path can interleave.
:func:`take_over` replaces the save of the run's ``JSONReport`` (its public ``save_report``) with
:func:`atomic.write_text`: a temporary file in the same folder, then a rename. Whatever plugin
produced the content, the old file stays whole until the new one is complete; a failed write
raises the OSError pytest-json-report reports, and the run fails naming the path (as the
snapshot and the Markdown summary do). The text is standard JSON (:func:`serial.dumps`: no NaN).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

from ..base import atomic, outward
from ..base.serial import dumps


def take_over(config: Any, failed: Callable[[str, str], None]) -> bool:
    """Make the run's JSON report save atomically; ``failed(path, reason)`` hears of a failed
    write. False when pytest-json-report is not writing a report in this run."""
    plugin = json_report_plugin(config)
    if plugin is None:
        return False
    indent = getattr(config.option, "json_report_indent", None)
    given = getattr(config.option, "json_report_file", None)
    if given:  # pytest-json-report names this in its terminal line ("report saved to: …"): shown as every path is
        config.option.json_report_file = outward.line(given)

    def save_report(path: str) -> None:
        path = given or path  # the file asked for, whatever name the terminal line shows
        report = getattr(plugin, "report", None)
        if report is None:
            raise Exception("could not save report: no report available")  # as pytest-json-report says it
        try:
            write(path, report, indent)
        except OSError as exc:
            failed(path, exc.strerror or str(exc))
            raise

    plugin.save_report = save_report
    return True


def json_report_plugin(config: Any) -> Optional[Any]:
    """pytest-json-report's plugin object of this run (not a worker's), found through pytest's
    plugin manager; None without ``--json-report`` or without the plugin."""
    try:
        from pytest_jsonreport.plugin import JSONReport
    except ImportError:
        return None
    return next((p for p in config.pluginmanager.get_plugins() if isinstance(p, JSONReport)), None)


def write(path: str, report: dict[str, Any], indent: Optional[int] = None) -> None:
    """The report to ``path``, its folder made first as pytest-json-report makes it."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    atomic.write_text(path, dumps(report, indent=indent))
