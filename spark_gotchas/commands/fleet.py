"""``spark-gotchas fleet FILE…``: many nodes' reports or snapshots, judged as one group.

Per-node G-lines cannot say which node is the slow one or which runs another driver: a node
14% below its identical neighbours still passes on its own. This command reads each file once
(JSON reports or snapshots, one at a time, keeping only what the table needs), prints one table
of nodes x G1-G10 with each node's worst status, then the findings only the group shows:

- **outliers**: a measured figure (G5 bandwidth per method, G4 spot-check TFLOP/s and SM clock
  under load, G7 GEMM rate per precision, G3 load-probe peak) that stands out from the nodes of
  the same profile, by a robust rule: at three or more nodes, a node whose figure lies on the bad
  side of the group's median by more than ``max(3 x 1.4826 x MAD, 10% of the median)`` is a WARN
  naming the node, the figure, its value and the median;
- **stack drift**: the driver, the CUDA driver version, torch and its CUDA build, the NGC image,
  or a training distribution's version differing across nodes of one profile is a WARN naming
  who differs; a FAIL when a ``--spark-launch-config`` given to ``fleet`` says the nodes train
  together (more than one node).

A node is named by its recorded host reading (``host.identity``: host name and boot id); a file
without one is named by its file name. Two files of one node: the newer is judged and a line
says so. A file that cannot be read, or holds no verdict and no figure, is named in a line and
left out; a figure that no machine can measure (NaN, an infinity, a 400-digit integer, a negative
bandwidth: :mod:`microbench.quantities`) is named in a line and left out of the comparison; the
other files and figures are judged all the same. Exit status 1 when a finding is WARN or FAIL
(as ``diff``), 2 when no file could be judged, 3 when fleet itself fails (``spark-gotchas fleet``).
"""

from __future__ import annotations

import datetime as _dt
import os
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Optional

from ..base import bounded_read, outward
from ..base.serial import number_problem
from ..machine.snapshot import FORMAT as SNAPSHOT_FORMAT
from ..microbench.quantities import Epoch, GBps, MHz, Ratio, TFlops

GOTCHAS = [f"G{n}" for n in range(1, 11)]
RANK = {"FAIL": 4, "WARN": 3, "PASS": 2, "INFO": 1, "SKIP": 0}
MAD_SCALE = 1.4826  # MAD of a normal sample times this estimates its standard deviation
MAD_TIMES = 3.0
FLOOR = 0.10  # a figure within 10% of the group's median is never an outlier
MIN_NODES = 3
TRAINING_DISTRIBUTIONS = (
    "torch", "triton", "transformers", "accelerate", "deepspeed", "peft", "trl", "flash-attn", "flash_attn",
    "xformers", "bitsandbytes", "unsloth", "vllm", "megatron-core", "nemo-toolkit", "nvidia-nccl-cu12",
    "nvidia-nccl-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-cublas-cu12", "nvidia-cublas",
)
# figure -> (gotcha, unit, True when higher is better)
FIGURES: dict[str, tuple[str, str, bool]] = {}
RANGES = {"GB/s": GBps, "TFLOP/s": TFlops, "MHz": MHz, "x the weights": Ratio}  # unit -> its quantity


def _figure(name: str, gotcha: str, unit: str, higher_is_better: bool = True) -> str:
    FIGURES[name] = (gotcha, unit, higher_is_better)
    return name


@dataclass
class Node:
    """What the table and the findings need of one file; nothing else is kept."""

    name: str
    file: str
    host: Optional[str] = None
    boot_id: Optional[str] = None
    created: str = ""
    suite_version: Optional[str] = None  # the spark-gotchas that judged the statuses the file holds
    profile: str = "unknown"
    gpu: Optional[str] = None
    statuses: dict[str, str] = field(default_factory=dict)  # G1 -> worst status
    figures: dict[str, float] = field(default_factory=dict)
    stack: dict[str, Optional[str]] = field(default_factory=dict)
    unusable: list[str] = field(default_factory=list)  # "G5 read bandwidth: NaN is not a finite number"


@dataclass
class Finding:
    node: Optional[str]
    gotcha: Optional[str]
    status: str
    summary: str


class FleetInputError(ValueError):
    """A file that is neither a report nor a snapshot; the message says why in a few words."""


# -- reading one file ------------------------------------------------------------------------------
def _get(doc: Any, *path: Any) -> Any:
    for key in path:
        if isinstance(doc, dict):
            doc = doc.get(key)
        elif isinstance(doc, list) and isinstance(key, int) and -len(doc) <= key < len(doc):
            doc = doc[key]
        else:
            return None
    return doc


