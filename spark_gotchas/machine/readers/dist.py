"""The all-reduce probe between nodes (G10, ``multinode``), launched under torchrun by the check itself.

The check starts ``torchrun`` as a child process, one process per node, and reads the JSON each
local rank writes (:mod:`spark_gotchas.microbench.collective`), so it stays a single pytest process per node
and a dead or hung rank is a reading. To measure the link between two Sparks, run on each node
(node rank 0 and 1)::

    SPARK_GOTCHAS_NNODES=2 SPARK_GOTCHAS_NODE_RANK=R MASTER_ADDR=<node 0's address on the link> \\
        pytest -m multinode -k g10

Without ``SPARK_GOTCHAS_NNODES`` (or ``PET_NNODES``/``NNODES``) >= 2 it runs a loopback rehearsal:
two processes on this node, which tests the probe and the launch, not the link. Environment:
``SPARK_GOTCHAS_NODE_RANK`` (or ``PET_NODE_RANK``/``NODE_RANK``), ``MASTER_ADDR``, ``MASTER_PORT``
(default 29531), ``SPARK_GOTCHAS_COLLECTIVE_BACKEND`` (auto|nccl|gloo),
``SPARK_GOTCHAS_COLLECTIVE_SIZES`` (e.g. ``64M,256M,1G``; at most 1G),
``SPARK_GOTCHAS_COLLECTIVE_TIMEOUT`` (seconds without progress, default 60; 20 in a rehearsal),
``SPARK_GOTCHAS_COLLECTIVE_RENDEZVOUS`` (seconds to wait for the other nodes, default 300).

Key: ``dist.collective``; its types are in :mod:`spark_gotchas.knowledge.readings.dist`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...base import bounded_read, scrub
from ...base.procs import run_bounded
from ...base.serial import from_jsonable
from ...knowledge.readings.dist import CollectiveRun, RankResult
from ...microbench.collective import MAX_BYTES, parse_sizes
from ..options import env_number
from . import ReadContext, reader
from .torch import torch_installed

DEFAULT_PORT = 29531
MULTINODE_SIZES = "64M,256M,1G"
REHEARSAL_SIZES = "1M,16M"
NET_SETUP = "spark_gotchas.runtime.tasks:net_setup"  # what each rank records of its node's network


@dataclass
class CollectiveConfig:
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = DEFAULT_PORT
    backend: str = "auto"
    sizes: str = REHEARSAL_SIZES
    small: str = "8,1K,64K"
    timeout_s: float = 20.0  # without progress, per rank
    rendezvous_s: float = 300.0
    fault: Optional[str] = None  # "RANK:exit|hang", to test the reporting

    @property
    def multinode(self) -> bool:
        return self.nnodes >= 2

    @property
    def nproc_per_node(self) -> int:
        return 1 if self.multinode else 2


def _env_first(*names: str) -> Optional[str]:
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return None


def _first_set(*values: object) -> object:
    """The first value that is set: the suite's own variable, even at 0 (rank 0 is a rank), before a
    launcher's."""
    return next(v for v in values if v is not None)


def config_from_env() -> CollectiveConfig:
    """The probe's settings from the environment; ValueError names a variable that holds no usable
    number (the suite's own are checked against their spans, :data:`options.ENVIRONMENT`)."""
    nnodes = _whole(_first_set(env_number("SPARK_GOTCHAS_NNODES"), _env_first("PET_NNODES", "NNODES"), 1), "NNODES")
    multinode = nnodes >= 2
    return CollectiveConfig(
        nnodes=nnodes,
        node_rank=_whole(_first_set(env_number("SPARK_GOTCHAS_NODE_RANK"), _env_first("PET_NODE_RANK", "NODE_RANK"), 0),
                         "NODE_RANK"),
        master_addr=os.environ.get("MASTER_ADDR") or "127.0.0.1",
        master_port=_whole(os.environ.get("MASTER_PORT") or DEFAULT_PORT, "MASTER_PORT", 65535),
        backend=_one_of("SPARK_GOTCHAS_COLLECTIVE_BACKEND", BACKENDS),
        sizes=_sizes("SPARK_GOTCHAS_COLLECTIVE_SIZES") or (MULTINODE_SIZES if multinode else REHEARSAL_SIZES),
        timeout_s=env_number("SPARK_GOTCHAS_COLLECTIVE_TIMEOUT") or (60 if multinode else 20),
        rendezvous_s=env_number("SPARK_GOTCHAS_COLLECTIVE_RENDEZVOUS") or 300,
        fault=_fault("SPARK_GOTCHAS_COLLECTIVE_FAULT"),
    )


BACKENDS = ("auto", "nccl", "gloo")


def _one_of(name: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name) or choices[0]
    if value not in choices:
        raise ValueError(f"{name}={scrub.clip(value, 40, mark='')!r} must be one of {', '.join(choices)}")
    return value


