"""The suite's run options as one typed object, built from pytest's command line and ini.

Each option is declared once, as a field of :class:`RunOptions`: its type, its default, its flag,
its help. The command line flag, the ini key (the name, ``spark_profile = gb10``), the help text
(with the default) and the coercion of a value are all derived from that declaration. Options
that change a judgement (``judged``) are recorded in a snapshot; a replay takes them from there
unless the command line sets them again.
"""

from __future__ import annotations

import math
import re
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Optional, get_type_hints

from .plan import DEFAULT_LOAD_FACTOR, Plan

PROFILE_CHOICES = ("auto", "gb10", "h100", "h200", "gh200", "generic")
PRECISION_CHOICES = ("bf16", "fp8", "nvfp4")


def option(default: Any, flag: str, help: str, *, metavar: str = "", choices: tuple[str, ...] = (),
           judged: bool = False, path: bool = False, zero: Optional[bool] = None) -> Any:
    """A field of :class:`RunOptions` with what the command line and the ini need to know of it.
    ``zero``: for a number, whether 0 is allowed (False: it must be positive); never negative."""
    return field(default=default, metadata={"flag": flag, "help": help, "metavar": metavar, "choices": choices,
                                            "judged": judged, "path": path, "zero": zero})


@dataclass(frozen=True)
class RunOptions:
    spark_profile: str = option("auto", "--spark-profile", "platform profile to judge against; auto picks it from the device",
                                choices=PROFILE_CHOICES, judged=True)
    spark_strict: bool = option(False, "--spark-strict", "WARN verdicts fail the run (ini: true/false)")
    spark_snapshot: Optional[str] = option(None, "--spark-snapshot", "write every reading this run took to PATH "
                                           "(JSON, see docs/snapshot.md)", metavar="PATH", path=True)
    spark_replay: Optional[str] = option(None, "--spark-replay", "judge a recorded snapshot instead of this machine "
                                         "(no GPU, NVML or torch needed)", metavar="PATH", path=True)
    spark_model_gb: Optional[float] = option(None, "--spark-model-gb", "planned model weights in GB (G3 headroom, "
                                             "G5 decode ceiling)", metavar="GB", judged=True, zero=False)
    spark_load_factor: float = option(DEFAULT_LOAD_FACTOR, "--spark-load-factor", "peak memory during a weights load as a multiple of "
                                      "the weights (G3)", metavar="X", judged=True, zero=False)
    spark_baseline: Optional[str] = option(None, "--spark-baseline", "snapshot of a known-good run: G9 lists what "
                                           "changed since", metavar="PATH", path=True)
    spark_precision: Optional[str] = option(None, "--spark-precision", "precision the planned run uses (G7)",
                                            choices=PRECISION_CHOICES, judged=True)
    spark_playbook: tuple[str, ...] = option((), "--spark-playbook", "DGX Spark playbook about to be used "
                                             "(G8; repeatable)", metavar="NAME", judged=True)
    spark_launch_config: tuple[str, ...] = option((), "--spark-launch-config", "launch config or script to review "
                                                  "for tensor parallelism (G10; repeatable)", metavar="PATH",
                                                  judged=True, path=True)
    spark_summary_md: Optional[str] = option(None, "--spark-summary-md", "append the G-line summary as Markdown to "
                                             "PATH (e.g. $GITHUB_STEP_SUMMARY)", metavar="PATH", path=True)
    spark_prometheus: Optional[str] = option(None, "--spark-prometheus", "write each gotcha's status and the key "
                                             "readings as Prometheus metrics to PATH (node_exporter's textfile "
                                             "collector; docs/operations.md)", metavar="PATH", path=True)
    soak_duration: str = option("30m", "--soak-duration", "how long the soak loads the GPU, e.g. 20s, 30m, 8h",
                                metavar="DURATION", judged=True)
    soak_dir: str = option("reports", "--soak-dir", "where the soak writes its CSV, heartbeat and plot",
                           metavar="DIR", path=True)
    spark_fast_timeout: float = option(120.0, "--spark-fast-timeout", "pytest-timeout for each fast check in seconds "
                                       "(0: none)", metavar="S", zero=True)
    explicit: frozenset = field(default=frozenset(), compare=False)  # options the command line set

    def __post_init__(self) -> None:
        parse_duration(self.soak_duration)  # refuse a bad duration when the options are made

    @property
    def plan(self) -> Plan:
        """The planned run, as the judges read it."""
        return Plan(model_gb=self.spark_model_gb, load_factor=self.spark_load_factor, precision=self.spark_precision)

    @property
    def soak_seconds(self) -> float:
        return parse_duration(self.soak_duration)

    def judged(self) -> dict[str, Any]:
        """The options that change a judgement, JSON-ready (for the snapshot)."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in declared() if f.metadata["judged"]}

    def with_recorded(self, recorded: dict[str, Any]) -> RunOptions:
        """Fill options the command line did not set from a snapshot's recorded ones.

        Raises ValueError for a recorded value the command line would refuse.
        """
        if recorded is not None and not isinstance(recorded, dict):
            raise ValueError(f"the options are not a JSON object but {type(recorded).__name__}")
        known = {f.name: f for f in declared()}
        changes = {name: coerce(known[name], value) for name, value in (recorded or {}).items()
                   if name in known and name not in self.explicit and value is not None}
        return replace(self, **changes) if changes else self


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.I)
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str | float | int) -> float:
    """``'20s'``, ``'30m'``, ``'8h'``, ``'1.5h'``, ``'90'`` -> seconds. Raises ValueError."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 20s, 30m, 8h)")
    return float(match.group(1)) * _UNIT_S[match.group(2).lower()]