def _number(value: Any) -> Optional[float]:
    """A JSON number as a float; None for anything else, or a number no machine gives (NaN, an
    infinity, beyond 64 bits)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or number_problem(value):
        return None
    return float(value)


def _text(value: Any) -> Optional[str]:
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def _worst(statuses: Iterable[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for gotcha, status in statuses:
        if status in RANK and (gotcha not in out or RANK[status] > RANK[out[gotcha]]):
            out[gotcha] = status
    return out


class Figures(dict):
    """figure -> value; a value no machine can measure is kept out and named in ``unusable``."""

    def __init__(self) -> None:
        super().__init__()
        self.unusable: list[str] = []


def _add(figures: Figures, name: str, value: Any) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    gotcha, unit, _ = FIGURES[name]
    why = number_problem(value) or RANGES[unit].__metadata__[0].problem(value)
    if why:
        figures.unusable.append(f"{gotcha} {name}: {why}")
    elif value > 0:
        figures[name] = float(value)


def _figures_from_readings(readings: dict[str, Any]) -> Figures:
    """The measured figures, from a snapshot's raw readings."""
    figures = Figures()
    for method in _get(readings, "bench.bandwidth", "result", "methods") or []:
        if isinstance(method, dict) and method.get("check") in ("ok", "", None):
            _add(figures, _figure(f"{method.get('method')} bandwidth", "G5", "GB/s"), method.get("gbps"))
    spot = _get(readings, "thermal.spot_check") or {}
    _add(figures, _figure("GEMM rate under load", "G4", "TFLOP/s"), spot.get("tflops"))
    start, end = _number(spot.get("load_start_s")), _number(spot.get("load_end_s"))
    if start is not None and end is not None:
        clocks = [_number(s.get("sm_clock_mhz")) for s in spot.get("samples") or []
                  if isinstance(s, dict) and _number(s.get("t_s")) is not None and start + 0.3 <= s["t_s"] <= end]
        clocks = [c for c in clocks if c is not None]
        if clocks:
            _add(figures, _figure("SM clock under load", "G4", "MHz"), statistics.median(clocks))
    for result in _get(readings, "bench.gemm", "result", "results") or []:
        if isinstance(result, dict) and result.get("supported") and result.get("check") in ("ok", "", None):
            _add(figures, _figure(f"{result.get('precision')} GEMM rate", "G7", "TFLOP/s"), result.get("tflops"))
    _add(figures, _figure("load-probe peak", "G3", "x the weights", higher_is_better=False),
         _get(readings, "mem.load_probe", "peak_extra_ratio"))
    return figures


def _figures_from_report(tests: list[Any]) -> Figures:
    """The measured figures, from a JSON report's verdict readings."""
    figures = Figures()
    for test in tests:
        gotcha = _get(test, "metadata", "gotcha") or {}
        readings = gotcha.get("readings") if isinstance(gotcha, dict) else None
        if not isinstance(readings, dict):
            continue
        gid = gotcha.get("id")
        if gid == "G5" and isinstance(readings.get("gbps"), dict) and readings.get("array_bytes"):
            for method, gbps in readings["gbps"].items():
                _add(figures, _figure(f"{method} bandwidth", "G5", "GB/s"), gbps)
        elif gid == "G4" and "sm_clock_median_mhz" in readings:
            _add(figures, _figure("GEMM rate under load", "G4", "TFLOP/s"), readings.get("tflops"))
            _add(figures, _figure("SM clock under load", "G4", "MHz"), readings.get("sm_clock_median_mhz"))
        elif gid == "G7" and isinstance(readings.get("tflops"), dict):
            for precision, tflops in readings["tflops"].items():
                _add(figures, _figure(f"{precision} GEMM rate", "G7", "TFLOP/s"), tflops)
        elif gid == "G3" and "peak_extra_ratio" in readings:
            _add(figures, _figure("load-probe peak", "G3", "x the weights", higher_is_better=False),
                 readings.get("peak_extra_ratio"))
    return figures


def _image(container: Any) -> Optional[str]:
    """The NGC (or Unsloth) image a snapshot's env.container reading names; None on a bare host."""
    ngc = _get(container, "ngc_vars") or {}
    if not isinstance(ngc, dict):
        return None
    product = ngc.get("NVIDIA_PRODUCT_NAME")
    version = ngc.get("NVIDIA_PYTORCH_VERSION") or ngc.get("NVIDIA_NEMO_VERSION") or ngc.get("CUDA_VERSION")
    build = ngc.get("NVIDIA_BUILD_ID")
    parts = [p for p in (product, version, f"build {build}" if build else None) if p]
    return " ".join(map(str, parts)) or None


