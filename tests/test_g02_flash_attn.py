"""G2: the judge's lines, the readers on a fake flash-attn and a fake Unsloth, and force_sdpa()."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from needs import requires_torch

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.judges import g02_flash_attn as g02
from spark_gotchas.knowledge.readings.attention import FlashAttn, FlashAttnProbe, Sdpa, Unsloth
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers import ReadContext, attention
from spark_gotchas.runtime.worker import Worker

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(__file__).parent / "fixtures" / "g02" / "site"

UNSLOTH = Unsloth(installed=True, version="2026.1.1", flag_decided_there=True, min_capability_major=8,
                  interfaces=["flash_attn_cuda", "flash_attn_gpu"],
                  flag_users=["unsloth.models.llama", "unsloth.models.loader", "unsloth.utils.attention_dispatch"])
SDPA_H200 = Sdpa(torch_installed=True, torch="2.11.0+cu130", device="NVIDIA H200",
                 enabled={"flash": True, "efficient": True, "math": True, "cudnn": True},
                 ran={"flash": "ok", "efficient": "ok", "cudnn": "ok", "math": "ok"})


def working(capability=(9, 0), err=0.0039, sdpa_err=0.0039):
    return FlashAttn(installed=True, version="2.8.3", distribution="flash_attn", files=40, probe=FlashAttnProbe(
        attempted=True, imported=True, version="2.8.3", interface="flash_attn_gpu", gpu_tried=True,
        device="NVIDIA H200", capability=capability, dtype="bfloat16", finite=True,
        max_abs_err_flash=err, max_abs_err_sdpa=sdpa_err, tolerance=max(2 * sdpa_err, 1e-3)))


# -- the judge --------------------------------------------------------------------------------
def test_not_installed_passes_and_says_sdpa_is_right():
    v = g02.judge_flash_attn(FlashAttn(installed=False), Unsloth(installed=False), SDPA_H200)
    assert v.status is Status.PASS
    assert v.line == "G2 PASS: flash-attn is not installed: attention uses torch SDPA, the right choice on bare pip"
    assert v.detail == "SDPA backends that ran on NVIDIA H200: flash, efficient, cudnn, math"


def test_an_import_error_fails_with_the_uninstall_fix():
    flash = FlashAttn(installed=True, version="2.8.3", extensions={"flash_attn_2_cuda.so": {"libcudart.so.12": 12}},
                      probe=FlashAttnProbe(attempted=True, import_error="ImportError: libcudart.so.12: cannot open "
                                                                        "shared object file"))
    v = g02.judge_flash_attn(flash, Unsloth(installed=False))
    assert v.status is Status.FAIL
    assert v.line == "G2 FAIL: flash-attn 2.8.3 is installed but broken: import flash_attn fails"
    assert v.detail.startswith("ImportError: libcudart.so.12")
    assert v.detail.endswith("(its extensions link CUDA 12 runtime libraries)")
    assert v.fix.startswith("run pip uninstall -y flash-attn") and 'attn_implementation="sdpa"' in v.fix


def test_a_crash_on_import_fails_and_warns_that_unsloth_will_crash_too():
    flash = FlashAttn(installed=True, version="2.8.3", probe=FlashAttnProbe(
        attempted=True, crashed=True, signal="SIGSEGV", problem="child process killed by SIGSEGV"))
    v = g02.judge_flash_attn(flash, UNSLOTH)
    assert v.line == ("G2 FAIL: flash-attn 2.8.3 is installed but broken: importing it crashes the process; "
                      "`import unsloth` will crash too")
    assert v.detail == "child process killed by SIGSEGV; Unsloth 2026.1.1 imports flash_attn"


def test_output_that_disagrees_with_sdpa_fails():
    v = g02.judge_flash_attn(working(err=0.5), Unsloth(installed=False))
    assert v.line == "G2 FAIL: flash-attn 2.8.3 is installed but broken: flash_attn_func disagrees with SDPA"
    assert v.detail == "on NVIDIA H200: max |error| 5.00e-01 > tolerance 7.80e-03"


def test_a_kernel_that_fails_on_this_gpu_fails():
    flash = FlashAttn(installed=True, version="2.8.3", probe=FlashAttnProbe(
        attempted=True, imported=True, interface="flash_attn_gpu", gpu_tried=True, device="NVIDIA GB10",
        capability=(12, 1), gpu_error="RuntimeError: CUDA error: no kernel image is available for execution on the "
                                      "device"))
    v = g02.judge_flash_attn(flash, UNSLOTH)
    assert v.line == "G2 FAIL: flash-attn 2.8.3 is installed but broken: a causal flash_attn_func call fails"
    assert v.detail == ("on NVIDIA GB10: RuntimeError: CUDA error: no kernel image is available for execution on the "
                        "device")


def test_working_with_unsloth_beside_it_warns_with_force_sdpa():
    v = g02.judge_flash_attn(working(), UNSLOTH, SDPA_H200)
    assert v.status is Status.WARN
    # "works on NVIDIA H200" would make it 103 columns: the platform line names the GPU
    assert v.line == 'G2 WARN: Unsloth 2026.1.1 will ignore attn_implementation="sdpa": flash-attn 2.8.3 works here'
    assert v.detail == "Unsloth sets HAS_FLASH_ATTENTION in unsloth.models._utils, read by 3 more modules"
    assert "spark_gotchas.fixes.force_sdpa() before `import unsloth`" in v.fix
    assert v.readings["unsloth_picks_flash"] is True


def test_working_without_unsloth_passes():
    v = g02.judge_flash_attn(working(), Unsloth(installed=False), SDPA_H200)
    assert v.line == "G2 PASS: flash-attn 2.8.3 works on NVIDIA H200; Unsloth is not installed"
    assert v.detail == ("a causal call agrees with SDPA (max |error| 3.9e-03 <= 7.8e-03); "
                        "SDPA backends that ran on NVIDIA H200: flash, efficient, cudnn, math")


def test_unsloth_keeps_sdpa_below_its_capability_gate():
    v = g02.judge_flash_attn(working(capability=(7, 5)), UNSLOTH)
    assert v.status is Status.PASS and "Unsloth 2026.1.1 will not pick it (compute capability 7.5 < 8)" in v.line


def test_importable_without_a_gpu_is_info():
    flash = FlashAttn(installed=True, version="2.8.3", probe=FlashAttnProbe(
        attempted=True, imported=True, interface="flash_attn_gpu", gpu_reason="torch sees no CUDA device"))
    v = g02.judge_flash_attn(flash, Unsloth(installed=False))
    assert v.status is Status.INFO and "no call was tried: torch sees no CUDA device" in v.line


def test_readings_round_trip_through_json():
    for value in (working(), UNSLOTH, SDPA_H200):
        data = json.loads(json.dumps(to_jsonable(value)))
        assert from_jsonable(type(value), data) == value


# -- the readers on a fake flash-attn and a fake Unsloth ------------------------------------------
@pytest.fixture
def fake_site(monkeypatch):
    monkeypatch.syspath_prepend(str(SITE))
    return SITE


def worker_with(mode):
    env = dict(os.environ, FAKE_FLASH_ATTN=mode, PYTHONPATH=os.pathsep.join([str(SITE), str(ROOT)]),
               CUDA_VISIBLE_DEVICES="")  # the same outcome on a GPU machine
    return Worker(preload=(), env=env)


def read_with(mode):
    worker = worker_with(mode)
    try:
        ctx = ReadContext(options=RunOptions(), worker_factory=lambda: worker)
        return attention.read_flash_attn(ctx)
    finally:
        worker.close()


def test_reader_sees_the_installed_distribution(fake_site):
    install = attention.flash_attn_install()
    assert install.installed and install.version == "2.8.3" and install.distribution == "flash_attn"
    assert install.location == str(SITE / "flash_attn") and install.files == 4


@requires_torch
def test_reader_on_an_import_error(fake_site):
    reading = read_with("importerror")
    assert reading.probe.attempted and not reading.probe.imported
    assert reading.probe.import_error.startswith("ImportError: libcudart.so.12: cannot open shared object file")
    assert g02.judge_flash_attn(reading).status is Status.FAIL


@requires_torch
def test_reader_on_a_segfault_reports_the_signal(fake_site):
    reading = read_with("segfault")
    assert reading.probe.crashed and reading.probe.signal == "SIGSEGV", reading.probe
    v = g02.judge_flash_attn(reading)
    assert v.line == "G2 FAIL: flash-attn 2.8.3 is installed but broken: importing it crashes the process"
    assert "killed by SIGSEGV" in v.detail


@requires_torch
def test_reader_on_a_hang_reports_the_timeout(fake_site, monkeypatch):
    monkeypatch.setattr(attention, "PROBE_TIMEOUT_S", 2.0)
    reading = read_with("hang")
    assert reading.probe.timed_out
    v = g02.judge_flash_attn(reading)
    assert v.line == "G2 FAIL: flash-attn 2.8.3 is installed but broken: importing or calling it hangs"
    assert v.detail == "timed out after 2 s (killed)"


@requires_torch
def test_reader_on_a_clean_import_without_gpu(fake_site):
    reading = read_with("ok")
    p = reading.probe
    assert p.imported and p.interface == "flash_attn_gpu" and p.version == "2.8.3"
    assert not p.gpu_tried and p.gpu_reason == "torch sees no CUDA device"
    assert g02.judge_flash_attn(reading).status is Status.INFO


@pytest.mark.parametrize("mode, status, line, detail", [
    ("ok", Status.PASS, "G2 PASS: flash-attn 2.8.3 works on cpu; Unsloth is not installed",
     "a causal call agrees with SDPA (max |error| "),
    ("wrong", Status.FAIL, "G2 FAIL: flash-attn 2.8.3 is installed but broken: flash_attn_func disagrees with SDPA",
     "on cpu: max |error| "),
])
@requires_torch
def test_the_call_and_the_comparison_with_sdpa(fake_site, mode, status, line, detail):
    """The comparison the GPU run makes, on the CPU with the stand-in (its call is torch SDPA, or wrong)."""
    worker = worker_with(mode)
    try:
        result = worker.call("spark_gotchas.microbench.attention:flash_attn_probe", {"device": "cpu"}, timeout=60)
    finally:
        worker.close()
    assert result.ok, result.problem
    probe = FlashAttnProbe(attempted=True, **result.value)
    v = g02.judge_flash_attn(FlashAttn(installed=True, version="2.8.3", probe=probe), Unsloth(installed=False))
    assert v.status is status and v.line == line and v.detail.startswith(detail)
    if mode == "ok":
        assert probe.max_abs_err_flash == probe.max_abs_err_sdpa and probe.tolerance >= 1e-3


def test_unsloth_layout_is_read_from_its_source(fake_site):
    u = attention.read_unsloth(ReadContext(options=RunOptions(), worker_factory=lambda: None))
    assert u.installed and u.version == "2026.1.1" and u.flag_decided_there
    assert u.interfaces == ["flash_attn_cuda", "flash_attn_gpu"] and u.min_capability_major == 8
    assert u.flag_users == ["unsloth.models.llama", "unsloth.models.loader", "unsloth.utils.attention_dispatch"]
    assert "unsloth" not in sys.modules  # read, never imported


# -- force_sdpa() against the fake Unsloth -----------------------------------------------------
def run_python(code, tmp_path=None, extra_path=()):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*map(str, extra_path), str(SITE), str(ROOT)]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


CHOICE = ("import json\nfrom unsloth import FastLanguageModel\nfrom unsloth.utils.attention_dispatch import "
          "select_attention_backend\nprint(json.dumps({'backend': select_attention_backend(), 'attn': "
          "FastLanguageModel.from_pretrained('m', attn_implementation='sdpa')['_attn_implementation'], "
          "'forced': forced}))")


def test_without_the_fix_unsloth_drops_the_sdpa_request():
    out = run_python("forced = None\n" + CHOICE)
    assert out["backend"] == "flash_dense" and out["attn"] == "flash_attention_2"


def test_force_sdpa_before_import_makes_unsloth_use_sdpa():
    out = run_python("from spark_gotchas.fixes import force_sdpa\nforced = force_sdpa().__dict__\n" + CHOICE)
    assert out["backend"] == "sdpa" and out["attn"] == "sdpa"
    assert out["forced"] == {"hidden": ["flash_attn"], "patched": [], "unsloth_already_imported": False}


def test_force_sdpa_after_import_patches_every_copy_of_the_flag():
    code = ("import unsloth, unsloth.utils.attention_dispatch\nfrom spark_gotchas.fixes import force_sdpa\n"
            "forced = force_sdpa().__dict__\n" + CHOICE)
    out = run_python(code)
    assert out["backend"] == "sdpa" and out["attn"] == "sdpa"
    patched = [p for p in out["forced"]["patched"] if p.endswith(".HAS_FLASH_ATTENTION")]
    assert sorted(patched) == ["unsloth.models._utils.HAS_FLASH_ATTENTION", "unsloth.models.llama.HAS_FLASH_ATTENTION",
                               "unsloth.models.loader.HAS_FLASH_ATTENTION",
                               "unsloth.utils.attention_dispatch.HAS_FLASH_ATTENTION"]
    assert out["forced"]["unsloth_already_imported"] is True


def test_hide_xformers_too_when_it_is_installed(tmp_path):
    (tmp_path / "xformers").mkdir()
    (tmp_path / "xformers" / "__init__.py").write_text('__version__ = "0.0.33"\n')
    plain = run_python("from spark_gotchas.fixes import force_sdpa\nforced = None\nforce_sdpa()\n" + CHOICE,
                       extra_path=[tmp_path])
    assert plain["backend"] == "xformers"
    both = run_python("from spark_gotchas.fixes import force_sdpa\nforced = None\nforce_sdpa(hide_xformers=True)\n"
                      + CHOICE, extra_path=[tmp_path])
    assert both["backend"] == "sdpa"


# -- SDPA's backends: first calls in threads (the head start's g2_threads), then one by one ---------
def test_the_sdpa_reader_asks_for_the_warm_up_unless_the_part_is_off(monkeypatch):
    import bench_fakes as fk

    from spark_gotchas.machine.options import RunOptions
    from spark_gotchas.machine.provider import Provider
    from spark_gotchas.runtime import headstart

    task = "spark_gotchas.microbench.attention:sdpa_backends"
    monkeypatch.setattr("spark_gotchas.machine.readers.attention.torch_installed", lambda: True)
    for env, warm in (("", True), ("-g2_threads", False)):
        monkeypatch.setenv(headstart.ENV, env)
        worker = fk.FakeWorker({task: {"torch": "2.11.0", "device": "NVIDIA H200", "ran": {"math": "ok"}}})
        provider = Provider(RunOptions(), worker_factory=lambda worker=worker: worker)
        provider.ctx.head_start = frozenset(p for p in headstart.PARTS if headstart.enabled(p))  # as the session sets it
        reading = provider.read("attention.sdpa")
        assert worker.args[task] == {"warm_in_threads": warm} and reading.ran == {"math": "ok"}


def test_the_warm_up_never_raises_and_says_what_each_backend_did():
    torch = pytest.importorskip("torch")
    from spark_gotchas.microbench import attention

    q = torch.randn(1, 16, 2, 8)
    took = attention._warm_in_threads(torch, q, q, q)
    assert set(took) >= {"flash", "efficient", "cudnn", "math"}
    assert isinstance(took["math"], float)  # the math backend runs anywhere, CPU tensors included
    if not torch.cuda.is_available():
        assert took["flash"] == "not for this problem"  # torch's own test: flash needs CUDA tensors


# -- where SDPA is judged, and torch that runs no GPU attention -----------------------------------------
def test_a_cpu_only_torch_is_no_pass_about_gpu_attention():
    """A CPU-only torch (torch 2.13.0+cpu, as pip gives it without the CUDA index): no attention runs on a GPU."""
    from spark_gotchas.knowledge.readings.torch import TorchBuild

    cpu = TorchBuild(installed=True, version="2.13.0+cpu", cuda=None)
    sdpa = Sdpa(torch_installed=True, torch="2.13.0+cpu", problem="torch sees no CUDA device")
    v = g02.judge_flash_attn(FlashAttn(installed=False), Unsloth(installed=False), sdpa, cpu)
    assert v.line == "G2 INFO: torch 2.13.0+cpu is a CPU build: no attention runs on a GPU here; flash-attn not installed"
    assert v.detail.startswith("G1's torch line names the build to install")
    none = g02.judge_flash_attn(FlashAttn(installed=False), None, Sdpa(torch_installed=False),
                                TorchBuild(installed=False))
    assert none.line == "G2 INFO: flash-attn and torch are not installed: no attention runs here"


def test_a_conda_environment_is_not_called_bare_pip():
    from spark_gotchas.knowledge.readings.env import ContainerEvidence
    from spark_gotchas.knowledge.readings.torch import TorchBuild

    cuda = TorchBuild(installed=True, version="2.5.1", cuda="12.6")
    conda = ContainerEvidence(python_prefix="/home/u/miniforge3/envs/train", conda_meta=True, venv=False,
                              conda_prefix="/home/u/miniforge3/envs/train", conda_torch="pytorch-2.5.1-cuda126_py312h1")
    v = g02.judge_flash_attn(FlashAttn(installed=False), None, SDPA_H200, cuda, conda)
    assert v.line == "G2 PASS: flash-attn is not installed: attention uses torch SDPA, the right choice in this conda environment"
    venv = ContainerEvidence(python_prefix="/home/u/.venv", conda_meta=False, venv=True)
    assert g02.judge_flash_attn(FlashAttn(installed=False), None, SDPA_H200, cuda, venv).line.endswith(
        "the right choice on bare pip")
    ngc = ContainerEvidence(python_prefix="/usr", conda_meta=False, venv=False, ngc_vars={"NVIDIA_PYTORCH_VERSION": "25.10"})
    assert g02.judge_flash_attn(FlashAttn(installed=False), None, SDPA_H200, cuda, ngc).line.endswith(
        "the right choice here")
    # a snapshot of an older suite, without these fields: the line it had
    old = ContainerEvidence(python_prefix="/usr")
    assert g02.judge_flash_attn(FlashAttn(installed=False), None, SDPA_H200, cuda, old).line.endswith(
        "the right choice on bare pip")


def test_a_broken_flash_attn_gets_its_one_remedy_in_machine_form():
    from spark_gotchas.knowledge.readings import remedies

    broken = FlashAttn(installed=True, version="2.8.3", probe=FlashAttnProbe(attempted=True, imported=False,
                                                                            import_error="undefined symbol"))
    v = g02.judge_flash_attn(broken, None, SDPA_H200)
    assert v.fix == remedies.FLASH_ATTN.text
    assert v.readings["remedy"] == [{"kind": "uninstall", "target": "flash-attn"},
                                    {"kind": "setting", "target": "attn_implementation", "value": "sdpa"}]