def declared() -> list[Field]:
    """The options, in declaration order (not ``explicit``, which records where values came from)."""
    return [f for f in fields(RunOptions) if "flag" in f.metadata]


_TYPES = get_type_hints(RunOptions)


def kind(f: Field) -> type:
    """bool, float, str or tuple: what a value of the option is, from its annotation."""
    hint = _TYPES[f.name]
    for candidate in (bool, float, tuple, str):
        if hint is candidate or candidate in getattr(hint, "__args__", ()) or getattr(hint, "__origin__", None) is candidate:
            return candidate
    raise TypeError(f"{f.name}: an option must be a bool, float, str or tuple of str, not {hint}")


def help_text(f: Field, ini: bool = False) -> str:
    """The help line, with the default stated (and for the ini key, the choices the flag shows)."""
    meta, text = f.metadata, f.metadata["help"]
    if meta["choices"] and ini:
        text += f" ({', '.join(meta['choices'])})"
    if f.default not in (None, (), False):
        text += f"; default {f.default:g}" if isinstance(f.default, float) else f"; default {f.default}"
    return text


def addoption_kwargs(f: Field) -> dict[str, Any]:
    """argparse arguments for the option's flag; every value is coerced by :func:`coerce`, so the
    command line, the ini file and a snapshot refuse a value with the same message."""
    what = kind(f)
    if what is bool:
        return {"action": "store_true", "default": None}
    kwargs: dict[str, Any] = {"metavar": f.metadata["metavar"] or "{" + ",".join(f.metadata["choices"]) + "}"}
    if what is tuple:
        kwargs["action"] = "append"
    return kwargs


def ini_type(f: Field) -> str:
    return "args" if kind(f) is tuple else "string"


def coerce(f: Field, value: Any) -> Any:
    """A command line, ini or snapshot value as the option's type; ValueError says why not."""
    name = f"{f.metadata['flag']} ({f.name})"
    what = kind(f)
    if what is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{name}: invalid truth value {value!r}")
    if what is tuple:
        items = value if isinstance(value, (list, tuple)) else str(value).split()
        if not all(isinstance(v, str) for v in items):
            raise ValueError(f"{name} must be a list of strings, not {value!r}")
        items = tuple(items)
        return tuple(str(Path(v).expanduser()) for v in items) if f.metadata["path"] else items
    if what is float:
        try:
            if isinstance(value, bool):
                raise TypeError
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number, not {value!r}") from None
        zero = bool(f.metadata["zero"])
        if math.isnan(number) or math.isinf(number) or number < 0 or (number == 0 and not zero):
            raise ValueError(f"{name} must be a {'non-negative' if zero else 'positive'} number, not {value!r}")
        return number
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {value!r}")
    if f.metadata["choices"] and value not in f.metadata["choices"]:
        raise ValueError(f"{name} must be one of {', '.join(f.metadata['choices'])}, not {value!r}")
    if f.name == "soak_duration":
        parse_duration(value)
    return str(Path(value).expanduser()) if f.metadata["path"] else value


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def from_config(config: Any) -> RunOptions:
    """Read every option: the command line wins, then the ini value, then the default."""
    values: dict[str, Any] = {}
    explicit = set()
    for f in declared():
        value = config.getoption(f.name, default=None)
        if value not in (None, [], ()):
            explicit.add(f.name)
        else:
            ini = config.getini(f.name)
            value = ini if ini not in (None, "", []) else None
        if value not in (None, [], ()):
            values[f.name] = coerce(f, value)
    return RunOptions(**values, explicit=frozenset(explicit))