def _stack(platform: Any, readings: Optional[dict]) -> dict[str, Optional[str]]:
    stack = {key: _text(_get(platform, key)) for key in ("driver", "cuda_driver", "torch", "torch_cuda")}
    if readings is not None:
        stack["image"] = _image(readings.get("env.container")) or "none"
        versions = _get(readings, "env.distributions", "versions") or {}
        if isinstance(versions, dict):
            for name in TRAINING_DISTRIBUTIONS:
                if name in versions and name != "torch":
                    stack[name] = _text(versions[name])
    return stack


def file_name(path: str) -> str:
    """A node's name from its file: the folder for ``…/runner-a/snapshot.json`` (one folder per node,
    as CI artifacts come), else the file's own name without ``.json``."""
    stem = os.path.splitext(os.path.basename(path))[0]
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return parent if stem in ("snapshot", "report", "preflight") and parent else stem


def read_node(path: str, name_by: str = "host") -> Node:
    """One file as a :class:`Node`; :class:`FleetInputError` when it is neither report nor snapshot.
    ``name_by="file"`` names it by its file (several runs of one machine as several nodes; CI
    containers whose host name is a container id)."""
    try:
        doc = bounded_read.read_json(path, bounded_read.REPORT)
    except FileNotFoundError:
        raise FleetInputError("does not exist") from None
    except bounded_read.Refused as exc:
        raise FleetInputError(f"is {exc}") from None
    except OSError as exc:
        raise FleetInputError(f"cannot be read: {exc.strerror or exc}") from None
    if not isinstance(doc, dict):
        raise FleetInputError("is neither a JSON report nor a snapshot (not a JSON object)")
    stem = file_name(path)
    if doc.get("format") == SNAPSHOT_FORMAT:
        readings = doc.get("readings") if isinstance(doc.get("readings"), dict) else {}
        verdicts = doc.get("verdicts") if isinstance(doc.get("verdicts"), list) else []
        host = readings.get("host.identity") if isinstance(readings.get("host.identity"), dict) else {}
        platform = doc.get("platform") if isinstance(doc.get("platform"), dict) else {}
        figures = _figures_from_readings(readings)
        return Node(name=(_text(host.get("hostname")) if name_by == "host" else None) or stem, file=path,
                    host=_text(host.get("hostname")), boot_id=_text(host.get("boot_id")),
                    created=_text(doc.get("created")) or "", suite_version=_text(doc.get("suite_version")),
                    profile=_text(platform.get("profile")) or "unknown", gpu=_text(platform.get("gpu")),
                    statuses=_worst((str(v.get("id")), str(v.get("status"))) for v in verdicts if isinstance(v, dict)),
                    figures=dict(figures), unusable=figures.unusable, stack=_stack(platform, readings))
    section = doc.get("spark_gotchas")
    if not isinstance(section, dict) or not isinstance(doc.get("tests"), list):
        raise FleetInputError("is neither a pytest JSON report with a spark_gotchas section nor a snapshot")
    platform = section.get("platform") if isinstance(section.get("platform"), dict) else {}
    gotchas = section.get("gotchas", {})
    if not isinstance(gotchas, dict):  # a row of "-" would read as a node without findings
        raise FleetInputError("has a spark_gotchas section whose gotchas are not an object of verdicts")
    host = platform.get("host") if isinstance(platform.get("host"), dict) else {}
    figures = _figures_from_report(doc["tests"])
    created = _number(doc.get("created"))  # pytest-json-report: epoch seconds; snapshots: ISO 8601 UTC
    created_iso = (_dt.datetime.fromtimestamp(created, _dt.UTC).replace(microsecond=0).isoformat()
                   if created is not None and not Epoch.__metadata__[0].problem(created) else "")
    return Node(name=(_text(host.get("hostname")) if name_by == "host" else None) or stem, file=path,
                host=_text(host.get("hostname")), boot_id=_text(host.get("boot_id")),
                created=created_iso, suite_version=_text(section.get("suite_version")),
                profile=_text(platform.get("profile")) or "unknown", gpu=_text(platform.get("gpu")),
                statuses=_worst((g, str(_get(v, "status"))) for g, v in gotchas.items()),
                figures=dict(figures), unusable=figures.unusable,
                stack=_stack(section.get("versions") or platform, None))


