"""All-reduce between nodes: bus bandwidth for large messages (DDP-like), latency for small ones (TP-like).

Run one process per node under torchrun, the same command on every node with its own rank::

    torchrun --nnodes 2 --nproc-per-node 1 --node-rank R --master-addr HEAD --master-port 29500 \\
        -m spark_gotchas.microbench collective --out reports/collective

Each rank writes ``<out>/rank<N>.json``: its timings, any error and, with ``--net-setup
MODULE:FUNCTION``, what that function says of the node's network given ``MASTER_ADDR`` (the suite
passes its own reader, ``spark_gotchas.runtime.tasks:net_setup``; without it ``net`` is null). Bus
bandwidth follows nccl-tests for all-reduce: busbw = algbw x 2(n-1)/n. Messages stay at or below
1 GiB (``--max-bytes``): the buffers live in the same memory as everything else on a
unified-memory machine, and a 16 GB NCCL test froze a Spark. A rank whose peer dies or hangs
records the error (on stderr too) within ``--timeout`` seconds of no progress and exits; it never
waits for ever. ``--fault RANK:exit|hang`` makes one rank fail on purpose, to test that reporting.
``--backend auto`` picks NCCL when every local rank has a GPU, else gloo (CPU tensors over TCP).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import os
import re
import signal
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from ._cli import ArgumentParser, cut, first_line, in_span, json_text, say, say_now, shown

DEFAULT_LARGE = "64M,256M,1G"
DEFAULT_SMALL = "8,1K,64K"
MAX_BYTES = 1 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``8`` -> 8, ``64K``, ``256M``, ``1G`` (binary units) -> bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.I)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 8, 64K, 256M, 1G)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def parse_sizes(text: str) -> list[int]:
    return [parse_size(part) for part in text.split(",") if part.strip()]


def _short_error(exc: BaseException) -> str:
    """The first line of an error without gloo's/NCCL's source location prefix."""
    lines = str(exc).strip().splitlines()
    text = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\]\s*", "", lines[0] if lines else "")
    return cut(text.split(" This is typically caused")[0], 300)


class Recorder:
    """The rank's result file, written atomically, plus a watchdog that ends a stuck rank."""

    def __init__(self, path: Path, result: dict[str, Any], timeout_s: float):
        self.path = path
        self.result = result
        self.timeout_s = timeout_s
        self.last = time.monotonic()
        self.t0 = self.last
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.armed = False  # the watchdog counts from the first step that waits on other ranks

    def stage(self, text: str, arm: bool = False) -> None:
        self.result["stage"] = text
        self.last = time.monotonic()
        self.armed = self.armed or arm

    def write(self) -> None:
        with self.lock:
            self.result["seconds"] = round(time.monotonic() - self.t0, 3)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json_text(self.result, indent=1), encoding="utf-8")
            os.replace(tmp, self.path)

    def fail(self, message: str, code: int) -> None:
        """Record the error and end the process now (a collective may be stuck in C)."""
        if self.result.get("error") is None:
            self.result["error"] = message
        self.write()
        sys.stdout.flush()
        say_now(f"rank {self.result.get('rank')}: {self.result['error']}")  # this may run in a signal handler
        os._exit(code)

    def watch(self) -> None:
        def loop() -> None:
            while not self.done.wait(0.2):
                idle = time.monotonic() - self.last
                if self.armed and idle > self.timeout_s:
                    self.fail(f"no progress for {self.timeout_s:g} s at {self.result.get('stage')}: "
                              "a peer died or hung", 3)

        threading.Thread(target=loop, name="collective-watchdog", daemon=True).start()


def _choose_backend(requested: str, local_world: int) -> str:
    import torch

    if requested != "auto":
        return requested
    if torch.cuda.is_available() and torch.cuda.device_count() >= local_world:
        return "nccl"
    return "gloo"


def _time_all_reduce(dist: Any, tensor: Any, iters: int, sync: Any, rec: Recorder, label: str) -> list[float]:
    times = []
    for i in range(iters + 1):  # the first call warms up and is not counted
        rec.stage(f"{label} iteration {i}")
        t0 = time.perf_counter()
        dist.all_reduce(tensor)
        sync()
        if i:
            times.append(time.perf_counter() - t0)
    return times


def measure(args: argparse.Namespace, rec: Recorder) -> None:
    result = rec.result
    rec.stage("import torch")
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = _choose_backend(args.backend, result["local_world_size"])
    result["backend"] = backend
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        result["device"] = torch.cuda.get_device_name(device)
        sync = torch.cuda.synchronize
    else:
        result["device"] = "cpu"

        def sync() -> None:
            return None
    rec.stage(f"init_process_group({backend})", arm=True)
    kwargs: dict[str, Any] = {"timeout": datetime.timedelta(seconds=args.timeout)}
    if device.type == "cuda":
        kwargs["device_id"] = device
    dist.init_process_group(backend, **kwargs)
    world = dist.get_world_size()
    result["world_size"] = world
    rec.stage("first all-reduce (every rank must join)")
    probe = torch.ones(1, device=device)
    dist.all_reduce(probe)
    sync()
    if int(probe.item()) != world:
        raise RuntimeError(f"all-reduce of ones gave {probe.item()}, expected {world}")
    if args.fault:
        fault_rank, mode = args.fault.split(":")
        if int(fault_rank) == result["rank"]:
            if mode == "exit":
                os._exit(1)  # a crash: no result file from this rank
            rec.stage("hanging on purpose (--fault)")
            rec.done.set()  # a hang: this rank's own watchdog stays quiet
            time.sleep(3600)
    factor = 2 * (world - 1) / world
    for size in args.small:
        tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)
        times = _time_all_reduce(dist, tensor, args.small_iters, sync, rec, f"all-reduce of {size} B")
        result["small"].append({"size_bytes": size, "latency_us_median": statistics.median(times) * 1e6,
                                "iters": len(times)})
    for size in args.large:
        tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)
        times = _time_all_reduce(dist, tensor, args.iters, sync, rec, f"all-reduce of {size >> 20} MiB")
        seconds = statistics.median(times)
        algbw = size / seconds / 1e9
        result["large"].append({"size_bytes": size, "seconds_median": seconds, "algbw_gbps": algbw,
                                "busbw_gbps": algbw * factor, "iters": len(times)})
        del tensor
    rec.stage("done")
    dist.destroy_process_group()


