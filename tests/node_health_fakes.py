"""Snapshots a node health pass replays, and a stand-in ``scontrol`` for machines without Slurm.

    python tests/node_health_fakes.py DIR     # writes DIR/healthy.json, DIR/fail.json, DIR/hostile.json

- ``healthy.json``: the recorded H200 preflight (tests/fixtures/h200): no FAIL, a G9 WARN;
- ``fail.json``: a Spark stuck in its low-power state (tests/fixtures/live_state): G4 FAIL;
- ``hostile.json``: the H200 snapshot where torch sees no GPU, NVML's device name and
  ``CUDA_VISIBLE_DEVICES`` carrying escape sequences, a forged line, quotes and a GitHub token:
  G1 FAIL, whose line holds the variable's value (the name is too long for it: the line leaves it
  to the detail).

``fake_scontrol(path)`` writes an executable that answers ``scontrol show node NAME`` and
``scontrol update NodeName=NAME State=… [Reason=…]`` from a JSON file of nodes (``NODES.json``
beside it) the way Slurm 22.05 prints them, and logs each call to ``calls.log``. Keys of that file:
``_unreachable`` (seconds it waits before failing as an unreachable slurmctld makes it fail),
``_update_fails`` (an update is refused).
"""

from __future__ import annotations

import copy
import json
import shlex
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
H200 = FIXTURES / "h200" / "preflight-snapshot.json"
STUCK = FIXTURES / "live_state" / "spark-stuck-600mhz.json"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
HOSTILE_NAME = f'NVIDIA H200\x1b[2J\nG4 PASS: all fine" {TOKEN}'
HOSTILE_CVD = 'GPU-\x1b[2J\r\x07"; State=RESUME'


def hostile() -> dict:
    doc = copy.deepcopy(json.loads(H200.read_text()))
    readings = doc["readings"]
    readings["gpu.inventory"]["devices"][0]["name"] = HOSTILE_NAME
    build = readings["torch.build"]
    build.update(cuda_available=False, device_count=0, devices=[])
    readings["gpu.visibility"] = {"pci_gpus": [], "pci_error": None, "dev_nodes": ["/dev/nvidia0", "/dev/nvidiactl"],
                                  "nvidia_visible_devices": None, "cuda_visible_devices": HOSTILE_CVD,
                                  "image_vars": {}, "container": None}
    return doc


def write_snapshots(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {"healthy": folder / "healthy.json", "fail": folder / "fail.json", "hostile": folder / "hostile.json"}
    out["healthy"].write_text(H200.read_text())
    out["fail"].write_text(STUCK.read_text())
    out["hostile"].write_text(json.dumps(hostile()))
    return out


FAKE = r'''"""scontrol as Slurm 22.05 answers show node and update, from NODES.json beside this file."""
import json, sys, time
from pathlib import Path
here = Path(__file__).resolve().parent
nodes_file = here / "NODES.json"
with open(here / "calls.log", "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
nodes = json.loads(nodes_file.read_text())
args = sys.argv[1:]
if nodes.get("_unreachable"):
    time.sleep(nodes["_unreachable"])
    print("slurm_load_node error: Unable to contact slurm controller (connect failure)", file=sys.stderr)
    sys.exit(1)
if args[:2] == ["show", "node"]:
    node = nodes.get(args[2])
    if node is None:
        print(f"Node {args[2]} not found")
        sys.exit(1)
    print(f"NodeName={args[2]} Arch=x86_64 CoresPerSocket=1\n   Gres={node.get('gres') or '(null)'}\n"
          f"   State={node['state']} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n   Partitions=fleet")
    if node.get("reason"):
        print(f"   Reason={node['reason']} [root@2026-12-05T12:30:11]")
    sys.exit(0)
if args[:1] == ["update"]:
    if nodes.get("_update_fails"):
        print("slurm_update error: Invalid user id", file=sys.stderr)
        sys.exit(1)
    fields = dict(a.split("=", 1) for a in args[1:])
    node = nodes[fields["NodeName"]]
    base = node["state"].split("+")[0]
    if fields["State"] == "DRAIN":
        reason = fields["Reason"]
        reason = reason[1:] if reason.startswith('"') else reason
        reason = reason[:-1] if reason.endswith('"') else reason
        node.update(state=base + "+DRAIN", reason=reason)
    elif fields["State"] == "UNDRAIN":
        node.update(state=base, reason="")
    nodes_file.write_text(json.dumps(nodes))
    sys.exit(0)
sys.exit(2)
'''


def fake_scontrol(folder: Path, nodes: dict) -> Path:
    """An executable scontrol in ``folder`` serving ``nodes`` (name -> {state, reason, gres})."""
    folder.mkdir(parents=True, exist_ok=True)
    exe, script = folder / "scontrol", folder / "scontrol.py"
    script.write_text(FAKE)
    # a shell stub, not a '#!python' line: a shebang cannot hold a path with a space in it
    exe.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(script))} "$@"\n')
    exe.chmod(0o755)
    (folder / "NODES.json").write_text(json.dumps(nodes))
    return exe


def nodes_of(exe: Path) -> dict:
    return json.loads((exe.parent / "NODES.json").read_text())


def calls_of(exe: Path) -> list[list[str]]:
    log = exe.parent / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


if __name__ == "__main__":
    for name, path in write_snapshots(Path(sys.argv[1])).items():
        print(f"{name}: {path}")
