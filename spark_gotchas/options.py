"""The suite's run options as one typed object, built from pytest's command line and ini.

Every option is also an ini key of the same name with underscores (``spark_profile = gb10``).
Options that change a judgement are recorded in a snapshot; a replay takes them from there
unless the command line sets them again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Optional

# (dest, flags, kwargs for addoption, ini type, help). Declared once, used by the plugin.
OPTION_SPECS: list[tuple[str, str, dict[str, Any], str, str]] = [
    ("spark_profile", "--spark-profile", {"choices": ("auto", "gb10", "h100", "h200", "gh200", "generic")},
     "string", "platform profile to judge against (default: auto, from the device)"),
    ("spark_strict", "--spark-strict", {"action": "store_true", "default": None},
     "string", "WARN verdicts fail the run (ini: true/false)"),
    ("spark_snapshot", "--spark-snapshot", {"metavar": "PATH"},
     "string", "write every reading this run took to PATH (JSON, see docs/snapshot.md)"),
    ("spark_replay", "--spark-replay", {"metavar": "PATH"},
     "string", "judge a recorded snapshot instead of this machine (no GPU, NVML or torch needed)"),
    ("spark_model_gb", "--spark-model-gb", {"type": float, "metavar": "GB"},
     "string", "planned model weights in GB (G3 headroom, G5 decode ceiling)"),
    ("spark_load_factor", "--spark-load-factor", {"type": float, "metavar": "X"},
     "string", "peak memory during a weights load as a multiple of the weights (G3; default 2.0)"),
    ("spark_baseline", "--spark-baseline", {"metavar": "PATH"},
     "string", "snapshot of a known-good run: G9 lists what changed since"),
    ("spark_precision", "--spark-precision", {"choices": ("bf16", "fp8", "nvfp4")},
     "string", "precision the planned run uses (G7)"),
    ("spark_playbook", "--spark-playbook", {"action": "append", "metavar": "NAME"},
     "args", "DGX Spark playbook about to be used (G8; repeatable)"),
    ("spark_launch_config", "--spark-launch-config", {"action": "append", "metavar": "PATH"},
     "args", "launch config or script to review for tensor parallelism (G10; repeatable)"),
    ("spark_summary_md", "--spark-summary-md", {"metavar": "PATH"},
     "string", "write the G-line summary as Markdown to PATH (e.g. $GITHUB_STEP_SUMMARY)"),
    ("soak_duration", "--soak-duration", {"metavar": "DURATION"},
     "string", "how long the soak loads the GPU, e.g. 20s, 30m, 8h (default 30m)"),
    ("soak_dir", "--soak-dir", {"metavar": "DIR"},
     "string", "where the soak writes its CSV, heartbeat and plot (default reports/)"),
    ("spark_fast_timeout", "--spark-fast-timeout", {"type": float, "metavar": "S"},
     "string", "pytest-timeout for each fast check in seconds (default 120)"),
]

# Options that change a judgement: recorded in snapshots, restored on replay.
JUDGED = ("spark_profile", "spark_model_gb", "spark_load_factor", "spark_precision",
          "spark_playbook", "spark_launch_config", "soak_duration")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.I)
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str | float | int) -> float:
    """``'20s'``, ``'30m'``, ``'8h'``, ``'1.5h'``, ``'90'`` -> seconds. Raises ValueError."""
    if isinstance(text, (int, float)):
        return float(text)
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 20s, 30m, 8h)")
    return float(match.group(1)) * _UNIT_S[match.group(2).lower()]


@dataclass(frozen=True)
class RunOptions:
    spark_profile: str = "auto"
    spark_strict: bool = False
    spark_snapshot: Optional[str] = None
    spark_replay: Optional[str] = None
    spark_model_gb: Optional[float] = None
    spark_load_factor: float = 2.0
    spark_baseline: Optional[str] = None
    spark_precision: Optional[str] = None
    spark_playbook: tuple[str, ...] = ()
    spark_launch_config: tuple[str, ...] = ()
    spark_summary_md: Optional[str] = None
    soak_duration: str = "30m"
    soak_dir: str = "reports"
    spark_fast_timeout: float = 120.0
    explicit: frozenset = field(default=frozenset(), compare=False)

    @property
    def soak_seconds(self) -> float:
        return parse_duration(self.soak_duration)

    def judged(self) -> dict[str, Any]:
        """The options that change a judgement, JSON-ready (for the snapshot)."""
        return {name: _jsonable(getattr(self, name)) for name in JUDGED}

    def with_recorded(self, recorded: dict[str, Any]) -> RunOptions:
        """Fill options the command line did not set from a snapshot's recorded ones.

        Raises ValueError for a recorded value the command line would refuse.
        """
        if recorded is not None and not isinstance(recorded, dict):
            raise ValueError(f"the options are not a JSON object but {type(recorded).__name__}")
        changes = {}
        known = {f.name: f for f in fields(self)}
        for name, value in (recorded or {}).items():
            if name in known and name not in self.explicit and value is not None:
                changes[name] = _coerce(name, tuple(value) if isinstance(value, list) else value)
        return replace(self, **changes) if changes else self


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _coerce(dest: str, value: Any) -> Any:
    default = RunOptions.__dataclass_fields__[dest].default
    if isinstance(default, bool):  # read as a string: pytest's own bool check differs between versions
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"--{dest.replace('_', '-')} ({dest}): invalid truth value {value!r}")
    if isinstance(default, tuple):
        return tuple(value if isinstance(value, (list, tuple)) else str(value).split())
    name = f"--{dest.replace('_', '-')} ({dest})"
    if dest in ("spark_model_gb", "spark_load_factor", "spark_fast_timeout"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number, not {value!r}") from None
        if not (number >= 0 if dest == "spark_fast_timeout" else number > 0) or number == float("inf"):
            raise ValueError(f"{name} must be a positive number, not {value!r}")
        return number
    choices = _CHOICES.get(dest)
    if choices is not None and value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


_CHOICES = {dest: kw["choices"] for dest, _flag, kw, _ini, _help in OPTION_SPECS if "choices" in kw}


def from_config(config: Any) -> RunOptions:
    """Read every option: the command line wins, then the ini value, then the default."""
    values: dict[str, Any] = {}
    explicit = set()
    for dest, _flag, _kw, _ini_type, _help in OPTION_SPECS:
        value = config.getoption(dest, default=None)
        if value not in (None, [], ()):
            explicit.add(dest)
        else:
            ini = config.getini(dest)
            value = ini if ini not in (None, "", []) else None
        if value not in (None, [], ()):
            values[dest] = _coerce(dest, value)
    for key in ("spark_snapshot", "spark_replay", "spark_baseline", "spark_summary_md", "soak_dir"):
        if values.get(key):
            values[key] = str(Path(values[key]).expanduser())
    values["spark_launch_config"] = tuple(
        str(Path(p).expanduser()) for p in values.get("spark_launch_config", ())
    )
    return RunOptions(**values, explicit=frozenset(explicit))