def _function(name: str) -> Callable[[Optional[str]], Any]:
    """``module:function`` -> the function (ImportError, AttributeError or ValueError when it is not one)."""
    module, sep, attr = name.partition(":")
    if not sep or not module or not attr:
        raise ValueError("name it as MODULE:FUNCTION")
    return getattr(importlib.import_module(module), attr)


def _describe(describe_net: Optional[Callable[[Optional[str]], Any]]) -> Any:
    """What ``--net-setup``'s function says of this node (an ``error`` of its own when it raises)."""
    if describe_net is None:
        return None
    try:
        return describe_net(os.environ.get("MASTER_ADDR"))
    except Exception as exc:  # the rank still measures
        return {"error": first_line(exc, 300)}


def main(argv: list[str]) -> int:
    parser = ArgumentParser(prog="spark-gotchas microbench collective", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="reports/collective", help="folder for rank<N>.json")
    parser.add_argument("--backend", default="auto", choices=("auto", "nccl", "gloo"))
    parser.add_argument("--large", type=parse_sizes, default=parse_sizes(DEFAULT_LARGE),
                        help=f"bandwidth message sizes (default {DEFAULT_LARGE})")
    parser.add_argument("--small", type=parse_sizes, default=parse_sizes(DEFAULT_SMALL),
                        help=f"latency message sizes (default {DEFAULT_SMALL})")
    parser.add_argument("--iters", type=in_span(1, 10_000, integer=True), default=5, help="timed iterations per large size")
    parser.add_argument("--small-iters", type=in_span(1, 100_000, integer=True), default=20, help="timed iterations per small size")
    parser.add_argument("--timeout", type=in_span(1, 3600, "seconds"), default=60.0, help="seconds without progress before giving up")
    parser.add_argument("--max-bytes", type=parse_size, default=MAX_BYTES, help="refuse larger messages (1G)")
    parser.add_argument("--fault", default=None, help="RANK:exit|hang, to test failure reporting")
    parser.add_argument("--net-setup", metavar="MODULE:FUNCTION", default=None,
                        help="a function that describes this node's network as JSON, given MASTER_ADDR; each rank "
                             "records it under 'net'")
    parser.add_argument("--json", action="store_true", help="print each rank's summary as one JSON line (what this "
                                                            "prints either way; the whole result is in its file)")
    args = parser.parse_args(argv)
    too_big = [s for s in args.large + args.small if s > args.max_bytes]
    if too_big:
        parser.error(f"message sizes above --max-bytes {args.max_bytes}: {too_big} (unified memory: stay at 1 GiB)")
    if args.fault and not re.fullmatch(r"\d+:(exit|hang)", args.fault):
        parser.error("--fault takes RANK:exit or RANK:hang")
    describe_net = None
    if args.net_setup:
        try:
            describe_net = _function(args.net_setup)
        except (ImportError, AttributeError, ValueError) as exc:
            parser.error(shown(f"--net-setup {args.net_setup}: {first_line(exc)}"))
    if importlib.util.find_spec("torch") is None:  # one that does not import is the rank's recorded error
        say("torch is not installed", err=True)
        return 2

    rank = int(os.environ.get("RANK", "0"))
    result: dict[str, Any] = {
        "rank": rank,
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "local_world_size": int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        "node_rank": int(os.environ.get("GROUP_RANK", os.environ.get("NODE_RANK", "0"))),
        "hostname": socket.gethostname(),
        "backend": None, "device": None, "large": [], "small": [], "error": None, "stage": "start",
        "net": _describe(describe_net),
    }
    rec = Recorder(Path(args.out) / f"rank{rank}.json", result, args.timeout)
    signal.signal(signal.SIGTERM, lambda *_: rec.fail(
        f"terminated by the launcher (SIGTERM) at {result.get('stage')}: another rank failed or the run was stopped",
        143))
    rec.watch()
    try:
        measure(args, rec)
    except Exception as exc:
        rec.fail(f"{type(exc).__name__} at {result.get('stage')}: {_short_error(exc)}", 1)
    rec.done.set()
    rec.write()
    say(json_text({k: result[k] for k in ("rank", "backend", "device", "large", "small")}))
    sys.stderr.flush()
    os._exit(0)  # the result is written; skip interpreter teardown (seconds with torch loaded)
