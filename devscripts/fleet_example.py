"""The six snapshots of the README's fleet example, made from the recorded H200 snapshot.

    python devscripts/fleet_example.py runs          # writes runs/copy-1.json ... runs/copy-6.json
    spark-gotchas fleet runs/*.json                  # the table and the three findings (exit 1)

Each copy gets a host reading of its own (``host.identity``: host name ``node-00`` to ``node-05`` and a
boot id), as every live run records one: ``fleet`` names a node by that host name, and by its file's
name (``copy-1``) only in a file without one, as the recorded snapshot is. node-01 to node-03 read within 2% of
node-00; node-04 reads 14% slower; node-05 runs driver 580.95.05 and its BF16 GEMM is 18% slower.
Needs no GPU and nothing but Python; tests/test_readme_examples.py holds the README's lines to what
``fleet`` prints for these files.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "h200" / "preflight-snapshot.json"

# node: (bandwidth jitter, read bandwidth factor, BF16 GEMM factor, driver); the first four as one machine would
NODES = {
    "node-00": (0.0, 1.0, 1.0, ""),
    "node-01": (0.01, 1.0, 1.0, ""),
    "node-02": (-0.01, 1.0, 1.0, ""),
    "node-03": (0.02, 1.0, 1.0, ""),
    "node-04": (0.0, 0.86, 1.0, ""),
    "node-05": (0.0, 1.0, 0.82, "580.95.05"),
}


def node(source: dict, host: str, jitter: float, read: float, bf16: float, driver: str) -> dict:
    """The recorded snapshot as ``host`` would have recorded it, with these differences."""
    doc = copy.deepcopy(source)
    doc["readings"]["host.identity"] = {"hostname": host, "boot_id": f"boot-{host}"}
    for method in doc["readings"]["bench.bandwidth"]["result"]["methods"]:
        method["gbps"] *= (1 + jitter) * (read if method["method"] == "read" else 1.0)
    for result in doc["readings"]["bench.gemm"]["result"]["results"]:
        if result["precision"] == "bf16":
            result["tflops"] *= bf16
    if driver:
        doc["platform"]["driver"] = driver
    return doc


def write(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    source = json.loads(SOURCE.read_text(encoding="utf-8"))
    paths = []
    for number, (host, (jitter, read, bf16, driver)) in enumerate(NODES.items(), 1):
        path = folder / f"copy-{number}.json"
        path.write_text(json.dumps(node(source, host, jitter, read, bf16, driver), indent=1), encoding="utf-8")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="runs", help="where to write the six files (default: runs)")
    for path in write(Path(parser.parse_args(argv).folder)):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
