"""The real runs whose G-lines must fit in 100 columns: this machine's fast preflight, the H200
preflight replayed plain, as a Spark, for NVFP4 and with its torch reading refused, the live-state
and G9 snapshots, a GB10's memory and process tables, G3's memory view and G4's last-soak check
alone (the heartbeat looked for in a deep --soak-dir), a soak cut short by Ctrl-C on the G4 tests'
fake machine, the H200 snapshot with a throttled soak that -m fast and -k g4 leave out, every G10
launch file and G8 against a loopback GitHub.

``python tests/line_widths.py`` prints each run's widths (max and median) and the lines over 100.
Loaded as a plugin (``-p line_widths``, with ``FAKE_SOAK`` set to a soak folder), this module puts the
soak on the fake machine and cuts it short (:func:`pytest_configure`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from gline_block import GLINE, glines  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
H200 = FIXTURES / "h200" / "preflight-snapshot.json"
H100 = FIXTURES / "h100" / "doors-live" / "snapshot.json"
COLUMNS = 100
FAKE_SOAK = "LINE_WIDTHS_FAKE_SOAK"  # the soak folder of a run whose soak is on the fake machine


@dataclass
class Run:
    """One pytest run of the checks; ``gotchas`` limits the lines it is measured by (empty: all)."""

    name: str
    args: list[str]
    gotchas: tuple[int, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def _clean_env(extra: dict[str, str], home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SPARK_GOTCHAS_"))}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), COLUMNS="200", **extra)
    return env


def gb10_snapshots(folder: Path) -> list[Run]:
    """A GB10's memory after a 60 GB write and each recorded GB10 process table (G3, G6)."""
    from test_g03_g06_replay import gb10_snapshot

    from spark_gotchas.base.serial import from_jsonable, to_jsonable
    from spark_gotchas.knowledge.readings.gpu import GpuProcess, GpuProcesses

    base = gb10_snapshot(folder / "gb10.json")
    runs = [Run("gb10 memory + two vLLM", ["-m", "fast", "--spark-replay", str(base)], (3, 6)),
            Run("gb10 memory, soak probe", ["-m", "soak", "-k", "g03", "--spark-replay", str(base)], (3,))]
    tables = json.loads((FIXTURES / "g06_process_tables.json").read_text())
    for name, table in tables.items():
        if not name.startswith("gb10_") or name == "gb10_two_vllm":
            continue
        data = json.loads(base.read_text())
        procs = GpuProcesses(processes=[from_jsonable(GpuProcess, p) for p in table["processes"]], scanned=300)
        data["readings"]["gpu.processes"] = to_jsonable(procs)
        path = folder / f"{name}.json"
        path.write_text(json.dumps(data))
        runs.append(Run(f"g06 {name}", ["-m", "fast", "-k", "g06", "--spark-replay", str(path)], (6,)))
    return runs


