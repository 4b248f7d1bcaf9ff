"""Test-only worker tasks: a crash, a hang, an exception, progress, noise. Run in the worker child."""

import os
import signal
import sys
import time
from dataclasses import dataclass, field

from spark_gotchas.runtime import worker_main


def echo(**args):
    print("library noise on stdout must not reach the protocol")
    return {"args": args, "pid": os.getpid()}


def segfault():
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(5)


def abort_with_message():
    print("CUDA error: an illegal memory access was encountered", file=sys.stderr, flush=True)
    os.abort()


def exit_quietly():
    os._exit(3)


def hang():
    time.sleep(60)


def boom():
    raise ValueError("boom")


def count(n):
    for i in range(n):
        worker_main.progress({"step": i})
    return n


def until_stopped():
    steps = 0
    while not worker_main.should_stop() and steps < 1000:
        time.sleep(0.01)
        steps += 1
    return {"stopped": worker_main.should_stop(), "steps": steps}


def count_by_parameter(n, progress=None):
    """As a microbenchmark reports: through the ``progress`` the worker passes, importing nothing of it."""
    for i in range(n):
        progress({"step": i})
    return n


def until_asked(should_stop=None):
    steps = 0
    while not should_stop() and steps < 1000:
        time.sleep(0.01)
        steps += 1
    return {"stopped": should_stop(), "steps": steps}


@dataclass
class Figures:
    device: str
    capability: tuple[int, int]
    rates: list[float] = field(default_factory=list)


def figures():
    """A result type, as the microbenchmarks return."""
    return Figures("cpu stand-in", (12, 1), [1.5, 2.0])


def slow_echo(seconds, **args):
    time.sleep(seconds)
    return {"args": args, "pid": os.getpid()}


def leave_a_grandchild():
    """Start a process that outlives this task (a library's helper daemon, say) and return its pid."""
    import subprocess

    return subprocess.Popen(["sleep", "1000"]).pid