# -- judging the group --------------------------------------------------------------------------------
def outliers(nodes: list[Node]) -> list[Finding]:
    """Figures far from their profile group's median, on the bad side (robust: median and MAD)."""
    found: list[Finding] = []
    groups: dict[str, list[Node]] = {}
    for node in nodes:
        groups.setdefault(node.profile, []).append(node)
    for profile, group in sorted(groups.items()):
        names = sorted({f for n in group for f in n.figures})
        for figure in names:
            values = [(n, n.figures[figure]) for n in group if figure in n.figures]
            if len(values) < MIN_NODES:
                continue
            median = statistics.median(v for _, v in values)
            mad = statistics.median(abs(v - median) for _, v in values)
            allowed = max(MAD_TIMES * MAD_SCALE * mad, FLOOR * abs(median))
            gotcha, unit, higher_better = FIGURES[figure]
            for node, value in values:
                off = median - value if higher_better else value - median
                if off > allowed:
                    side = "below" if higher_better else "above"
                    found.append(Finding(node.name, gotcha, "WARN",
                                         f"{node.name}: {figure} {_fmt(value)} {unit}, {abs(value - median) / median:.0%} "
                                         f"{side} the median {_fmt(median)} {unit} of {len(values)} {profile} nodes"))
    return found


def drift(nodes: list[Node], train_together: bool) -> list[Finding]:
    """Stack values that differ across nodes of one profile; FAIL when the nodes train together."""
    found: list[Finding] = []
    groups: dict[str, list[Node]] = {}
    for node in nodes:
        groups.setdefault(node.profile, []).append(node)
    status = "FAIL" if train_together else "WARN"
    gotcha_of = {"driver": "G1", "cuda_driver": "G1", "torch": "G1", "torch_cuda": "G1"}
    for profile, group in sorted(groups.items()):
        if len(group) < 2:
            continue
        keys = sorted({k for n in group for k in n.stack}, key=lambda k: (k not in gotcha_of, k))
        for key in keys:
            by_value: dict[Optional[str], list[str]] = {}
            for node in group:
                if key in node.stack:
                    by_value.setdefault(node.stack[key], []).append(node.name)
            if len(by_value) < 2:
                continue
            common, _ = max(by_value.items(), key=lambda kv: (len(kv[1]), str(kv[0])))
            for value, who in sorted(by_value.items(), key=lambda kv: str(kv[0])):
                if value == common:
                    continue
                why = " (these nodes train together)" if train_together else ""
                found.append(Finding(
                    ", ".join(who), gotcha_of.get(key, "G9"), status,
                    f"{', '.join(who)}: {key} {value or 'none'} where {len(by_value[common])} other {profile} "
                    f"node(s) run {common or 'none'}{why}"))
    return found


def _fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def train_together(configs: list[str]) -> tuple[bool, list[str]]:
    """Whether a launch config names more than one node, and what could not be read."""
    from ..machine.readers.launch import parse_file

    problems, together = [], False
    for path in configs:
        parsed, _ = parse_file(path)
        if parsed.error:
            problems.append(f"{path}: {parsed.error}")
        elif (parsed.nodes or 1) > 1:
            together = True
    return together, problems


def judge(paths: list[str], configs: list[str] = (), name_by: str = "host") -> tuple[list[Node], list[Finding], list[str]]:
    """(nodes, findings, notes): read every file, one at a time, and judge the group."""
    notes: list[str] = []
    by_name: dict[str, Node] = {}
    for path in paths:
        try:
            node = read_node(path, name_by)
        except FleetInputError as exc:
            notes.append(f"{path} {exc}: left out")
            continue
        except Exception as exc:  # one file the reading above does not foresee never stops the others
            notes.append(f"{path} could not be read ({type(exc).__name__}: {exc}): left out")
            continue
        notes += [f"{path}: {why}: left out of the comparison" for why in node.unusable]
        if not node.statuses and not node.figures and not any(v for k, v in node.stack.items() if k != "image"):
            notes.append(f"{path} holds no verdict, measured figure or version to compare: left out")
            continue
        earlier = by_name.get(node.name)
        if earlier is not None:
            newer, older = (node, earlier) if node.created >= earlier.created else (earlier, node)
            notes.append(f"{older.file} and {newer.file} are the same node ({node.name}): {newer.file} is judged")
            node = newer
        by_name[node.name] = node
    nodes = sorted(by_name.values(), key=lambda n: n.name)
    together, problems = train_together(list(configs))
    notes += [f"launch config {p}" for p in problems]
    if len(nodes) == 1:
        notes.append(f"one node ({nodes[0].name}): nothing to compare it with")
    findings = outliers(nodes) + drift(nodes, together)
    findings.sort(key=lambda f: (-RANK[f.status], GOTCHAS.index(f.gotcha) if f.gotcha in GOTCHAS else 99, f.node or ""))
    return nodes, findings, notes


