"""The soak's record: a CSV written one flushed line per event, the heartbeat, and the windows.

The CSV is an event log with one header: ``start`` (the plan), ``sample`` (one sampler tick),
``window`` (one load window's throughput) and ``end`` (why it stopped). Each line goes out in
one write and is flushed at once, so a killed run loses nothing it measured; the file and the
heartbeat are also fsynced every 30 s, for a power loss. A record with no ``end`` line is a run
that was killed or lost power.

The per-window series is built from those events by :class:`WindowBuilder`, the same way live
and from a recorded CSV, so ``python -m spark_gotchas.runtime.soak.record CSV`` (``spark-gotchas
soak-record CSV``) gives the verdict the run gave. That command is a tool on top of the record:
it alone judges, and imports the judge only when it runs.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ...base import bounded_read, outward
from ...base.serial import from_jsonable, to_jsonable
from ...knowledge.readings.thermal import DEFAULT_MAX_DROP, Heartbeat, SoakReading, SoakWindow, ThermalSample
from ...knowledge.verdict import format_line
from ...machine.readers.thermal.reboot import write_heartbeat

COLUMNS = [
    "event", "t_s", "epoch_s", "temperature_c", "power_w", "sm_clock_mhz", "mem_clock_mhz", "utilization_pct",
    "reasons_hex", "sw_power_cap_us", "thermal_us", "sw_thermal_us", "hw_thermal_us", "hw_power_brake_us",
    "parent_rss_bytes", "window", "window_seconds", "tflops", "busy_fraction", "worker_rss_bytes", "note",
]
COUNTER_COLUMNS = {"sw_power_cap": "sw_power_cap_us", "thermal": "thermal_us", "sw_thermal": "sw_thermal_us",
                   "hw_thermal": "hw_thermal_us", "hw_power_brake": "hw_power_brake_us"}
MAX_WINDOWS = 720  # a snapshot keeps at most this many windows (long soaks are merged pairwise)
FSYNC_EVERY_S = 30.0
NO_END = "no end marker: the run was killed or the machine lost power"


@dataclass
class SoakSample(ThermalSample):
    """A sampler tick as the soak records it: NVML values plus nvidia-smi counters and memory."""

    epoch_s: float = 0.0
    sw_thermal_us: Optional[float] = None
    hw_thermal_us: Optional[float] = None
    hw_power_brake_us: Optional[float] = None
    parent_rss_bytes: Optional[int] = None

    def counter(self, key: str) -> Optional[float]:
        return getattr(self, COUNTER_COLUMNS[key])


# -- windows ----------------------------------------------------------------------------------
def _mean(values: list[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


class WindowBuilder:
    """Samples in, windows out: a window takes the samples inside its time span."""

    def __init__(self) -> None:
        self.pending: list[SoakSample] = []
        self.baseline: dict[str, float] = {}  # last value of each counter before the open window
        self.windows: list[SoakWindow] = []

    def add_sample(self, sample: SoakSample) -> None:
        self.pending.append(sample)

    def close(self, index: int, t_end_s: float, seconds: float, tflops: Optional[float],
              busy: Optional[float], worker_rss: Optional[int]) -> SoakWindow:
        start = t_end_s - seconds
        inside = [s for s in self.pending if start <= s.t_s <= t_end_s]
        before = [s for s in self.pending if s.t_s < start]
        self.pending = [s for s in self.pending if s.t_s > t_end_s]
        for sample in before:
            self._note_counters(sample)
        deltas: dict[str, float] = {}
        for key in COUNTER_COLUMNS:
            values = [s.counter(key) for s in inside if s.counter(key) is not None]
            if not values:
                continue
            base = self.baseline.get(key, values[0])
            if values[-1] >= base:
                deltas[key] = values[-1] - base
            self.baseline[key] = values[-1]
        temps = [s.temperature_c for s in inside if s.temperature_c is not None]
        clocks = [s.sm_clock_mhz for s in inside if s.sm_clock_mhz is not None]
        masks = [s.reasons_mask for s in inside if s.reasons_mask is not None]
        mask = 0
        for m in masks:
            mask |= m
        rss = [s.parent_rss_bytes for s in inside if s.parent_rss_bytes is not None]
        window = SoakWindow(
            index=index, t_end_s=t_end_s, seconds=seconds, tflops=tflops, busy_fraction=busy, samples=len(inside),
            temperature_max_c=max(temps) if temps else None,
            temperature_mean_c=_mean(temps),
            power_mean_w=_mean([s.power_w for s in inside if s.power_w is not None]),
            sm_clock_median_mhz=statistics.median(clocks) if clocks else None,
            sm_clock_min_mhz=min(clocks) if clocks else None,
            sm_clock_max_mhz=max(clocks) if clocks else None,
            utilization_mean_pct=_mean([s.utilization_pct for s in inside if s.utilization_pct is not None]),
            reasons_mask=mask if masks else None,
            counter_deltas_us=deltas,
            worker_rss_bytes=worker_rss,
            parent_rss_bytes=rss[-1] if rss else None,
        )
        self.windows.append(window)
        return window

    def _note_counters(self, sample: SoakSample) -> None:
        for key in COUNTER_COLUMNS:
            value = sample.counter(key)
            if value is not None:
                self.baseline[key] = value


def _weighted(a: Optional[float], wa: float, b: Optional[float], wb: float) -> Optional[float]:
    if a is None:
        return b
    if b is None:
        return a
    return (a * wa + b * wb) / (wa + wb)


def merge(a: SoakWindow, b: SoakWindow) -> SoakWindow:
    """Two neighbouring windows as one (time-weighted means; max/min/OR/sums where they fit)."""
    wa, wb = a.seconds, b.seconds

    def pick(f, x, y):
        values = [v for v in (x, y) if v is not None]
        return f(values) if values else None

    deltas = dict(a.counter_deltas_us)
    for key, value in b.counter_deltas_us.items():
        deltas[key] = deltas.get(key, 0.0) + value
    return SoakWindow(
        index=a.index, t_end_s=b.t_end_s, seconds=wa + wb,
        tflops=_weighted(a.tflops, wa, b.tflops, wb),
        busy_fraction=_weighted(a.busy_fraction, wa, b.busy_fraction, wb),
        samples=a.samples + b.samples,
        temperature_max_c=pick(max, a.temperature_max_c, b.temperature_max_c),
        temperature_mean_c=_weighted(a.temperature_mean_c, wa, b.temperature_mean_c, wb),
        power_mean_w=_weighted(a.power_mean_w, wa, b.power_mean_w, wb),
        sm_clock_median_mhz=_weighted(a.sm_clock_median_mhz, wa, b.sm_clock_median_mhz, wb),
        sm_clock_min_mhz=pick(min, a.sm_clock_min_mhz, b.sm_clock_min_mhz),
        sm_clock_max_mhz=pick(max, a.sm_clock_max_mhz, b.sm_clock_max_mhz),
        utilization_mean_pct=_weighted(a.utilization_mean_pct, wa, b.utilization_mean_pct, wb),
        reasons_mask=pick(lambda vs: vs[0] | vs[-1], a.reasons_mask, b.reasons_mask),
        counter_deltas_us=deltas,
        worker_rss_bytes=b.worker_rss_bytes if b.worker_rss_bytes is not None else a.worker_rss_bytes,
        parent_rss_bytes=b.parent_rss_bytes if b.parent_rss_bytes is not None else a.parent_rss_bytes,
    )


def downsample(windows: list[SoakWindow], limit: int = MAX_WINDOWS) -> tuple[list[SoakWindow], int]:
    """Merge neighbouring pairs until at most ``limit`` windows remain; (windows, windows per entry)."""
    merged = 1
    while len(windows) > limit:
        windows = [merge(windows[i], windows[i + 1]) if i + 1 < len(windows) else windows[i]
                   for i in range(0, len(windows), 2)]
        merged *= 2
    return windows, merged


# -- the CSV -------------------------------------------------------------------------------------
def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):  # no reading: the cell stays empty, as for None
            return ""
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"
    return outward.record(str(value))  # a note may quote a command line: masked, kept as read


def drop_fraction(text: str) -> float:
    """A throughput fall as a user writes it, ``0.1`` or ``10%``, as a fraction in (0, 1)."""
    text = text.strip()
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise ValueError(f"{text!r} is not a fraction in (0, 1)")
    return value


def format_meta(meta: dict[str, Any]) -> str:
    return ";".join(f"{k}={_fmt(v)}" for k, v in meta.items() if v is not None)


def parse_meta(text: str) -> dict[str, str]:
    out = {}
    for part in (text or "").split(";"):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


class Recorder:
    """Writes the CSV and heartbeat as events happen and builds the windows. Thread-safe."""

    def __init__(self, csv_path: Path, heartbeat_path: Optional[Path], beat: Optional[Heartbeat],
                 t0_epoch: float, meta: dict[str, Any]):
        self.csv_path = Path(csv_path)
        self.heartbeat_path = heartbeat_path
        self.beat = beat
        self.t0 = t0_epoch
        self.builder = WindowBuilder()
        self.samples = 0
        self.first_window_note: Optional[str] = None
        self._lock = threading.Lock()
        self._fh = open(self.csv_path, "w", encoding="utf-8", newline="")
        self._last_sync = time.monotonic()
        self._write_row({c: c for c in COLUMNS})  # the header
        self._write_row({"event": "start", "t_s": 0.0, "epoch_s": t0_epoch, "note": format_meta(meta)})
        self._beat(fsync=True)

    def _write_row(self, values: dict[str, Any]) -> None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([_fmt(values.get(c)) for c in COLUMNS])
        self._fh.write(buf.getvalue())  # one write per line, flushed: a kill keeps every whole line
        self._fh.flush()

    def _beat(self, fsync: bool = False) -> None:
        """Replace the heartbeat whole (a unique temp file renamed into place): a crash, or a second
        soak writing the same folder, leaves a whole heartbeat, never a torn one."""
        if self.heartbeat_path is not None and self.beat is not None:
            write_heartbeat(self.heartbeat_path, self.beat, fsync=fsync)

    def _maybe_sync(self) -> None:
        if time.monotonic() - self._last_sync >= FSYNC_EVERY_S:
            self._last_sync = time.monotonic()
            try:
                os.fsync(self._fh.fileno())
            except OSError:
                pass
            self._beat(fsync=True)
        else:
            self._beat()

    def sample(self, s: SoakSample) -> None:
        with self._lock:
            if self._fh.closed:
                return
            row = {
                "event": "sample", "t_s": s.t_s, "epoch_s": s.epoch_s, "temperature_c": s.temperature_c,
                "power_w": s.power_w, "sm_clock_mhz": s.sm_clock_mhz, "mem_clock_mhz": s.mem_clock_mhz,
                "utilization_pct": s.utilization_pct,
                "reasons_hex": None if s.reasons_mask is None else f"0x{s.reasons_mask:x}",
                "parent_rss_bytes": s.parent_rss_bytes,
            }
            row.update({col: s.counter(key) for key, col in COUNTER_COLUMNS.items()})
            self._write_row(row)
            self.builder.add_sample(s)
            self.samples += 1
            if self.beat is not None:
                self.beat.last_sample_epoch = s.epoch_s
                self.beat.samples = self.samples
            self._maybe_sync()

    def window(self, msg: dict[str, Any], note: str = "") -> SoakWindow:
        """Close a load window from the load's progress message (``t_end_epoch``, ``seconds`` …)."""
        with self._lock:
            t_end = float(msg["t_end_epoch"]) - self.t0
            index = len(self.builder.windows)
            self._write_row({"event": "window", "t_s": t_end, "epoch_s": msg["t_end_epoch"], "window": index,
                             "window_seconds": msg["seconds"], "tflops": msg.get("tflops"),
                             "busy_fraction": msg.get("busy_fraction"), "worker_rss_bytes": msg.get("rss_bytes"),
                             "note": note})
            return self.builder.close(index, t_end, float(msg["seconds"]), msg.get("tflops"),
                                      msg.get("busy_fraction"), msg.get("rss_bytes"))

    def finish(self, reason: str) -> None:
        """Write the end line and the heartbeat's end marker; close the CSV."""
        with self._lock:
            if self._fh.closed:
                return
            now = time.time()
            self._write_row({"event": "end", "t_s": now - self.t0, "epoch_s": now, "note": reason})
            try:
                os.fsync(self._fh.fileno())
            except OSError:
                pass
            self._fh.close()
            if self.beat is not None:
                self.beat.ended_epoch = now
                self.beat.end_reason = reason
                self._beat(fsync=True)

    @property
    def windows(self) -> list[SoakWindow]:
        return self.builder.windows