def _sizes(name: str) -> Optional[str]:
    """Message sizes as the probe reads them (``1M,16M``), checked here: a bad one is the reason of
    G10's line, not a rank that wrote no result."""
    value = os.environ.get(name)
    if not value:
        return None
    try:
        sizes = parse_sizes(value)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if not sizes or max(sizes) > MAX_BYTES:
        raise ValueError(f"{name}={scrub.clip(value, 40, mark='')!r} must be sizes from 1 to 1G, e.g. 1M,16M")
    return value


def _fault(name: str) -> Optional[str]:
    value = os.environ.get(name) or None
    if value is not None and not re.fullmatch(r"\d+:(exit|hang)", value):
        raise ValueError(f"{name}={scrub.clip(value, 40, mark='')!r} must be RANK:exit or RANK:hang")
    return value


def _whole(value: object, name: str, most: int = 4096) -> int:
    """A node count, rank or port as torchrun reads it; ValueError naming the variable otherwise."""
    text = str(value).strip()
    if not text.isdigit() or int(text) > most:
        raise ValueError(f"{name}={scrub.clip(text, 40, mark='')!r} must be a whole number from 0 to {most}")
    return int(text)


def command(cfg: CollectiveConfig, out_dir: str) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(cfg.nnodes),
           "--nproc-per-node", str(cfg.nproc_per_node), "--max-restarts", "0", "--monitor-interval", "0.1"]
    if cfg.multinode:
        cmd += ["--node-rank", str(cfg.node_rank), "--master-addr", cfg.master_addr,
                "--master-port", str(cfg.master_port), "--rdzv-conf", f"timeout={int(cfg.rendezvous_s)}"]
    else:
        cmd += ["--standalone"]
    cmd += ["-m", "spark_gotchas.microbench", "collective", "--out", out_dir, "--backend", cfg.backend,
            "--large", cfg.sizes, "--small", cfg.small, "--timeout", f"{cfg.timeout_s:g}", "--net-setup", NET_SETUP]
    if not cfg.multinode:
        cmd += ["--iters", "3", "--small-iters", "5"]
    if cfg.fault:
        cmd += ["--fault", cfg.fault]
    return cmd


def run_collective(cfg: CollectiveConfig, work_dir: Optional[str] = None) -> CollectiveRun:
    """Launch torchrun for this node and collect its ranks' results; bounded by the timeouts.

    torchrun runs in its own process group, killed as a whole when it ends or overruns, so no
    rank outlives the reading."""
    out = CollectiveRun(attempted=True, mode="multinode" if cfg.multinode else "rehearsal", nnodes=cfg.nnodes,
                        node_rank=cfg.node_rank, nproc_per_node=cfg.nproc_per_node, master_addr=cfg.master_addr,
                        backend_requested=cfg.backend, timeout_s=cfg.timeout_s)
    with tempfile.TemporaryDirectory(prefix="spark-collective-", dir=work_dir) as tmp:
        results = Path(tmp) / "ranks"
        out.command = command(cfg, str(results))
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[3])  # where spark_gotchas is, installed or not
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        overall = (cfg.rendezvous_s if cfg.multinode else 60) + 3 * cfg.timeout_s + 60
        run = run_bounded(out.command, overall, env=env, merge_stderr=True)
        out.returncode, out.timed_out, out.seconds = run.returncode, run.timed_out, run.seconds
        out.log_tail = run.stdout[-3000:] + (f"\n{run.problem}" if run.error or run.unkillable else "")
        first = cfg.node_rank * cfg.nproc_per_node
        for rank in range(first, first + cfg.nproc_per_node):
            path = results / f"rank{rank}.json"
            try:
                data = bounded_read.read_json(path, bounded_read.RANK_RESULT)
                out.ranks.append(from_jsonable(RankResult, data))
            except (OSError, ValueError, TypeError) as exc:
                if not isinstance(exc, FileNotFoundError):
                    out.log_tail += f"\n{path.name}: unreadable ({exc})"
                out.missing_ranks.append(rank)
    return out


@reader("dist.collective")
def read_collective(ctx: ReadContext) -> CollectiveRun:
    """All-reduce bus bandwidth and latency under torchrun (see the module docstring for the setup)."""
    if not torch_installed():
        return CollectiveRun(attempted=False, reason="torch is not installed")
    try:
        cfg = config_from_env()
    except ValueError as exc:
        return CollectiveRun(attempted=False, reason=f"not launched: {exc}")
    ctx.say(f"G10: launching torchrun ({'node ' + str(cfg.node_rank) + ' of ' + str(cfg.nnodes) if cfg.multinode else 'loopback rehearsal, 2 processes'})")
    return run_collective(cfg)