def uncommon_runs(folder: Path) -> list[Run]:
    """The lines of less common paths: the H200 snapshot with the torch reading refused (a device's
    capability recorded as "12.1"), and with its memory and bandwidth readings refused too, the H100's
    without its GEMM reading and hidden from torch by CUDA_VISIBLE_DEVICES='', G3's GPU memory view and G4's last-soak check alone (the SKIP
    lines that stand for the gotcha when nothing else ran), the heartbeat looked for in a deep
    --soak-dir, and a 30 s soak cut short by a real SIGINT on the G4 tests' fake machine."""
    snap = json.loads(H200.read_text())
    snap["readings"]["torch.build"]["devices"][0]["capability"] = "12.1"
    refused = folder / "h200-torch-refused.json"
    refused.write_text(json.dumps(snap))
    snap["readings"]["mem.meminfo"]["mem_total_bytes"] = "135 GB"  # the plugin's SKIP for a refused reading
    snap["readings"]["bench.bandwidth"]["result"]["methods"] = ["read", "copy"]
    misfits = folder / "h200-readings-refused.json"
    misfits.write_text(json.dumps(snap))
    h100 = json.loads(H100.read_text())
    del h100["readings"]["bench.gemm"]  # G7's rate check not run beside a GPU with a longer name
    no_gemm = folder / "h100-no-gemm.json"
    no_gemm.write_text(json.dumps(h100))
    h100["readings"]["gpu.visibility"]["cuda_visible_devices"] = ""  # the node-health drill on that H100
    h100["readings"]["torch.build"].update(cuda_available=False, device_count=0, devices=[])
    hidden = folder / "h100-hidden.json"
    hidden.write_text(json.dumps(h100))
    deep = folder.joinpath(*["a-checkout-several-folders-down"] * 5, "reports")
    out = [Run("h200, torch reading refused", ["-m", "fast", "--spark-replay", str(refused)]),
           Run("h200, memory and bandwidth readings refused", ["-m", "fast", "--spark-replay", str(misfits)]),
           Run("h100, no GEMM reading", ["-m", "fast", "--spark-replay", str(no_gemm)]),
           Run("h100, hidden by CUDA_VISIBLE_DEVICES=''", ["-m", "fast", "--spark-replay", str(hidden)]),
           Run("g3 GPU memory view alone", ["-m", "fast", "-k", "g3_gpu_memory_view"], (3,)),
           Run("g4 last soak, deep --soak-dir", ["-m", "fast", "-k", "g4_last_soak", "--soak-dir", str(deep)], (4,))]
    if importlib.util.find_spec("torch") is not None:  # as the Ctrl-C test of tests/test_g04_replay.py needs
        soak_dir = folder / "soak"
        out.append(Run("g4 soak cut short by SIGINT", ["-p", "line_widths", "-m", "soak", "-k", "g4_soak",
                                                       "--soak-duration", "30s", "--soak-dir", str(soak_dir)], (4,),
                       {FAKE_SOAK: str(soak_dir),
                        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")])}))
    return out


def left_out_runs(folder: Path) -> list[Run]:
    """The H200 snapshot with an 8-hour soak added that ended in throttling, replayed with -m fast
    and with -k g4: G4's line is the recorded soak's FAIL."""
    from g04_fakes import series, soak_reading

    from spark_gotchas.base.serial import to_jsonable

    snap = json.loads(H200.read_text())
    throttled = soak_reading(series(n=20, tflops=lambda i: 95.0 - 2 * i, clock=lambda i: 2450.0 - 60 * i),
                             planned_s=28800.0, elapsed_s=28800.0)
    snap["readings"]["thermal.soak"] = to_jsonable(throttled)
    snap["markers"] = "fast or soak"
    night = folder / "h200-night-throttled.json"
    night.write_text(json.dumps(snap))
    return [Run("h200, throttled soak left out by -m fast", ["-m", "fast", "--spark-replay", str(night)]),
            Run("h200, throttled soak left out by -k g4", ["-k", "g4", "--spark-replay", str(night)], (4,))]


def pytest_configure(config) -> None:
    """With ``-p line_widths`` and FAKE_SOAK set: the soak runs on the G4 tests' fake machine (a fake
    GB10 through NVML, a fake load in a real worker, as tests/test_g04_replay.py sets it up) and a real
    SIGINT cuts it short once its load has measured a window, as a user's Ctrl-C would."""
    soak_dir = os.environ.get(FAKE_SOAK)
    if not soak_dir:
        return
    import pytest
    from test_g04_replay import fake_soak_machine, load_is_running

    patch = pytest.MonkeyPatch()  # never undone: the run's process ends with the run
    fake_soak_machine(patch)
    patch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: False)  # a worker without torch

    def ctrl_c_once_the_soak_records() -> None:
        deadline = time.monotonic() + 60
        while not load_is_running(Path(soak_dir)):
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c_once_the_soak_records, daemon=True).start()


def runs(folder: Path, github: str = "") -> list[Run]:
    """Every run measured; ``github`` is the loopback GitHub's address for G8 (none: G8 runs left out)."""
    out = [Run("this machine", ["-m", "fast"]),
           Run("h200", ["-m", "fast", "--spark-replay", str(H200)]),
           Run("h200 as gb10, 60 GB", ["-m", "fast", "--spark-replay", str(H200), "--spark-profile", "gb10",
                                       "--spark-model-gb", "60"]),
           Run("h200 as gb10, 30 GB", ["-m", "fast", "--spark-replay", str(H200), "--spark-profile", "gb10",
                                       "--spark-model-gb", "30"]),
           Run("h200 nvfp4", ["-m", "fast", "--spark-replay", str(H200), "--spark-precision", "nvfp4"])]
    for snap in sorted((FIXTURES / "live_state").glob("*.json")):
        out.append(Run(f"live_state {snap.stem}", ["-m", "fast", "--spark-replay", str(snap)]))
    out.append(Run("live_state ci-box-as-gb10, 70 GB", ["-m", "fast", "--spark-replay",
                                                         str(FIXTURES / "live_state" / "ci-box-as-gb10.json"),
                                                         "--spark-model-gb", "70"]))
    out.append(Run("live_state spark-page-cache-fills-pool, 16 GB",
                   ["-m", "fast", "--spark-replay", str(FIXTURES / "live_state" / "spark-page-cache-fills-pool.json"),
                    "--spark-model-gb", "16"]))
    for snap in sorted((FIXTURES / "g09").glob("*.json")):
        if "readings" in json.loads(snap.read_text()):
            out.append(Run(f"g09 {snap.stem}", ["-m", "fast", "--spark-replay", str(snap)]))
    out.extend(gb10_snapshots(folder))
    out.extend(uncommon_runs(folder))
    out.extend(left_out_runs(folder))
    for config in sorted((FIXTURES / "g10").iterdir()):
        if config.name != "README.md":
            out.append(Run(f"g10 {config.name}", ["-m", "fast", "-k", "g10", "--spark-replay", str(H200),
                                                  "--spark-profile", "gb10", "--spark-launch-config",
                                                  str(config.relative_to(ROOT))], (10,)))
    if github:
        for playbooks in (["unsloth"], ["vllm", "nccl"], ["llama-factory"], ["no-such-playbook"]):
            args = [a for p in playbooks for a in ("--spark-playbook", p)]
            out.append(Run(f"g08 {' '.join(playbooks)}", ["-m", "fast", "-k", "g08", *args], (8,),
                           {"SPARK_GOTCHAS_GITHUB_API": github}))
    return out


def measure(run: Run, home: Path, fixes: bool = False) -> list[str]:
    """The G-lines the run printed (and their fix lines, joined again, with ``fixes``)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *run.args],
                          cwd=ROOT, env=_clean_env(run.env, home), capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-2000:]
    return [line for line in glines(proc.stdout, run.gotchas) if fixes or GLINE.match(line)]


def _main() -> None:
    from github_fakes import GitHub, recorded

    srv = GitHub().start()
    recorded(srv)
    widths_all: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs(Path(tmp), srv.url):
            lines = measure(run, Path(tmp))
            widths = [len(line) for line in lines]
            widths_all += widths
            if widths:
                print(f"{run.name:40} max {max(widths):4}  median {statistics.median(widths):5.0f}  lines {len(widths)}")
            for line in lines:
                if len(line) > COLUMNS:
                    print(f"    {len(line):4} {line}")
            if "-v" in sys.argv:
                for line in lines:
                    print(f"      {line}")
    srv.stop()
    print(f"all runs: max {max(widths_all)}  median {statistics.median(widths_all):.0f}  "
          f"over {COLUMNS}: {sum(w > COLUMNS for w in widths_all)} of {len(widths_all)}")


if __name__ == "__main__":
    _main()