def _float(text: str) -> Optional[float]:
    """A cell's number; None when empty or not a number. A cell reading ``nan`` or ``inf`` is no
    measurement: :class:`NotFinite`, which :func:`read_csv` turns into a line naming the cell."""
    try:
        value = float(text) if text not in ("", None) else None
    except ValueError:
        return None
    if value is not None and not math.isfinite(value):
        raise NotFinite(text)
    return value


class NotFinite(ValueError):
    """A CSV cell holding NaN or an infinity."""


def sample_from_row(row: dict[str, str]) -> SoakSample:
    reasons = row.get("reasons_hex") or ""
    return SoakSample(
        t_s=_float(row["t_s"]) or 0.0, epoch_s=_float(row.get("epoch_s", "")) or 0.0,
        temperature_c=_float(row.get("temperature_c", "")), power_w=_float(row.get("power_w", "")),
        sm_clock_mhz=_float(row.get("sm_clock_mhz", "")), mem_clock_mhz=_float(row.get("mem_clock_mhz", "")),
        utilization_pct=_float(row.get("utilization_pct", "")),
        reasons_mask=int(reasons, 16) if reasons else None,
        sw_power_cap_us=_float(row.get("sw_power_cap_us", "")), thermal_us=_float(row.get("thermal_us", "")),
        sw_thermal_us=_float(row.get("sw_thermal_us", "")), hw_thermal_us=_float(row.get("hw_thermal_us", "")),
        hw_power_brake_us=_float(row.get("hw_power_brake_us", "")),
        parent_rss_bytes=_int(row.get("parent_rss_bytes", "")),
    )


