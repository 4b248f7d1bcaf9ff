"""The fleet command at scale: N real-size snapshots, planted outliers, time and memory.

    python devscripts/fleet_bench.py                 # 1000 nodes, here (no GPU needed)
    python devscripts/fleet_bench.py --nodes 5000

Builds the fleet in a temporary folder from the recorded H200 snapshot
(tests/fixtures/h200/preflight-snapshot.json, about 36 KB): every node gets its own host reading
and a run-to-run jitter of +-2% on its bandwidth, GEMM and clock figures; every 97th node reads
14% slower, every 89th runs another driver, every 83rd has an 18% slow BF16 GEMM. Then it judges
the fleet in a fresh process (``fleet.judge``, as ``spark-gotchas fleet`` does) and prints the
wall time, the peak RSS of that process, and whether the findings are exactly the planted ones.
Runtime: about 2 s for 1000 nodes on 2 cores (writing the files is most of it); writes only to
a temporary folder, removed after.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"

JUDGE = """
import json, resource, sys, time
from spark_gotchas.commands import fleet
t0 = time.perf_counter()
nodes, findings, notes = fleet.judge(sys.argv[1:])
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "nodes": len(nodes), "notes": notes,
                  "findings": [[f.node, f.gotcha, f.status, f.summary] for f in findings]}))
"""


def build(folder: Path, count: int, seed: int = 7) -> set[tuple[str, str]]:
    """Write ``count`` snapshots; the set of (node, gotcha) findings planted among them."""
    rng = random.Random(seed)
    base = json.loads(SOURCE.read_text())
    planted: set[tuple[str, str]] = set()
    for i in range(count):
        doc = copy.deepcopy(base)
        name = f"node{i:05d}"
        doc["readings"]["host.identity"] = {"hostname": name, "boot_id": f"{i:032x}"}
        for method in doc["readings"]["bench.bandwidth"]["result"]["methods"]:
            method["gbps"] *= 1 + rng.uniform(-0.02, 0.02)
            if i % 97 == 5 and method["method"] == "read":
                method["gbps"] *= 0.86
        for result in doc["readings"]["bench.gemm"]["result"]["results"]:
            if result.get("tflops"):
                result["tflops"] *= 1 + rng.uniform(-0.02, 0.02)
                if i % 83 == 7 and result["precision"] == "bf16":
                    result["tflops"] *= 0.82
        spot = doc["readings"]["thermal.spot_check"]
        spot["tflops"] *= 1 + rng.uniform(-0.02, 0.02)
        for sample in spot["samples"]:
            if sample.get("sm_clock_mhz"):
                sample["sm_clock_mhz"] *= 1 + rng.uniform(-0.01, 0.01)
        if i % 89 == 11:
            doc["platform"]["driver"] = "580.95.05"
        planted |= {(name, "G5")} if i % 97 == 5 else set()
        planted |= {(name, "G7")} if i % 83 == 7 else set()
        planted |= {(name, "G1")} if i % 89 == 11 else set()
        (folder / f"{name}.json").write_text(json.dumps(doc, indent=1))
    return planted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        folder = Path(tmp)
        planted = build(folder, args.nodes)
        files = sorted(str(p) for p in folder.glob("*.json"))
        size = sum(Path(f).stat().st_size for f in files)
        proc = subprocess.run([sys.executable, "-c", JUDGE, *files], capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            print(proc.stderr)
            return 1
        out = json.loads(proc.stdout)
    found = set()
    for who, gotcha, _status, _summary in out["findings"]:
        found |= {(name, gotcha) for name in who.split(", ")}
    print(f"{out['nodes']} snapshots, {size / len(files) / 1024:.1f} KB each on average, {size / 2**20:.1f} MB in all")
    print(f"judged in {out['seconds']:.2f} s; peak RSS of the judging process {out['max_rss_mb']:.0f} MB")
    print(f"planted {len(planted)} findings; found {len(found)}; missed {len(planted - found)}; "
          f"found but not planted {len(found - planted)}")
    for item in sorted(planted ^ found)[:10]:
        print("  differs:", item)
    return 0 if planted == found else 1


if __name__ == "__main__":
    sys.exit(main())
