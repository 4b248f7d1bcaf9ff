"""``python -m spark_gotchas diff A.json B.json``: what changed between two runs or two machines.

A and B are each a JSON report (``--json-report``, with its ``spark_gotchas`` object) or a
snapshot (``--spark-snapshot``). Three things are compared:

- statuses: each gotcha's summary status. A status is *worse* when it needs more fixing
  (SKIP/INFO/PASS < WARN < FAIL; a gotcha absent from A that FAILs or WARNs in B is worse too),
  *better* the other way, *changed* otherwise (e.g. PASS -> SKIP).
- key readings: the platform (GPU, driver, CUDA, torch …) from both kinds of document, and
  every reading whose field name carries a unit this suite uses (``_gbps`` bandwidth,
  ``_tflops``, ``_w``/``_mw`` power, ``_mhz`` clocks, ``_c`` temperatures, memory ``_bytes``
  named available/free/total/cached/headroom, ``_ratio``) or names a version. Snapshots hold
  the readings themselves; reports hold the readings each verdict was judged from. Readings
  are found by name, not by a fixed layout, so a reading that changes shape or is missing on
  one side shows as "not in A"/"not in B" instead of breaking the comparison. Numbers within
  ``--tolerance`` percent count as unchanged. A number no machine can give (NaN, an infinity, an
  integer beyond 64 bits, a value outside the range its unit allows: a negative bandwidth) is
  not compared: the reading is named under "Unusable readings" and the rest are compared.
- installed distributions (snapshot reading ``env.distributions``): added, removed, changed.

Exit status: 1 when any status got worse, 0 otherwise, 2 for bad input (one line on stderr), 3
when diff itself fails (``spark-gotchas diff``: one line, never a traceback read as "worse").
"""

from __future__ import annotations

import argparse
import datetime as _dt
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from .. import __version__
from ..base import bounded_read, outward, scrub
from ..base.serial import dumps, number_problem
from ..knowledge.titles import title as gotcha_title
from ..knowledge.verdict import Status
from ..machine.snapshot import FORMAT as SNAPSHOT_FORMAT
from ..machine.snapshot import MOST as snapshot_most
from ..machine.snapshot import SnapshotError
from ..machine.snapshot import from_data as snapshot_from_data
from ..microbench._cli import in_span
from ..microbench.quantities import Epoch, bound_of_name

EXIT_SAME_OR_BETTER, EXIT_WORSE, EXIT_BAD_INPUT = 0, 1, 2
DEFAULT_TOLERANCE_PCT = 5.0
MAX_LIST = 8  # longer lists are series (samples, files): not key readings
SKIP_READINGS = ("env.distributions", "env.baseline")  # compared as distributions, or not at all
PLATFORM_KEYS = (("gpu", "GPU"), ("gpu_count", "GPU count"), ("capability", "compute capability"),
                 ("profile", "profile"), ("driver", "driver"), ("cuda_driver", "CUDA (driver)"),
                 ("torch", "torch"), ("torch_cuda", "torch CUDA"), ("python", "python"),
                 ("machine", "machine"), ("nvml_error", "NVML error"))
CATEGORY_ORDER = ("platform", "version", "memory", "bandwidth", "compute", "clock", "power", "temperature", "ratio")
MEMORY_WORDS = ("avail", "free", "total", "cached", "headroom")
VERSION_NAMES = ("version", "cuda", "driver")


class DiffInputError(Exception):
    """A document that cannot be compared; the message is one line."""


# -- reading the two documents ----------------------------------------------------------------
@dataclass
class GotchaState:
    status: str
    summary: str = ""
    fix: str = ""


@dataclass
class RunDoc:
    """What the diff needs from one report or snapshot."""

    path: str
    kind: str  # "snapshot" | "report"
    created: str
    platform: dict[str, Any]
    statuses: dict[str, GotchaState]
    readings: dict[str, Any]  # "category path" -> value, see key_readings()
    distributions: Optional[dict[str, str]]
    distributions_note: str = ""
    unusable: list[str] = field(default_factory=list)  # "mem.meminfo.mem_total_bytes: 400 digits, beyond 64 bits"


