"""Every G-line of the real runs (tests/line_widths.py: this machine's preflight, the H200 preflight
replayed plain, as a Spark, for NVFP4 and with its torch reading refused, the live-state, G9, GB10
memory and process, G10 launch file and G8 snapshots and servers, G3's memory view and G4's last-soak
check alone with a deep --soak-dir, a soak cut short by Ctrl-C on a fake machine, a throttled soak
that -m fast and -k g4 leave out of a replay) fits in 100 columns, except the uncommon case allowed
below; and every fix line those runs print reads as an instruction."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from github_fakes import GitHub, recorded
from line_widths import COLUMNS, measure, runs
from test_fix_texts import instruction_problems

ALLOWED = [
    # A snapshot that holds only some readings (hand-made scenarios, an older suite's): the plugin's
    # SKIP names the snapshot's file, whose name may be of any length.
    re.compile(r"^G\d+ SKIP: could not read [\w.]+: not in the snapshot \S+$"),
]


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """Each run's G-lines and fix lines."""
    srv = GitHub().start()
    recorded(srv)
    folder = tmp_path_factory.mktemp("widths")
    try:
        with ThreadPoolExecutor(2) as pool:
            todo = runs(folder, srv.url)
            results = list(pool.map(lambda run: measure(run, folder, fixes=True), todo))
    finally:
        srv.stop()
    return {run.name: lines for run, lines in zip(todo, results, strict=True)}


@pytest.mark.timeout(600)
def test_every_g_line_fits_in_100_columns_but_the_allowed_cases(printed):
    over = [f"{name}: {len(line)} {line}" for name, lines in printed.items() for line in lines
            if line[:1] == "G" and len(line) > COLUMNS and not any(a.search(line) for a in ALLOWED)]
    print("\n".join(over))
    assert over == []
    assert len(printed) >= 35 and all(printed.values())


@pytest.mark.timeout(600)
def test_every_fix_the_runs_print_is_an_instruction(printed):
    fixes = {line.strip()[len("fix: "):] for lines in printed.values() for line in lines if line[:1] == " "}
    assert len(fixes) >= 8
    bad = {fix: instruction_problems(fix) for fix in fixes if instruction_problems(fix)}
    assert bad == {}


def test_the_h200_preflight_lines_fit(printed):
    assert [len(line) <= COLUMNS for line in printed["h200"] if line[:1] == "G"] == [True] * 10


def test_the_uncommon_runs_print_the_lines_they_are_there_for(printed):
    """Each run of tests/line_widths.py's uncommon_runs reaches the line it measures (a run that printed
    something else would measure nothing)."""
    assert printed["h200, torch reading refused"][0] == (
        "G1 PASS: 7 packages use CUDA 13 (the driver supports CUDA 13.0); not checked: torch build")
    assert printed["g4 last soak, deep --soak-dir"] == ["G4 SKIP: no earlier soak recorded: nothing to check for a reboot"]
    assert printed["g3 GPU memory view alone"][0].startswith("G3 ")
    if "g4 soak cut short by SIGINT" in printed:  # with torch installed
        assert re.fullmatch(r"G4 WARN: cut short by SIGINT after 0:00:[0-2]\d of 0:00:30; 0:00:[0-2]\d of BF16 GEMM held "
                            r"over what ran", printed["g4 soak cut short by SIGINT"][0])
