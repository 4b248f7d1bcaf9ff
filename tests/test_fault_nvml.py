"""A broken or wedged NVML binding, met the way a user meets it: the real preflight in a fresh process.

Each case puts a fake ``pynvml.py`` on ``PYTHONPATH`` (where it shadows nvidia-ml-py, as a stray file
in the current folder would), beside a ``sitecustomize.py`` that shows psutil only the run's own
processes, so G6's line does not depend on what else this machine runs (a GPU server's command
line on a CI box): one that raises at import, one that calls ``sys.exit(3)``, one that
sleeps at import, one whose ``nvmlInit`` blocks, one whose ``nvmlDeviceGetCount`` blocks. The run
must end within a bound with no traceback, say NVML is unavailable and why (naming the file), keep
the platform line, G4 and G6, and never tell the user to reinstall torch. A fake that carries
nvidia-ml-py's own package record stands for the real binding on a wedged driver.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from own_processes import SITECUSTOMIZE

from spark_gotchas.machine.readers.torch import torch_installed

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 1  # SPARK_GOTCHAS_NVML_TIMEOUT for these runs
BOUND_S = 60  # a run that takes longer has hung

HANG = "import time\n\n\ndef _forever(*args):\n    time.sleep(1000)\n"
FAKES = {
    "raises": "raise RuntimeError('broken pynvml build')\n",
    "exits": "import sys\n\nsys.exit(3)\n",
    "hangs at import": "import time\n\ntime.sleep(1000)\n",
    "hangs in nvmlInit": HANG + "nvmlInit = _forever\n",
    "hangs in nvmlDeviceGetCount": HANG + textwrap.dedent("""
        NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2


        def nvmlInit():
            pass


        def nvmlSystemGetDriverVersion():
            return "580.95.05"


        def nvmlSystemGetCudaDriverVersion():
            return 13000


        nvmlDeviceGetCount = _forever
        """),
}
TORCH_IMPORTS_IT = ("raises", "exits", "hangs at import")  # the fakes that break torch's own import
REASONS = {  # what the lines say NVML's trouble is (after "NVML unavailable: ")
    "raises": "pynvml at {path} raised RuntimeError('broken pynvml build') at import: "
              "a module named pynvml shadows nvidia-ml-py",
    "exits": "pynvml at {path} raised SystemExit(3) at import: a module named pynvml shadows nvidia-ml-py",
    "hangs at import": "pynvml at {path} did not finish importing within 1 s: a module named pynvml shadows nvidia-ml-py",
    "hangs in nvmlInit": "NVML call nvmlInit did not return within 1 s in pynvml at {path}: "
                         "a module named pynvml shadows nvidia-ml-py",
    "hangs in nvmlDeviceGetCount": "NVML call nvmlDeviceGetCount did not return within 1 s in pynvml at {path}: "
                                   "a module named pynvml shadows nvidia-ml-py",
}


def preflight(tmp_path: Path, fake_dir: Path, *args: str) -> tuple[str, float]:
    """``python -m pytest -m fast`` in the checkout, with ``fake_dir`` first on the module path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SPARK_GOTCHAS_"))}
    env.update(PYTHONPATH=str(fake_dir), SPARK_GOTCHAS_NVML_TIMEOUT=str(BUDGET_S), HOME=str(tmp_path))
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "fast", "-q", "-rs", "-p", "no:cacheprovider", *args],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=BOUND_S,
                              start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the preflight hung (> {BOUND_S} s): {str(exc.stdout or '')[-2000:]}")
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr, time.monotonic() - t0


def line(output: str, head: str) -> str:
    """The last line starting ``head``, a fix folded to the terminal's width joined again."""
    joined: list[str] = []
    for text in output.splitlines():
        if text.startswith(" " * 9) and joined and joined[-1].startswith("    fix: "):
            joined[-1] += " " + text.strip()
        else:
            joined.append(text)
    found = [text for text in joined if text.startswith(head)]
    assert found, f"no line starting {head!r} in:\n{output[-4000:]}"
    return found[-1]


def platform_line(output: str) -> str:
    """The line under the suite's banner: the GPU NVML or torch sees, or why none is seen."""
    lines = output.splitlines()
    (at,) = [i for i, text in enumerate(lines) if text.startswith("=") and " spark-gotchas " in text]
    return lines[at + 1]


def skipped(output: str, head: str) -> list[str]:
    """The G-lines of the checks that skipped (pytest's -rs), whatever else the gotcha's line says:
    on a GPU machine the load checks run through torch beside a broken NVML."""
    return [text.split(": ", 1)[1] for text in output.splitlines()
            if text.startswith("SKIPPED ") and ": " in text and text.split(": ", 1)[1].startswith(head)]




def fake(tmp_path: Path, source: str) -> Path:
    folder = tmp_path / "fake"
    folder.mkdir()
    (folder / "pynvml.py").write_text(source)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE.format(tests=str(ROOT / "tests")))
    return folder


