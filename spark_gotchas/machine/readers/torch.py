"""torch as the environment has it, read in the GPU worker (a crash there is a reading).

Keys: ``torch.build``, ``torch.first_launch``; their types are in :mod:`spark_gotchas.knowledge.readings.torch`.
"""

from __future__ import annotations

import importlib.util

from ...base.serial import from_jsonable
from ...knowledge.readings.torch import FirstLaunch, TorchBuild
from . import ReadContext, reader


def torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


@reader("torch.build")
def read_torch_build(ctx: ReadContext) -> TorchBuild:
    """torch's version, CUDA build, arch list and visible devices."""
    if not torch_installed():
        return TorchBuild(installed=False)
    result = ctx.worker.call("spark_gotchas.runtime.tasks:torch_build", timeout=120)
    if not result.ok:
        return TorchBuild(installed=True, worker_problem=result.problem)
    return from_jsonable(TorchBuild, result.value)


@reader("torch.first_launch")
def read_first_launch(ctx: ReadContext) -> FirstLaunch:
    """One tiny kernel on cuda:0 in the worker, with a timeout."""
    build: TorchBuild = ctx.provider.read("torch.build")
    if build.gpu_unavailable:
        return FirstLaunch(attempted=False, reason=build.gpu_unavailable)
    result = ctx.worker.call("spark_gotchas.runtime.tasks:first_launch", timeout=60)
    if not result.ok:
        return FirstLaunch(
            attempted=True, ok=False, reason=result.problem, signal=result.signal,
            timed_out=result.timed_out, seconds=result.seconds,
        )
    v = result.value
    return FirstLaunch(
        attempted=True,
        ok=bool(v["ok"]),
        reason="" if v["ok"] else f"kernel gave {v['result']}, expected {v['expected']}",
        seconds=v["seconds"],
        mem_get_info=tuple(v["mem_get_info"]),
    )
