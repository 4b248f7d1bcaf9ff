"""The suite's run options as one typed object, built from pytest's command line and ini.

Each option is declared once, as a field of :class:`RunOptions`: its type, its default, its flag,
its help. The command line flag, the ini key (the name, ``spark_profile = gb10``), the help text
(with the default) and the coercion of a value are all derived from that declaration. Options
that change a judgement (``judged``) are recorded in a snapshot; a replay takes them from there
unless the command line sets them again.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Optional, get_type_hints

from ..base import scrub
from ..knowledge import profiles
from ..knowledge.plan import DEFAULT_LOAD_FACTOR, Plan

PROFILE_CHOICES = profiles.CHOICES  # the one list, in profiles
PRECISION_CHOICES = ("bf16", "fp8", "nvfp4")


@dataclass(frozen=True)
class Span:
    """The values a number may take, ends included unless ``above`` (then ``lo`` itself is not);
    ``off``: one value outside the span that means "none" (a timeout of 0)."""

    lo: float
    hi: float
    unit: str = ""
    above: bool = False
    off: Optional[float] = None
    duration: bool = False  # written as a duration (20s, 30m, 8h): said so in the message
    below: bool = False  # ``hi`` itself is out too

    def problem(self, value: float) -> Optional[str]:
        """Why ``value`` is out of the span, as "must be …"; None when it is in."""
        if self.off is not None and value == self.off:
            return None
        low_ok = value > self.lo if self.above else value >= self.lo
        high_ok = value < self.hi if self.below else value <= self.hi
        if math.isfinite(value) and low_ok and high_ok:
            return None
        return f"must be {self.describe()}"

    def describe(self) -> str:
        """``a number of seconds from 1 to 86400, or 0 for none``: the span in words, for messages and docs."""
        if self.duration:
            return f"a duration from {self.lo:g}s to {self.hi / 3600:g}h"
        unit = f" of {self.unit}" if self.unit else ""
        if self.above or self.below:
            span = (f"{'above' if self.above else 'at least'} {self.lo:g} and "
                    f"{'below' if self.below else 'at most'} {self.hi:g}")
        else:
            span = f"from {self.lo:g} to {self.hi:g}"
        return f"a number{unit} {span}" + (f", or {self.off:g} for none" if self.off is not None else "")


def option(default: Any, flag: str, help: str, *, metavar: str = "", choices: tuple[str, ...] = (),
           judged: bool = False, path: bool = False, span: Optional[Span] = None) -> Any:
    """A field of :class:`RunOptions` with what the command line and the ini need to know of it.
    ``span``: for a number (or a duration), the values it may take; any other is a usage error."""
    return field(default=default, metadata={"flag": flag, "help": help, "metavar": metavar, "choices": choices,
                                            "judged": judged, "path": path, "span": span})


# A fast check's timeout below a second stops checks before they read anything (every one then
# fails with a timeout); beyond a day is no timeout pytest-timeout's timers can keep. A soak runs
# from a second to a week; 10 TB of weights and a load peak of 100 times them are past any plan.
FAST_TIMEOUT = Span(1.0, 86400.0, "seconds", off=0.0)
SOAK_SECONDS = Span(1.0, 7 * 86400.0, "seconds", duration=True)
MODEL_GB = Span(0.0, 10_000.0, "GB", above=True)
LOAD_FACTOR = Span(0.0, 100.0, "", above=True)


@dataclass(frozen=True)
class EnvNumber:
    """An environment variable the suite reads a number from, and the values it may hold."""

    name: str
    span: Span
    what: str  # who reads it, for the docs
    percent: bool = False  # "10%" is 0.10
    integer: bool = False


# Every variable the suite reads a number from. A pytest run refuses a value out of its span before
# any check runs (a usage error, exit 4); the modules that read one fall back to their default.
ENVIRONMENT = (
    EnvNumber("SPARK_GOTCHAS_NVML_TIMEOUT", Span(0.1, 600.0, "seconds"), "each NVML call (nvml.py)"),
    EnvNumber("SPARK_GOTCHAS_GITHUB_TIMEOUT", Span(0.1, 300.0, "seconds"), "G8's exchange with GitHub"),
    EnvNumber("SPARK_GOTCHAS_SOAK_MAX_DROP", Span(0.0, 1.0, "", above=True, below=True), "the G4 soak's verdict",
              percent=True),
    EnvNumber("SPARK_GOTCHAS_COLLECTIVE_TIMEOUT", Span(1.0, 3600.0, "seconds"), "G10's all-reduce probe"),
    EnvNumber("SPARK_GOTCHAS_COLLECTIVE_RENDEZVOUS", Span(1.0, 86400.0, "seconds"), "G10's all-reduce probe"),
    EnvNumber("SPARK_GOTCHAS_NNODES", Span(1.0, 4096.0, "nodes"), "G10's all-reduce probe", integer=True),
    EnvNumber("SPARK_GOTCHAS_NODE_RANK", Span(0.0, 4095.0, ""), "G10's all-reduce probe", integer=True),
)
ENV_BY_NAME = {e.name: e for e in ENVIRONMENT}


def env_number(name: str, environ: Optional[Mapping[str, str]] = None) -> Optional[float]:
    """The number the variable ``name`` (of :data:`ENVIRONMENT`) holds; None when it is unset or
    empty; ValueError naming the variable and its span when it holds anything else."""
    spec = ENV_BY_NAME[name]
    text = (os.environ if environ is None else environ).get(name, "").strip()
    if not text:
        return None
    try:
        number = float(text[:-1]) / 100 if spec.percent and text.endswith("%") else float(text)
    except ValueError:
        number = math.nan
    why = spec.span.problem(number)
    if why is None and spec.integer and not number.is_integer():
        why = f"must be a whole {spec.span.describe()[2:]}"
    if why:
        written = " (0.1 or 10%)" if spec.percent else ""
        raise ValueError(f"{name}={scrub.clip(text, 40, mark='')!r} {why}{written}")
    return int(number) if spec.integer else number


def check_environment(environ: Optional[Mapping[str, str]] = None) -> None:
    """ValueError for the first variable of :data:`ENVIRONMENT` whose value is out of its span."""
    for spec in ENVIRONMENT:
        env_number(spec.name, environ)


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
                                             "G5 decode ceiling)", metavar="GB", judged=True, span=MODEL_GB)
    spark_load_factor: float = option(DEFAULT_LOAD_FACTOR, "--spark-load-factor", "peak memory during a weights load as a multiple of "
                                      "the weights (G3)", metavar="X", judged=True, span=LOAD_FACTOR)
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
                                metavar="DURATION", judged=True, span=SOAK_SECONDS)
    soak_dir: str = option("reports", "--soak-dir", "where the soak writes its CSV, heartbeat and plot",
                           metavar="DIR", path=True)
    spark_fast_timeout: float = option(120.0, "--spark-fast-timeout", "pytest-timeout for each fast check in seconds "
                                       "(0: none)", metavar="S", span=FAST_TIMEOUT)
    explicit: frozenset = field(default=frozenset(), compare=False)  # options the command line set

    def __post_init__(self) -> None:
        """Refuse a value out of its span when the options are made, whoever makes them."""
        for f in declared():
            value = getattr(self, f.name)
            if f.metadata["span"] is not None and value is not None:
                _in_span(f, parse_duration(value) if f.name == "soak_duration" else value)

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
        return _in_span(f, number, value)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {value!r}")
    if f.metadata["choices"] and value not in f.metadata["choices"]:
        raise ValueError(f"{name} must be one of {', '.join(f.metadata['choices'])}, not {value!r}")
    if f.name == "soak_duration":
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        _in_span(f, seconds, value)
    return str(Path(value).expanduser()) if f.metadata["path"] else value


def _in_span(f: Field, number: float, given: Any = None) -> float:
    """``number`` when it is in the option's span; ValueError naming the option and its span."""
    span: Optional[Span] = f.metadata["span"]
    why = span.problem(number) if span is not None else None
    if why:
        raise ValueError(f"{f.metadata['flag']} ({f.name}) {why}, not {given if given is not None else number!r}")
    return number


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def from_config(config: Any) -> RunOptions:
    """Read every option: the command line wins, then the ini value, then the default. The
    environment's numbers (:data:`ENVIRONMENT`) are checked here too: ValueError names the first bad one."""
    check_environment()
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
