"""What the README shows a run printing is what that run prints now: the sample of the ten lines, the
FAIL example, the fleet table and its findings, and every G-line and fix the README quotes.

Each example is run as the README says it was (the replayed snapshot, a terminal 100 columns wide,
``devscripts/fleet_example.py`` for the fleet's six files), from a folder of its own with a fresh
HOME, so that no soak record or state of this checkout shows in its lines.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_fix_texts import instruction_problems
from user_env import user_env

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
H200 = "tests/fixtures/h200/preflight-snapshot.json"
VLLM = "tests/fixtures/live_state/spark-vllm-0.9-plan-40gb.json"
GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): ")


def code_lines() -> list[str]:
    """The README's indented code lines, without their indent (other lines as empty ones)."""
    return [line[4:].rstrip() if line.startswith("    ") else "" for line in README.splitlines()]


def blocks(lines: list[str]) -> list[tuple[str, ...]]:
    """Each G-line with the fix lines under it (a fix folded to the terminal's width: its rows)."""
    out: list[list[str]] = []
    current: list[str] = []
    for line in lines:
        if GLINE.match(line):
            current = [line]
            out.append(current)
        elif current and line.startswith(" " * 4) and (line.lstrip().startswith("fix: ") or len(current) > 1):
            current.append(line)
        else:
            current = []  # anything else ends the block
    return [tuple(b) for b in out]


def fix_text(block: tuple[str, ...]) -> str:
    return " ".join(row.strip() for row in block[1:]).removeprefix("fix: ")


@pytest.fixture(scope="module")
def where(tmp_path_factory) -> Path:
    """A folder holding the two snapshots at the paths the README names, and a HOME of its own."""
    folder = tmp_path_factory.mktemp("readme")
    for snapshot in (H200, VLLM):
        (folder / snapshot).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / snapshot, folder / snapshot)
    (folder / "home").mkdir()
    return folder


def command(where: Path, *args: str) -> list[str]:
    env = {k: v for k, v in user_env({"COLUMNS": "100", "HOME": str(where / "home"), "PYTHONPATH": str(ROOT)}).items()
           if not k.startswith(("PYTEST_", "SPARK_GOTCHAS_", "XDG_"))}
    proc = subprocess.run([sys.executable, *args], cwd=where, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-2000:]
    return [line.rstrip() for line in proc.stdout.splitlines()]


@pytest.fixture(scope="module")
def printed(where) -> dict[str, list[str]]:
    """What each of the README's examples prints here."""
    command(where, str(ROOT / "devscripts" / "fleet_example.py"), "runs")
    return {"h200": command(where, "-m", "spark_gotchas", "-m", "fast", "--spark-replay", H200),
            "vllm": command(where, "-m", "spark_gotchas", "-m", "fast", "--spark-replay", VLLM),
            "fleet": command(where, "-m", "spark_gotchas", "fleet", *sorted(str(p.relative_to(where))
                                                                               for p in (where / "runs").glob("*.json")))}


def test_the_sample_is_the_replay_line_for_line(printed):
    shown = code_lines()
    start = next(i for i, line in enumerate(shown) if re.fullmatch(r"=+ spark-gotchas =+", line))
    end = next(i for i in range(start, len(shown)) if shown[i].startswith("G10 "))
    sample = shown[start:end + 1]
    out = printed["h200"]
    first = out.index(sample[0])
    assert out[first:first + len(sample)] == sample, "the README's sample is not what the replay prints:\n" + "\n".join(
        out[first:first + len(sample)])


def test_every_g_line_and_fix_the_readme_quotes_is_printed_by_its_example(printed):
    quoted = blocks(code_lines())
    assert len(quoted) >= 16 and any(len(b) > 2 for b in quoted)  # the sample, the FAIL example, fleet's findings
    seen = {b for out in printed.values() for b in blocks(out)}
    stale = [b for b in quoted if b not in seen]
    assert not stale, "quoted in the README but printed by no example:\n" + "\n\n".join("\n".join(b) for b in stale)
    for block in quoted:
        if len(block) > 1:
            assert instruction_problems(fix_text(block)) == [], block


def test_the_fleet_example_is_what_fleet_prints_for_the_scripts_files(printed):
    shown = code_lines()
    start = next(i for i, line in enumerate(shown) if line.startswith("node     profile  G1"))
    end = next(i for i in range(start, len(shown)) if shown[i].startswith("G7 WARN: node-05"))
    table = [line for line in shown[start:end + 1] if line and not line.startswith("…")]
    out = [line for line in printed["fleet"] if line]
    positions = [out.index(line) if line in out else -1 for line in table]
    assert -1 not in positions and positions == sorted(positions), (
        "the README's fleet example is not what fleet prints:\n" + "\n".join(printed["fleet"]))
    # the files are copy-1.json ... copy-6.json: each node is named by the host name its file recorded
    assert [line.split()[0] for line in out if line.startswith("node-")] == [f"node-0{i}" for i in range(6)]
    assert "python devscripts/fleet_example.py runs" in README