@pytest.mark.parametrize("case", list(FAKES))
def test_a_broken_pynvml_gives_nvml_unavailable_lines_not_a_traceback(tmp_path, case):
    folder = fake(tmp_path, FAKES[case])
    output, _seconds = preflight(tmp_path, folder)
    reason = REASONS[case].format(path=folder / "pynvml.py")
    assert "Traceback" not in output
    assert "reinstall torch" not in output and "force-reinstall" not in output
    # "no GPU (reason)"; on a GPU machine torch's GPU and "NVML unavailable: reason", or, where the
    # fake breaks torch's import too, the GPU on the PCI bus that neither can see
    platform = platform_line(output)
    assert (platform.startswith(f"no GPU ({reason})") or f"), NVML unavailable: {reason}, " in platform
            or platform.startswith("NVIDIA GPU present but not visible here (")), platform
    assert any(text.startswith(f"G4 SKIP: NVML unavailable: {reason}") for text in skipped(output, "G4 ")), output
    # G6 falls back to command lines (NVML's reason in its detail, and on the G4 line)
    assert line(output, "G6 ").startswith("G6 PASS: no other GPU workload: none of 0 command lines is a known server "
                                          "or trainer")
    if case in TORCH_IMPORTS_IT and torch_installed():  # torch imports pynvml: G1 blames the file, not torch
        path = folder / "pynvml.py"
        assert line(output, "G1 ").startswith(f"G1 FAIL: import torch fails in {path}: ")
        assert line(output, "    fix: remove or rename").startswith(f"    fix: remove or rename {path}: ")


def test_a_wedged_driver_under_the_real_binding_is_named_as_such(tmp_path):
    """A pynvml that nvidia-ml-py's own record lists is not a shadow: a hang there is the driver's."""
    folder = fake(tmp_path, FAKES["hangs in nvmlInit"])
    record = folder / "nvidia_ml_py-13.0.0.dist-info"
    record.mkdir()
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-ml-py\nVersion: 13.0.0\n")
    (record / "RECORD").write_text("pynvml.py,,\nnvidia_ml_py-13.0.0.dist-info/METADATA,,\n")
    output, _seconds = preflight(tmp_path, folder, "-k", "g4 or g6")
    reason = "NVML call nvmlInit did not return within 1 s (a wedged driver?)"
    assert "Traceback" not in output and "shadows" not in output
    assert any(text.startswith(f"G4 SKIP: NVML unavailable: {reason}") for text in skipped(output, "G4 ")), output


WEDGED_PROCESS = """
import time
from spark_gotchas.machine import nvml

t0 = time.monotonic()
first = nvml.query("nvmlDeviceGetCount")
first_s = time.monotonic() - t0
t0 = time.monotonic()
later = [nvml.query("nvmlDeviceGetName", None) for _ in range(200)] + [nvml.init(), nvml.device_handles()]
print(repr(first.reason))
print(f"{first_s:.2f} {time.monotonic() - t0:.2f}")
print(all(value == first for value in later[:-1]), later[-1], nvml.module())
"""


def test_a_hung_call_makes_every_later_call_unavailable_at_once_and_the_process_can_exit(tmp_path):
    folder = fake(tmp_path, FAKES["hangs in nvmlDeviceGetCount"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(folder), str(ROOT))), "SPARK_GOTCHAS_NVML_TIMEOUT": "1"}
    proc = subprocess.run([sys.executable, "-c", WEDGED_PROCESS], env=env, capture_output=True, text=True,
                          timeout=BOUND_S, start_new_session=True)  # the stuck call's thread does not hold the exit
    assert proc.returncode == 0, proc.stderr
    reason, seconds, same = proc.stdout.splitlines()
    assert "nvmlDeviceGetCount did not return within 1 s" in reason
    first_s, later_s = map(float, seconds.split())
    assert first_s < 20 and later_s < first_s  # one wait, not one per call
    assert same == "True [] None"


@pytest.mark.parametrize("value", ["", "soon", "-3", "0", "inf", "nan"])
def test_a_bad_timeout_setting_falls_back_to_the_default(monkeypatch, value):
    from spark_gotchas.machine import nvml

    monkeypatch.setenv(nvml.TIMEOUT_ENV, value)
    assert nvml.timeout_s() == nvml.DEFAULT_TIMEOUT_S
    monkeypatch.setenv(nvml.TIMEOUT_ENV, "0.5")
    assert nvml.timeout_s() == 0.5


def test_a_torch_crash_beside_a_shadowing_pynvml_names_the_file_not_a_torch_reinstall():
    """The worker died importing torch (a segfault in a foreign pynvml's ctypes, say): G1's fix is that file."""
    from spark_gotchas.knowledge.judges.g01_cuda_abi import judge_torch
    from spark_gotchas.knowledge.profiles import NONE
    from spark_gotchas.knowledge.readings.gpu import GpuInventory
    from spark_gotchas.knowledge.readings.torch import TorchBuild

    shadow = "/home/me/project/pynvml.py"
    inventory = GpuInventory(nvml_error=f"pynvml at {shadow} raised OSError('x') at import: "
                                        "a module named pynvml shadows nvidia-ml-py", pynvml_shadow=shadow)
    verdict = judge_torch(TorchBuild(installed=True, worker_problem="child process killed by SIGSEGV"), inventory, NONE)
    assert verdict.status.name == "FAIL" and shadow in verdict.summary
    assert verdict.fix.startswith(f"remove or rename {shadow}: ") and "reinstall" not in verdict.fix.split(";")[0]