def category(name: str) -> Optional[str]:
    """The kind of key reading a field is, by its name (units in field names), or None."""
    n = name.lower()
    if n.endswith("_gbps") or n in ("gbps", "gbps_best"):  # a bandwidth method's figures, as microbench names them
        return "bandwidth"
    if n.endswith("_tflops") or n in ("tflops", "tflops_best"):
        return "compute"
    if n.endswith(("_w", "_mw")):
        return "power"
    if n.endswith("_mhz"):
        return "clock"
    if n.endswith("_c"):
        return "temperature"
    if n.endswith("_ratio"):
        return "ratio"
    if n.endswith(("_bytes", "_gb", "_gib")) and any(w in n for w in MEMORY_WORDS):
        return "memory"
    if n in VERSION_NAMES or n.endswith("_version"):
        return "version"
    return None


def _leaves(value: Any, path: str) -> Iterator[tuple[str, str, Any]]:
    """(path, last field name, value) for every scalar under ``value``; long lists skipped."""
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _leaves(sub, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        if len(value) <= MAX_LIST and any(isinstance(v, (dict, list)) for v in value):
            for i, sub in enumerate(value):
                yield from _leaves(sub, f"{path}[{i}]")
        elif len(value) <= MAX_LIST:
            yield path, path.rsplit(".", 1)[-1], value  # a short list of scalars is one value
    else:
        yield path, path.rsplit(".", 1)[-1].split("[")[0], value


def key_readings(tree: Any, prefix: str = "", unusable: Optional[list[str]] = None) -> dict[str, tuple[str, Any]]:
    """path -> (category, value) for the key readings found anywhere in ``tree``; a number no
    machine can give is left out and, when ``unusable`` is given, named there with the reason."""
    out: dict[str, tuple[str, Any]] = {}
    for path, name, value in _leaves(tree, prefix):
        cat = category(name)
        if cat is None or not (value is None or isinstance(value, (str, int, float, bool, list))):
            continue
        why = unusable_number(name, value)
        if why:
            if unusable is not None:
                unusable.append(f"{path}: {why}")
            continue
        out[path] = (cat, value)
    return out


def unusable_number(name: str, value: Any) -> Optional[str]:
    """Why a number found under ``name`` is no reading (not finite, beyond 64 bits, outside the
    range of the unit its name declares); None when it is one, or is no number."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    bound = bound_of_name(name.lower())
    return number_problem(value) or (bound.problem(value) if bound is not None else None)


def _status_of(raw: Any) -> Optional[str]:
    try:
        return Status(str(raw).upper()).value
    except ValueError:
        return None


def _platform_readings(platform: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    return {label: ("platform", platform[key]) for key, label in PLATFORM_KEYS if key in platform}


def _from_snapshot(path: str, data: dict[str, Any]) -> RunDoc:
    try:
        snap = snapshot_from_data(data, Path(path))
    except SnapshotError as exc:
        raise DiffInputError(str(exc)) from None
    by_id: dict[str, list[GotchaState]] = {}
    for entry in snap.verdicts:
        if not isinstance(entry, dict):
            continue
        status = _status_of(entry.get("status"))
        gid = scrub.clip(str(entry.get("id", "")), GID_CHARS)  # a field from outside, bounded where printed
        if status is None or not gid.startswith("G"):
            continue
        by_id.setdefault(gid, []).append(GotchaState(status, str(entry.get("summary") or ""), str(entry.get("fix") or "")))
    statuses = {gid: max(group, key=lambda s: Status(s.status).rank) for gid, group in by_id.items()}
    platform = snap.platform if isinstance(snap.platform, dict) else {}
    readings = _platform_readings(platform)
    readings["suite"] = ("version", snap.suite_version or None)
    unusable: list[str] = []
    for key, value in snap.readings.items():
        if key not in SKIP_READINGS:
            readings.update(key_readings(value, key, unusable))
    dists = snap.readings.get("env.distributions")
    versions = dists.get("versions") if isinstance(dists, dict) else None
    ok = isinstance(versions, dict)
    return RunDoc(
        path=path, kind="snapshot", created=snap.created, platform=platform, statuses=statuses, readings=readings,
        distributions={str(k): str(v) for k, v in versions.items()} if ok else None,
        distributions_note="" if ok else "the snapshot has no env.distributions reading", unusable=unusable,
    )


def _from_report(path: str, data: dict[str, Any]) -> RunDoc:
    section = data.get("spark_gotchas")
    if not isinstance(section, dict):
        raise DiffInputError(f"{path} is a pytest JSON report without a spark_gotchas object (no gotcha check ran)")
    statuses: dict[str, GotchaState] = {}
    gotchas = section.get("gotchas")
    if not isinstance(gotchas, dict):  # a gotcha missing from B would read as "not in B", never as worse
        raise DiffInputError(f"{path}: its spark_gotchas object has no gotchas object (not a report of the checks)")
    for gid, entry in gotchas.items():
        status = _status_of(entry.get("status")) if isinstance(entry, dict) else None
        if status is None:
            raise DiffInputError(f"{path}: {scrub.clip(str(gid), 40, mark='')}'s entry in spark_gotchas.gotchas has no status "
                                 "(FAIL, WARN, PASS, INFO or SKIP)")
        statuses[scrub.clip(str(gid), GID_CHARS)] = GotchaState(status, str(entry.get("summary") or ""), str(entry.get("fix") or ""))
    platform = section.get("platform") if isinstance(section.get("platform"), dict) else {}
    readings = _platform_readings(platform)
    readings["suite"] = ("version", section.get("suite_version"))
    unusable: list[str] = []
    for test in data.get("tests") or ():
        meta = test.get("metadata") if isinstance(test, dict) else None
        verdict = meta.get("gotcha") if isinstance(meta, dict) else None
        if isinstance(verdict, dict) and isinstance(verdict.get("readings"), dict):
            name = str(test.get("nodeid", "")).rsplit("::", 1)[-1] or str(verdict.get("id", "?"))
            readings.update(key_readings(verdict["readings"], name, unusable))
    return RunDoc(
        path=path, kind="report", created=_iso(data.get("created")), platform=platform, statuses=statuses,
        readings=readings, distributions=None,
        distributions_note="a JSON report carries no distribution list, compare snapshots for that",
        unusable=unusable,
    )


def _iso(created: Any) -> str:
    """pytest-json-report stores ``created`` as epoch seconds; snapshots as ISO 8601."""
    if _is_number(created) and not Epoch.__metadata__[0].problem(created):
        return _dt.datetime.fromtimestamp(created, _dt.UTC).replace(microsecond=0).isoformat()
    return str(created or "")


def load(path: str) -> RunDoc:
    """Read a report or a snapshot; anything else raises :class:`DiffInputError`."""
    try:
        data, size = bounded_read.read_json_sized(path, bounded_read.REPORT)
    except FileNotFoundError:
        raise DiffInputError(f"{path}: no such file") from None
    except bounded_read.Refused as exc:
        raise DiffInputError(f"{path} is {exc}") from None
    except OSError as exc:
        raise DiffInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise DiffInputError(f"{path} is neither a JSON report nor a snapshot (not a JSON object)")
    if data.get("format") == SNAPSHOT_FORMAT:
        if size > bounded_read.SNAPSHOT.limit:
            raise DiffInputError(f"{path} is larger than {bounded_read.describe_size(bounded_read.SNAPSHOT.limit)}, "
                                 f"{snapshot_most}")
        return _from_snapshot(path, data)
    if "spark_gotchas" in data or "tests" in data:
        return _from_report(path, data)
    raise DiffInputError(f"{path} is neither a pytest JSON report nor a spark-gotchas snapshot")


# -- comparing --------------------------------------------------------------------------------
SEVERITY = {"FAIL": 2, "WARN": 1}


@dataclass
class StatusChange:
    gotcha: str
    title: str
    a: Optional[str]
    b: Optional[str]
    change: str  # worse | better | changed | same
    summary_a: str = ""
    summary_b: str = ""
    fix_b: str = ""


@dataclass
class ReadingChange:
    name: str
    category: str
    a: Any
    b: Any
    change: str  # changed | same | not in A | not in B
    delta_pct: Optional[float] = None


@dataclass
class DistChanges:
    added: dict[str, str] = field(default_factory=dict)
    removed: dict[str, str] = field(default_factory=dict)
    changed: dict[str, list[str]] = field(default_factory=dict)  # name -> [A version, B version]
    unchanged: int = 0
    note: str = ""  # why distributions could not be compared


@dataclass
class Diff:
    a: dict[str, str]
    b: dict[str, str]
    statuses: list[StatusChange]
    readings: list[ReadingChange]
    distributions: DistChanges
    tolerance_pct: float
    unusable: dict[str, list[str]] = field(default_factory=dict)  # "A"/"B" -> readings not compared, and why

    @property
    def worse(self) -> list[str]:
        return [s.gotcha for s in self.statuses if s.change == "worse"]

    @property
    def better(self) -> list[str]:
        return [s.gotcha for s in self.statuses if s.change == "better"]

    @property
    def exit_code(self) -> int:
        return EXIT_WORSE if self.worse else EXIT_SAME_OR_BETTER

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "worse": self.worse, "better": self.better, "exit_code": self.exit_code,
                "tolerance_pct": self.tolerance_pct, "statuses": [asdict(s) for s in self.statuses],
                "readings": [asdict(r) for r in self.readings], "distributions": asdict(self.distributions),
                "unusable": self.unusable}


GID_CHARS = 12  # a gotcha id as shown: G1 … G10, and room for what no id is


def _gid_key(gid: str) -> tuple[int, str]:
    digits = gid[1:]
    return (int(digits), gid) if digits.isdigit() and len(digits) <= 2 else (99, gid)  # G + 10,000 digits: no int()


def compare_status(a: Optional[str], b: Optional[str]) -> str:
    sa, sb = SEVERITY.get(a or "", 0), SEVERITY.get(b or "", 0)
    if sb > sa:
        return "worse"
    if sb < sa:
        return "better"
    return "same" if a == b else "changed"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and number_problem(v) is None


def compare_value(a: Any, b: Any, tolerance_pct: float) -> tuple[str, Optional[float]]:
    if _is_number(a) and _is_number(b):
        delta = None if a == 0 else (b - a) / abs(a) * 100.0
        if a == b or (delta is not None and abs(delta) <= tolerance_pct):
            return "same", delta
        return "changed", delta
    return ("same" if a == b else "changed"), None


def compare(a: RunDoc, b: RunDoc, tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> Diff:
    statuses = []
    for gid in sorted(set(a.statuses) | set(b.statuses), key=_gid_key):
        sa, sb = a.statuses.get(gid), b.statuses.get(gid)
        statuses.append(StatusChange(
            gotcha=gid, title=gotcha_title(gid), a=sa.status if sa else None, b=sb.status if sb else None,
            change=compare_status(sa.status if sa else None, sb.status if sb else None),
            summary_a=sa.summary if sa else "", summary_b=sb.summary if sb else "", fix_b=sb.fix if sb else "",
        ))
    readings = []
    for name in list(a.readings) + [n for n in b.readings if n not in a.readings]:
        cat = (a.readings.get(name) or b.readings.get(name))[0]
        if name not in b.readings:
            readings.append(ReadingChange(name, cat, a.readings[name][1], None, "not in B"))
        elif name not in a.readings:
            readings.append(ReadingChange(name, cat, None, b.readings[name][1], "not in A"))
        else:
            va, vb = a.readings[name][1], b.readings[name][1]
            change, delta = compare_value(va, vb, tolerance_pct)
            readings.append(ReadingChange(name, cat, va, vb, change, delta))
    order = {c: i for i, c in enumerate(CATEGORY_ORDER)}
    readings.sort(key=lambda r: order.get(r.category, len(order)))  # stable: document order within a kind
    dists = DistChanges()
    if a.distributions is None or b.distributions is None:
        dists.note = "; ".join(f"not in {side}: {doc.distributions_note}" for side, doc in (("A", a), ("B", b))
                               if doc.distributions is None)
    else:
        for name in sorted(set(a.distributions) | set(b.distributions)):
            va, vb = a.distributions.get(name), b.distributions.get(name)
            if va is None:
                dists.added[name] = vb
            elif vb is None:
                dists.removed[name] = va
            elif va != vb:
                dists.changed[name] = [va, vb]
            else:
                dists.unchanged += 1
    meta = [{"path": d.path, "kind": d.kind, "created": d.created,
             "suite_version": (d.readings.get("suite") or ("", None))[1] or "an unknown version"} for d in (a, b)]
    unusable = {side: doc.unusable for side, doc in (("A", a), ("B", b)) if doc.unusable}
    return Diff(meta[0], meta[1], statuses, readings, dists, tolerance_pct, unusable)


# -- showing it --------------------------------------------------------------------------------
_UNITS = (("_gbps", "GB/s", 1.0), ("_tflops", "TFLOP/s", 1.0), ("_mw", "W", 1e-3), ("_w", "W", 1.0),
          ("_mhz", "MHz", 1.0), ("_c", "°C", 1.0), ("_bytes", "GiB", 1 / 2**30), ("_ratio", "x", 1.0))


VALUE_CHARS = 100  # a reading's text as diff shows it (a GPU's name, a driver's version)


def show_value(name: str, value: Any) -> str:
    """A reading for people: units from the field name (bytes as GiB, milliwatts as W)."""
    if value is None:
        return "none"
    leaf = "_" + name.rsplit(".", 1)[-1].lower().removesuffix("_best")  # gbps, gbps_best: as _gbps
    if _is_number(value):
        for suffix, unit, scale in _UNITS:
            if leaf.endswith(suffix):
                scaled = value * scale
                return f"{scaled:,.2f} {unit}" if abs(scaled) < 100 else f"{scaled:,.1f} {unit}"
        return str(value)
    if isinstance(value, list):
        shown = "(" + ", ".join(str(v) for v in value) + ")" if leaf.endswith("capability") else dumps(value)
        return outward.field(shown, VALUE_CHARS)
    return outward.field(value, VALUE_CHARS)  # a document's string, bounded and folded where it is printed


def _describe(side: str, meta: dict[str, str], doc_platform: dict[str, Any]) -> list[str]:
    from ..machine.platform import one_line

    created = f", {meta['created']}" if meta.get("created") else ""
    head = f"{side}: {meta['path']} ({meta['kind']}{created})"
    return [head] + ([f"   {one_line(doc_platform)}"] if doc_platform.get("profile") else [])


def render_lines(diff: Diff, platforms: tuple[dict, dict], show_all: bool = False) -> list[str]:
    """The comparison for people, one entry per line: strings from the two documents are inside
    their entries, and :func:`spark_gotchas.base.outward.say` keeps each entry one line."""
    out = ["spark-gotchas diff", *_describe("A", diff.a, platforms[0]), *_describe("B", diff.b, platforms[1]), ""]
    n_worse, n_better = len(diff.worse), len(diff.better)
    out.append(f"Statuses ({n_worse} worse, {n_better} better), as each document recorded them")
    out.append(f"  (judged by spark-gotchas {diff.a.get('suite_version')} in A, {diff.b.get('suite_version')} in B; "
               f"spark-gotchas -m fast --spark-replay FILE judges a snapshot again with {__version__}'s rules)")
    width = max((len(s.title) for s in diff.statuses), default=0)
    for s in diff.statuses:
        a, b = s.a or "not in A", s.b or "not in B"
        arrow = f"{a} -> {b}" if s.a != s.b else a
        mark = {"worse": "WORSE", "better": "better", "changed": "changed", "same": ""}[s.change]
        line = f"  {s.gotcha:<4} {s.title:<{width}}  {arrow:<20} {mark}".rstrip()
        out.append(line)
        if s.change in ("worse", "changed", "better") and s.summary_b:
            out.append(f"         B: {outward.quoted(s.summary_b, limit=500)}")
            if s.change == "worse" and s.fix_b:
                out.append(f"         fix: {outward.quoted(s.fix_b)}")
    if not diff.statuses:
        out.append("  no gotcha verdicts in either document")
    out.append("")
    shown = [r for r in diff.readings if show_all or r.change != "same"]
    same = sum(1 for r in diff.readings if r.change == "same")
    missing = sum(1 for r in diff.readings if r.change.startswith("not in"))
    changed = sum(1 for r in diff.readings if r.change == "changed")
    out.append(f"Key readings ({changed} changed, {missing} on one side only, {same} same within "
               f"{diff.tolerance_pct:g}%{'' if show_all else '; --all lists them'})")
    width = max((len(r.name) for r in shown), default=0)
    for r in shown:
        if r.change == "not in A":
            text = f"not in A -> {show_value(r.name, r.b)}"
        elif r.change == "not in B":
            text = f"{show_value(r.name, r.a)} -> not in B"
        elif r.change == "same":
            text = show_value(r.name, r.a)
        else:
            pct = f" ({r.delta_pct:+.1f}%)" if r.delta_pct is not None else ""
            text = f"{show_value(r.name, r.a)} -> {show_value(r.name, r.b)}{pct}"
        out.append(f"  {r.name:<{width}}  {text}")
    if not shown:
        out.append("  no key reading changed")
    out.append("")
    for side, found in diff.unusable.items():
        out.append(f"Unusable readings in {side} (not compared)")
        out.extend(f"  {_outside(why)}" for why in found)
        out.append("")
    d = diff.distributions
    if d.note:
        out.append(f"Distributions: {d.note}")
    else:
        out.append(f"Distributions ({len(d.changed)} changed, {len(d.added)} added, {len(d.removed)} removed, "
                   f"{d.unchanged} same)")
        field = outward.field
        out.extend(f"  ~ {field(name, 100)} {field(va, 60)} -> {field(vb, 60)}" for name, (va, vb) in d.changed.items())
        out.extend(f"  + {field(name, 100)} {field(v, 60)}" for name, v in d.added.items())
        out.extend(f"  - {field(name, 100)} {field(v, 60)}" for name, v in d.removed.items())
    out.append("")
    if diff.worse:
        out.append(f"Worse in B: {', '.join(diff.worse)} (exit 1)")
    else:
        out.append("No status got worse (exit 0)")
    return out


def _outside(text: str) -> str:
    """A line quoting a document's own keys (a reading's path), as the terminal may show it."""
    from ..base.scrub import mask_text
    from ..base.text import printable

    return printable(mask_text(text))


# -- command line --------------------------------------------------------------------------------
class _Parser(outward.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage and more)
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} (usage: {self.prog} A.json B.json [--json] [--all])\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m spark_gotchas diff",
                description="What changed between two runs or machines: JSON reports (--json-report) or snapshots "
                            "(--spark-snapshot). Exit 1 when a gotcha's status got worse, 2 on bad input.")
    p.add_argument("a", metavar="A.json", help="the earlier run or the reference machine")
    p.add_argument("b", metavar="B.json", help="the later run or the machine to compare")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--all", action="store_true", help="also list key readings that did not change")
    p.add_argument("--tolerance", type=in_span(0, 1000, "percent"), default=DEFAULT_TOLERANCE_PCT, metavar="PCT",
                   help=f"numbers within PCT percent count as unchanged (default {DEFAULT_TOLERANCE_PCT:g})")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        a, b = load(args.a), load(args.b)
    except DiffInputError as exc:
        outward.say(f"spark-gotchas diff: {exc}", err=True)
        return EXIT_BAD_INPUT
    diff = compare(a, b, args.tolerance)
    if args.json:
        outward.say_json(diff.to_json())
    else:
        outward.say(*render_lines(diff, (a.platform, b.platform), args.all))
    return diff.exit_code