@dataclass
class CsvRecord:
    """A recorded CSV read back: the reading it gives, its samples, and lines that were torn."""

    reading: SoakReading
    samples: list[SoakSample] = field(default_factory=list)
    torn_lines: int = 0


def _rows(reader: Any) -> Any:
    """The CSV's rows; a row the csv module cannot read (a cell over its size limit, a NUL) is a
    ValueError naming its line, as every other unreadable record is."""
    while True:
        try:
            yield next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise ValueError(f"line {reader.line_num}: {exc}") from None


def read_csv(path: str | Path, keep_samples: bool = False) -> CsvRecord:
    """Rebuild the soak's reading from its CSV (raises OSError/ValueError on an unusable file).

    The file is read as :data:`bounded_read.SOAK_CSV` (a regular file, size and time bounded); every
    number must be finite, and the reading it gives is checked as a replayed one is
    (:func:`serial.from_jsonable`: a negative throughput names its window and field)."""
    path = Path(path)
    builder = WindowBuilder()
    samples: list[SoakSample] = []
    meta: dict[str, str] = {}
    started = None
    end_reason = ""
    end_t = None
    last_t = 0.0
    torn = 0
    n_samples = 0
    load_note: dict[str, str] = {}
    reader = csv.reader(io.StringIO(bounded_read.read_text(path, bounded_read.SOAK_CSV), newline=""))
    rows = _rows(reader)
    header = next(rows, None)
    if header != COLUMNS:
        raise ValueError(f"{path} is not a G4 soak CSV (unexpected header)")
    for values in rows:
        if len(values) != len(COLUMNS):
            torn += 1
            continue
        row = dict(zip(COLUMNS, values, strict=True))
        try:
            event = row["event"]
            t = _float(row["t_s"])
            if t is None:
                torn += 1
                continue
            last_t = max(last_t, t)
            if event == "start":
                meta = parse_meta(row["note"])
                started = _float(row["epoch_s"])
            elif event == "sample":
                s = sample_from_row(row)
                builder.add_sample(s)
                n_samples += 1
                if keep_samples:
                    samples.append(s)
            elif event == "window":
                if row["note"]:
                    load_note.update(parse_meta(row["note"]))
                builder.close(len(builder.windows), t, _float(row["window_seconds"]) or 0.0, _float(row["tflops"]),
                              _float(row["busy_fraction"]), _int(row["worker_rss_bytes"]))
            elif event == "end":
                end_reason, end_t = row["note"] or "completed", t
        except NotFinite as exc:
            raise ValueError(f"line {reader.line_num}: {_cell_named(row, str(exc))} is {str(exc)!r}, not a finite number") from None
    if started is None:
        raise ValueError(f"{path} has no start line")
    windows, merged = downsample(builder.windows)
    end_reason = end_reason or NO_END
    reading = SoakReading(
        attempted=True,
        planned_s=_meta_float(meta, "planned_s") or 0.0,
        window_s=_meta_float(meta, "window_s") or 0.0,
        sample_interval_s=_meta_float(meta, "sample_interval_s") or 1.0,
        started_epoch=started,
        elapsed_s=end_t if end_t is not None else last_t,
        end_reason=end_reason,
        interrupted=end_reason.startswith("cut short"),
        load_problem=end_reason[len("load failed: "):] if end_reason.startswith("load failed: ") else "",
        device=meta.get("device") or load_note.get("device"),
        size=int(load_note["size"]) if load_note.get("size", "").isdigit() else None,
        dtype=load_note.get("dtype", "bf16"),
        max_sm_clock_mhz=_meta_float(meta, "max_sm_clock_mhz"),
        power_limit_w=_meta_float(meta, "power_limit_w"),
        nvml_error=meta.get("nvml_error", ""),
        max_drop_fraction=_meta_float(meta, "max_drop_fraction") or DEFAULT_MAX_DROP,
        samples=n_samples,
        windows=windows,
        merged=merged,
        csv_path=str(path),
    )
    reading = from_jsonable(SoakReading, to_jsonable(reading))  # OutOfRange names the field
    return CsvRecord(reading=reading, samples=samples, torn_lines=torn)


