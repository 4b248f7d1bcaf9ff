"""G7's GEMM rates measured two ways on a GPU machine, side by side: through cuBLAS/cuBLASLt without
torch (``probe_cublas``) and through torch (``probe``).

For: seeing that the torch-free probe agrees with the torch probe (TFLOP/s per precision, the check,
the relative error) and how much sooner its result is there after a process starts, before the
preflight reads G7's rates from it. Each probe runs in a fresh child process (the cuBLAS one must
not import torch, and asserts so), at 8192^3 and at 4096^3; a child is cut at 60 s and all four at
55 s together, so the script never hangs.

    python3 devscripts/g07_cublas_check.py            # from the repository root; nothing to install

Prints one row per child and precision (backend, size, precision, TFLOP/s, best, rel. error, seconds
from the child's start to its result, check), then the cuBLAS/torch rate ratio per size, then one
JSON line with every result. Writes nothing. Runtime on an H200: about 20 s (four children: 1-2 s
of GEMMs each, plus torch's import in two of them).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (8192, 4096)
BACKENDS = ("cublas", "torch")
CHILD_TIMEOUT_S = 60.0
DEADLINE_S = 55.0  # all four children together: a hung one is cut, and the script still ends within a minute


def child(backend: str, size: int) -> None:
    """Run one probe here and print its result as one JSON line (this process's own figures)."""
    sys.path.insert(0, str(ROOT))
    from spark_gotchas.base.serial import to_jsonable
    from spark_gotchas.microbench import gemm

    if backend == "cublas":
        try:
            result = gemm.probe_cublas(size)
        except gemm.CublasUnavailable as exc:
            print(json.dumps({"unavailable": str(exc)}))
            return
        assert "torch" not in sys.modules, "probe_cublas imported torch"
    else:
        result = gemm.probe(size)
    print(json.dumps({"result": to_jsonable(result), "done_at": time.time(), "torch_imported": "torch" in sys.modules}))


def run_child(backend: str, size: int, timeout: float) -> dict:
    """One fresh process; its JSON line plus the seconds from its start to its result."""
    started = time.time()
    try:
        done = subprocess.run([sys.executable, __file__, "--child", backend, str(size)], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"backend": backend, "size": size, "error": f"no result within {timeout:.0f} s (killed)"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"backend": backend, "size": size, "error": f"exit {done.returncode}: {tail}"}
    out = json.loads(lines[-1])
    out.update(backend=backend, size=size)
    if "done_at" in out:
        out["wall_s"] = round(out.pop("done_at") - started, 3)
    return out


def rows(run: dict) -> list[str]:
    """The child's table rows: one per precision, or one saying why there is none."""
    head = f"{run['backend']:<7} {run['size']:>5}"
    if "result" not in run:
        return [f"{head}  {run.get('error') or 'unavailable: ' + run.get('unavailable', '?')}"]
    out = []
    for r in run["result"]["results"]:
        rate = f"{r['tflops']:>8.1f} {r['tflops_best']:>8.1f}" if r["tflops"] is not None else f"{'-':>8} {'-':>8}"
        err = f"{r['rel_error']:>9.2g}" if r["rel_error"] is not None else f"{'-':>9}"
        note = r["check"] or (r["error"][:70] if r["error"] else "")
        out.append(f"{head} {r['precision']:<6} {rate} {err} {run['wall_s']:>7.2f}  {note}")
    return out


def ratios(size: int, runs: list[dict]) -> str:
    """cuBLAS over torch TFLOP/s per precision at one size, where both measured it."""
    rates = {}
    for run in runs:
        if run["size"] == size and "result" in run:
            for r in run["result"]["results"]:
                if r["tflops"] is not None:
                    rates[(run["backend"], r["precision"])] = r["tflops"]
    parts = [f"{p} {rates[('cublas', p)] / rates[('torch', p)]:.2f}" for p in ("bf16", "fp8", "nvfp4")
             if ("cublas", p) in rates and ("torch", p) in rates]
    return f"cublas/torch at {size}: {', '.join(parts) or 'nothing to compare'}"


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
        return 0
    start, runs = time.monotonic(), []
    for size in SIZES:
        for backend in BACKENDS:
            left = DEADLINE_S - (time.monotonic() - start)
            runs.append(run_child(backend, size, max(1.0, min(CHILD_TIMEOUT_S, left))))
    print(f"{'backend':<7} {'size':>5} {'prec':<6} {'TFLOP/s':>8} {'best':>8} {'rel.err':>9} {'wall_s':>7}  check")
    for run in runs:
        print("\n".join(rows(run)))
    for size in SIZES:
        print(ratios(size, runs))
    print(json.dumps({"g07_cublas_check": runs}))
    return 0 if all("result" in run for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
