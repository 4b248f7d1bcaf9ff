"""docs/watch.md says what the watch does: its rules word for word from the watch's judge, every CSV
column, every option; and the CSV of a day's run at --every 1 stays under 20 MB."""

from __future__ import annotations

import ast
import csv
import io
import re
from pathlib import Path

from spark_gotchas.commands.watch import build_parser
from spark_gotchas.knowledge import watch_judge as judge
from spark_gotchas.knowledge.readings.watch import WatchSample
from spark_gotchas.runtime.watch import record

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "watch.md").read_text(encoding="utf-8")
BEGIN = "<!-- rules: written from spark_gotchas/knowledge/watch_judge.py's docstring; edit them there -->"
END = "<!-- end of rules -->"


def test_the_page_shows_the_rules_of_the_watchs_judge_word_for_word():
    doc = ast.get_docstring(ast.parse(Path(judge.__file__).read_text(encoding="utf-8"))) or ""
    rules = doc.partition("\nRules:\n")[2].strip("\n") + "\n"
    shown = PAGE.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert shown == rules, "docs/watch.md and spark_gotchas/knowledge/watch_judge.py's Rules differ: copy the docstring's"


def test_every_csv_column_and_option_is_on_the_page():
    table = PAGE.split("**watch.csv**", 1)[1].split("**watch.png**", 1)[0]
    named = set(re.findall(r"`([a-z0-9_]+)`", table))
    assert set(record.COLUMNS) - {"event"} <= named, sorted(set(record.COLUMNS) - named)
    options = {a.option_strings[-1] for a in build_parser()._actions if a.option_strings and a.dest != "help"}
    assert {o for o in options if f"`{o}" not in PAGE} == set()


def test_a_days_csv_at_every_1_stays_under_20_mb():
    """The widest row a GPU machine writes (every figure at its longest), 86,400 times."""
    big = WatchSample(t_s=86399.99, epoch_s=1_800_000_000.5, temperature_c=101.5, power_w=1234.567,
                      sm_clock_mhz=3003.0, mem_clock_mhz=8001.0, utilization_pct=100.0, reasons_mask=0x1ff,
                      sw_power_cap_us=123456789012345.0, thermal_us=123456789012345.0, sw_thermal_us=123456789012.0,
                      hw_thermal_us=123456789012.0, hw_power_brake_us=123456789012.0, job_gpu_memory_bytes=150 * 10**9,
                      gpu_others=12, mem_total_bytes=130 * 10**9, mem_available_bytes=123_456 * 10**6,
                      mem_free_bytes=123_456 * 10**6, page_cache_bytes=123_456 * 10**6, dirty_bytes=12_345 * 10**6,
                      swap_used_bytes=12_345 * 10**6, psi_some_avg10=99.99, psi_full_avg10=99.99,
                      cgroup_limit_bytes=123_456 * 10**6, cgroup_used_bytes=123_456 * 10**6,
                      job_rss_bytes=123_456 * 10**6, job_processes=64, rate=123456.789, watch_rss_bytes=99 * 10**6,
                      job_stopped=True)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([record._cell(record.row_of(big).get(c)) for c in record.COLUMNS])
    assert len(buf.getvalue()) * 86_400 < 20e6, f"{len(buf.getvalue())} bytes a row"