def _meta_float(meta: dict[str, str], key: str) -> Optional[float]:
    """A number of the start line's note (``planned_s=1800;…``); ValueError naming it when not finite."""
    try:
        return _float(meta.get(key, ""))
    except NotFinite as exc:
        raise ValueError(f"the start line's {key} is {str(exc)!r}, not a finite number") from None


def _int(text: str) -> Optional[int]:
    value = _float(text)
    return None if value is None else int(value)


def _cell_named(row: dict[str, str], text: str) -> str:
    """The column of the first cell holding ``text``, to name it in a message."""
    return next((f"column {name}" for name, value in row.items() if value == text), "a cell")


def main(argv: Optional[list[str]] = None) -> int:
    """Judge a recorded G4 soak CSV again: the G4 line the run gave (or would with another --max-drop)."""
    from ...knowledge import profiles
    from ...knowledge.judges import g04_thermal as g04

    parser = outward.ArgumentParser(prog="python -m spark_gotchas soak-record", description=main.__doc__)
    parser.add_argument("csv")
    parser.add_argument("--profile", default="auto", choices=profiles.CHOICES)
    parser.add_argument("--max-drop", type=_drop_argument, default=None,
                        help="the throughput fall that fails, 0.1 or 10%% (default: the run's)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        record = read_csv(args.csv)
    except (OSError, ValueError) as exc:
        outward.say(format_line(4, "SKIP", f"cannot read the soak record {args.csv}: {exc}"))
        return 2
    reading = record.reading
    if args.max_drop is not None:
        reading.max_drop_fraction = args.max_drop
    profile = profiles.resolve(args.profile, reading.device)
    verdict = g04.judge_soak(reading, profile)
    outward.say(verdict.line, *([f"    fix: {verdict.fix}"] if verdict.fix else []))
    rss = [(w.parent_rss_bytes, w.worker_rss_bytes) for w in reading.windows]
    if rss:
        outward.say(f"    {len(reading.windows)} windows, {reading.samples} samples, {record.torn_lines} torn lines; "
              f"memory first/last window: parent {_mib(rss[0][0])} -> {_mib(rss[-1][0])}, "
              f"load {_mib(rss[0][1])} -> {_mib(rss[-1][1])}")
    return 1 if verdict.status.value == "FAIL" else 0


def _drop_argument(text: str) -> float:
    try:
        return drop_fraction(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _mib(value: Optional[int]) -> str:
    return "?" if value is None else f"{value / 2**20:.0f} MiB"


if __name__ == "__main__":
    sys.exit(main())
