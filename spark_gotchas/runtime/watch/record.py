"""The watch's record: ``watch.csv`` written a flushed line at a time, and the heartbeat the next watch reads.

The CSV is an event log with one header, as the soak's is (:mod:`spark_gotchas.runtime.soak.record`), and
keeps the soak's column names where they mean the same (``t_s``, ``temperature_c``, ``sm_clock_mhz``,
``reasons_hex``, the counters …); memory is in MB (10^6 bytes) so that a row a second for 24 hours
stays under 20 MB. Events: ``start`` (the command and the plan), ``sample``, ``event`` (a line the
watch said), ``end`` (how the job ended). A killed watch leaves every whole line written; one
without ``end`` was killed or lost power. Nothing is kept in memory per sample: the plot reads the
file back.

The heartbeat is a small JSON file per watch in the state folder (``$SPARK_GOTCHAS_STATE_DIR``, else
``$XDG_STATE_HOME/spark-gotchas``, else ``~/.local/state/spark-gotchas``), rewritten whole as the watch
runs and removed when it ends under control after a job that ended by itself; one left behind says
the watch was killed or the machine rebooted, or, marked, that the job was OOM-killed: the next
watch says so and removes it.
"""

from __future__ import annotations

import csv
import io
import math
import os
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from ...base import atomic, bounded_read, outward
from ...base.serial import dumps, to_jsonable
from ...knowledge.readings.watch import WatchHeartbeat, WatchSample
from ...machine.readers.watch import left_behind, state_dir  # noqa: F401  (the next watch reads them here)

COLUMNS = [
    "event", "t_s", "epoch_s", "temperature_c", "power_w", "sm_clock_mhz", "mem_clock_mhz", "utilization_pct",
    "reasons_hex", "sw_power_cap_us", "thermal_us", "sw_thermal_us", "hw_thermal_us", "hw_power_brake_us",
    "rate", "mem_available_mb", "mem_free_mb", "page_cache_mb", "dirty_mb", "swap_used_mb", "psi_some_avg10",
    "psi_full_avg10", "cgroup_used_mb", "cgroup_limit_mb", "job_rss_mb", "job_processes", "job_gpu_memory_mb",
    "gpu_others", "watch_rss_mb", "job_stopped", "note",
]
MB_FIELDS = {"mem_available_mb": "mem_available_bytes", "mem_free_mb": "mem_free_bytes",
             "page_cache_mb": "page_cache_bytes", "dirty_mb": "dirty_bytes", "swap_used_mb": "swap_used_bytes",
             "cgroup_used_mb": "cgroup_used_bytes", "cgroup_limit_mb": "cgroup_limit_bytes",
             "job_rss_mb": "job_rss_bytes", "job_gpu_memory_mb": "job_gpu_memory_bytes",
             "watch_rss_mb": "watch_rss_bytes"}
PLAIN = ("temperature_c", "power_w", "sm_clock_mhz", "mem_clock_mhz", "utilization_pct", "sw_power_cap_us",
         "thermal_us", "sw_thermal_us", "hw_thermal_us", "hw_power_brake_us", "rate", "psi_some_avg10",
         "psi_full_avg10", "job_processes", "gpu_others")
FSYNC_EVERY_S = 30.0
CSV_KIND = bounded_read.Kind("watch CSV", 256 << 20, 30.0)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        if value == int(value) and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value)


def row_of(s: WatchSample) -> dict[str, Any]:
    row: dict[str, Any] = {"event": "sample", "t_s": round(s.t_s, 2), "epoch_s": round(s.epoch_s, 1),
                           "reasons_hex": None if s.reasons_mask is None else f"0x{s.reasons_mask:x}",
                           "job_stopped": s.job_stopped}
    for name in PLAIN:
        row[name] = getattr(s, name)
    for column, attr in MB_FIELDS.items():
        value = getattr(s, attr)
        row[column] = None if value is None else round(value / 1e6)
    for name in ("temperature_c", "power_w", "utilization_pct", "rate"):
        if isinstance(row[name], float):
            row[name] = round(row[name], 3)
    return row


class Recorder:
    """Writes ``watch.csv`` as the watch goes; thread-safe enough for one sampler and the main thread
    (each line is one write)."""

    def __init__(self, path: Path, meta: dict[str, Any]):
        self.path = Path(path)
        self._fh = open(self.path, "w", encoding="utf-8", newline="")
        self._last_sync = time.monotonic()
        self.rows = 0
        self.failed = ""  # why a line could not be written, once
        self._write({c: c for c in COLUMNS})
        self._write({"event": "start", "t_s": 0, "epoch_s": round(time.time(), 1),
                     "note": ";".join(f"{k}={_cell(v)}" for k, v in meta.items() if v not in (None, ""))})

    def _write(self, values: dict[str, Any]) -> None:
        if self._fh.closed:
            return
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([_cell(values.get(c)) for c in COLUMNS])
        try:
            self._fh.write(buf.getvalue())
            self._fh.flush()
        except OSError as exc:  # a full disk: the watch goes on, the job is not its to stop
            self.failed = self.failed or f"cannot write {self.path}: {exc.strerror or exc} (the watch goes on)"
        self.rows += 1
        if time.monotonic() - self._last_sync >= FSYNC_EVERY_S:
            self._last_sync = time.monotonic()
            try:
                os.fsync(self._fh.fileno())
            except OSError:
                pass

    def sample(self, s: WatchSample) -> None:
        self._write(row_of(s))

    def event(self, t_s: float, line: str) -> None:
        self._write({"event": "event", "t_s": round(t_s, 2), "epoch_s": round(time.time(), 1),
                     "note": outward.record(line)})

    def finish(self, t_s: float, how: str) -> None:
        self._write({"event": "end", "t_s": round(t_s, 2), "epoch_s": round(time.time(), 1), "note": how})
        try:
            os.fsync(self._fh.fileno())
        except OSError:
            pass
        self._fh.close()


def read_rows(path: Path) -> Iterator[dict[str, str]]:
    """The CSV's rows back (bounded read); rows of another shape are skipped."""
    text = bounded_read.read_text(path, CSV_KIND)
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header != COLUMNS:
        raise ValueError(f"{path} is not a watch CSV (unexpected header)")
    for values in reader:
        if len(values) == len(COLUMNS):
            yield dict(zip(COLUMNS, values, strict=True))


def number(text: str) -> Optional[float]:
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


# -- the heartbeat -----------------------------------------------------------------------------------
def heartbeat_path(beat: WatchHeartbeat) -> Path:
    return state_dir() / f"watch-{int(beat.started_epoch)}-{beat.watch_pid}.json"


def write_heartbeat(beat: WatchHeartbeat, fsync: bool = False) -> Optional[str]:
    """Replace the heartbeat whole; why it could not be written, or None."""
    try:
        atomic.write_text(heartbeat_path(beat), dumps(outward.record(to_jsonable(beat))), fsync=fsync, parents=True)
    except OSError as exc:
        return f"cannot write the watch's heartbeat in {state_dir()}: {exc.strerror or exc}"
    return None


def remove_heartbeat(beat: WatchHeartbeat) -> None:
    try:
        heartbeat_path(beat).unlink()
    except OSError:
        pass


def remove_heartbeat_file(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