# -- output -------------------------------------------------------------------------------------------
def table(nodes: list[Node]) -> list[str]:
    """The nodes x G1-G10 table, its columns aligned as the names will be shown."""
    names = {n.name: outward.line(n.name) for n in nodes}
    width = max([len("node")] + [len(shown) for shown in names.values()])
    head = f"{'node':<{width}}  {'profile':<8} " + " ".join(f"{g:<4}" for g in GOTCHAS)
    lines = [head, "-" * len(head)]
    for n in nodes:
        lines.append(f"{names[n.name]:<{width}}  {n.profile:<8} " + " ".join(f"{n.statuses.get(g, '-'):<4}" for g in GOTCHAS))
    return lines


def text_report(nodes: list[Node], findings: list[Finding], notes: list[str]) -> list[str]:
    """The report for people, one entry per line (:func:`spark_gotchas.base.outward.say` keeps each one line)."""
    out = [f"spark-gotchas fleet: {note}" for note in notes]
    out += table(nodes)
    if nodes:
        out.append("")
        worst = sum(1 for n in nodes if any(s == "FAIL" for s in n.statuses.values()))
        out.append(f"{len(nodes)} node(s); {worst} with a FAIL of its own; {len(findings)} finding(s) across the group")
        out.append(recorded_note(nodes))
    out += [f"{f.gotcha} {f.status}: {f.summary}" for f in findings]
    return out


def recorded_note(nodes: list[Node]) -> str:
    """Whose statuses the table shows: each file's own, as the spark-gotchas that wrote it judged them.
    A replay of a snapshot judges its readings again with this version's rules, and may say otherwise."""
    from .. import __version__

    versions = sorted({n.suite_version or "an unknown version" for n in nodes})
    return (f"statuses as each file recorded them (judged by spark-gotchas {', '.join(versions)}); "
            f"spark-gotchas -m fast --spark-replay FILE judges a snapshot again with {__version__}'s rules")


def markdown(nodes: list[Node], findings: list[Finding], notes: list[str]) -> str:
    from ..outputs.summary_md import inline

    out = [f"## spark-gotchas fleet: {len(nodes)} nodes, {len(findings)} findings", ""]
    if notes:
        out += [f"- {inline(n)}" for n in notes] + [""]
    out += ["| node | profile | " + " | ".join(GOTCHAS) + " |", "|---|---|" + "---|" * len(GOTCHAS)]
    for n in nodes:
        out.append(f"| {inline(n.name)} | {inline(n.profile)} | " + " | ".join(n.statuses.get(g, "-") for g in GOTCHAS) + " |")
    out += ["", f"_{inline(recorded_note(nodes))}_"] if nodes else []
    if findings:
        out += ["", "### Findings only the group shows", ""]
        out += [f"- **{f.gotcha} {f.status}**: {inline(f.summary)}" for f in findings]
    return "\n".join(out) + "\n\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = outward.ArgumentParser(prog="spark-gotchas fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE", help="JSON reports or snapshots, one or more per node")
    parser.add_argument("--json", action="store_true", help='print {"nodes": [...], "findings": [...]}')
    parser.add_argument("--summary-md", metavar="PATH", help="append the table and findings as Markdown to PATH")
    parser.add_argument("--name-by", choices=("host", "file"), default="host",
                        help="name each node by its recorded host (default), or by its file or folder: several "
                             "runs of one machine as nodes, CI containers whose host name is a container id")
    parser.add_argument("--spark-launch-config", action="append", default=[], metavar="PATH",
                        help="a launch config saying these nodes train together: stack drift is then a FAIL")
    args = parser.parse_args(argv)
    nodes, findings, notes = judge(args.files, args.spark_launch_config, args.name_by)
    if args.json:
        outward.say_json({"nodes": [asdict(n) for n in nodes], "findings": [asdict(f) for f in findings], "notes": notes})
    else:
        outward.say(*text_report(nodes, findings, notes))
    if args.summary_md:
        from ..base import atomic

        try:
            atomic.write_text(args.summary_md, outward.markdown(markdown(nodes, findings, notes)), append=True)
        except OSError as exc:
            outward.say(f"spark-gotchas fleet: could not write {args.summary_md}: {exc.strerror or exc}", err=True)
            return 2
    if not nodes:
        return 2
    return 1 if any(f.status in ("WARN", "FAIL") for f in findings) else 0
