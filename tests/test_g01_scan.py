"""G1 on real files: site folders laid out as real wheels leave them (built with gcc at test time),
read by the env.cuda_extensions reader and judged as a Spark (gb10, no driver) and with no profile.

The layouts are those of real wheels (CHANGELOG.md, G1 on real wheels, 2026-12-04): several CUDA
builds picked at run time (bitsandbytes), an extension built for CUDA 12 alone whose libraries come
from ``nvidia-*-cu12`` wheels or from nowhere (cupy-cuda12x), a package that links no CUDA library
but loads one by name (jax-cuda12-plugin's RPATH into the wheels, a soname in its strings).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import elf_build as eb
import no_nvml
import pytest
from gline_block import glines

from spark_gotchas.knowledge.judges import g01_cuda_abi as g01
from spark_gotchas.knowledge.profiles import PROFILES
from spark_gotchas.knowledge.readings import cuda_libs
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.readers import env as ex

ROOT = Path(__file__).resolve().parents[1]
EXT = f"fastops/_C{eb.EXT_SUFFIX}"
GB10, NONE = PROFILES["gb10"], PROFILES["none"]
BUILD13 = ("build {name} from source with CUDA 13's nvcc for sm_121 (CMake: -DCMAKE_CUDA_ARCHITECTURES=121; torch "
           "extensions: TORCH_CUDA_ARCH_LIST=12.1), e.g. in an NGC container: nvcr.io/nvidia/pytorch:25.10-py3 or "
           "later ships CUDA 13 and its nvcc; PyPI has no CUDA 13 build of it")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """Stub CUDA libraries and the extensions that use them, built once."""
    eb.need_gcc()
    b = tmp_path_factory.mktemp("build")
    lib = {f"{name}{major}": eb.cuda_stub(b / f"lib{major}", major, name)
           for name, major in (("cudart", 12), ("cudart", 13), ("cublas", 12), ("cublasLt", 12), ("cublas", 13),
                               ("nccl", 2))}
    return {
        **lib,
        "ext12": eb.extension(b / "ext12", "_C", [lib["cudart12"]]),
        "ext12_wheels": eb.extension(b / "ext12w", "_C", [lib["cudart12"], lib["cublas12"]],
                                     rpath="$ORIGIN/../nvidia/cuda_runtime/lib:$ORIGIN/../nvidia/cublas/lib"),
        "nccl_only": eb.extension(b / "nccl", "_nccl", [lib["nccl2"]]),
        "plain": eb.plain_shared(b / "plain", "_fast.so"),
        "orphan": eb.extension(b / "orphan", "_orphan", [lib["cudart12"]]),
        **{f"bnb{tag}": eb.extension(b / f"bnb{tag}", f"libbitsandbytes_cuda{tag}",
                                     [lib[f"cudart{major}"], lib[f"cublas{major}"]], suffix=".so",
                                     runpath=f"/usr/local/cuda-{major}.{tag[-1]}/targets/x86_64-linux/lib")
           for tag, major in (("121", 12), ("128", 12), ("130", 13))},
        "dlopen12": eb.extension(b / "dl", "_loader", [], strings=("libcublas.so.12", "cublasCreate_v2")),
        "rpath12": eb.extension(b / "rp", "_plugin", [], rpath="$ORIGIN/../../nvidia/cublas/lib"),
        # ctranslate2 4.8.5: libctranslate2-a7a60d30.so.4.8.5 (auditwheel's ctranslate2.libs/) links no CUDA
        # library, imports dlopen and names libcublas.so.12 (and libnccl.so.2, libcuda.so.1) in .rodata
        "ct2lib": eb.extension(b / "ct2", "libctranslate2-a7a60d30", [], suffix=".so.4.8.5", dlopen=True,
                               strings=("libcublas.so.12", "libnccl.so.2", "libcuda.so.1"), rpath="$ORIGIN"),
        "ct2ext": eb.extension(b / "ct2", "_ext", [], rpath="$ORIGIN/../ctranslate2.libs"),
        # nvidia-nvimgcodec-cu12 0.9.0.20: extensions/libnvjpeg_ext.so.0.9.0 loads libnvjpeg.so.12 by name
        "nvjpeg_ext": eb.extension(b / "nvj", "libnvjpeg_ext", [], suffix=".so.0.9.0", dlopen=True,
                                   strings=("libnvjpeg.so.12", "libnvjpeg.so")),
        # the same name in a file that never calls dlopen (a message, a table): not a loader
        "mention": eb.extension(b / "mention", "_mention", [], strings=("libcublas.so.12 is missing",)),
        "nvjpeg12": eb.cuda_stub(b / "nvjpeg", 12, "nvjpeg"),
    }


def make_site(root: Path, built: dict[str, Path], *packages: str) -> Path:
    """A site-packages folder with the named packages installed as pip leaves them."""
    sp = root / "lib" / "python3.11" / "site-packages"
    sp.mkdir(parents=True)
    layouts = {
        "fastops": ("fastops", "0.3.21", {EXT: built["ext12"]}, ()),
        "widget-cu12": ("widget-cu12", "1.0", {f"widget/_C{eb.EXT_SUFFIX}": built["ext12_wheels"],
                                               f"widget/_nccl{eb.EXT_SUFFIX}": built["nccl_only"]},
                        ("nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12")),
        "clean": ("clean-ext", "1.0", {"clean_ext/_fast.so": built["plain"]}, ()),
        "bitsandbytes": ("bitsandbytes", "0.50.2", {f"bitsandbytes/libbitsandbytes_cuda{t}.so": built[f"bnb{t}"]
                                                    for t in ("121", "128", "130")}, ("torch>=2.4",)),
        "bitsandbytes-old": ("bitsandbytes", "0.45.0", {f"bitsandbytes/libbitsandbytes_cuda{t}.so": built[f"bnb{t}"]
                                                        for t in ("121", "128")}, ()),
        "loader-cuda12": ("loader-cuda12", "2.0", {f"loader/_loader{eb.EXT_SUFFIX}": built["dlopen12"]},
                          ("nvidia-cublas-cu12>=12.1; extra == 'with-cuda'",)),
        "numbaish-cuda": ("numbaish-cuda", "0.30.4", {"numbaish_cuda/_helpers.so": built["plain"]},
                          ("cuda-bindings>=13; extra == 'cu13'", "nvidia-nvjitlink-cu12>=12.4; extra == 'cu12'",
                           "nvidia-nvjitlink>=13; extra == 'cu13'")),
        "jax-cuda12-plugin": ("jax-cuda12-plugin", "0.10.2",
                              {"jax_plugins/xla_cuda12/_plugin.so": built["rpath12"]}, ()),
        "jax-with-cuda": ("jax-cuda12-plugin", "0.10.2", {"jax_plugins/xla_cuda12/_plugin.so": built["rpath12"]},
                          ("jax-cuda12-pjrt==0.10.2", "nvidia-cublas-cu12>=12.1.3.1; extra == 'with-cuda'",
                              "nvidia-cuda-runtime-cu12>=12.1.105; extra == 'with-cuda'")),
        "ctranslate2": ("ctranslate2", "4.8.5", {"ctranslate2.libs/libctranslate2-a7a60d30.so.4.8.5": built["ct2lib"],
                                                 f"ctranslate2/_ext{eb.EXT_SUFFIX}": built["ct2ext"]},
                        ("numpy", "pyyaml<7,>=5.3")),
        "nvimgcodec": ("nvidia-nvimgcodec-cu12", "0.9.0.20",
                       {"nvidia/nvimgcodec/extensions/libnvjpeg_ext.so.0.9.0": built["nvjpeg_ext"]},
                       ("nvidia-nvjpeg-cu12; extra == 'nvjpeg'", "nvidia-nvjpeg2k-cu12; extra == 'nvjpeg2k'",
                        "nvidia-nvjpeg-cu12; extra == 'all'")),
        "mention": ("mentions-text", "1.0", {"mentions/_mention.so": built["mention"]}, ()),
        "nvidia-nvjpeg-cu12": ("nvidia-nvjpeg-cu12", "12.4.0.76", {"nvidia/nvjpeg/lib/libnvjpeg.so.12": built["nvjpeg12"]}, ()),
        "nvidia-cuda-runtime-cu12": ("nvidia-cuda-runtime-cu12", "12.9.79",
                                     {"nvidia/cuda_runtime/lib/libcudart.so.12": built["cudart12"]}, ()),
        "nvidia-cublas-cu12": ("nvidia-cublas-cu12", "12.9.1.4",
                               {"nvidia/cublas/lib/libcublas.so.12": built["cublas12"],
                                "nvidia/cublas/lib/libcublasLt.so.12": built["cublasLt12"]}, ()),
    }
    for name in packages:
        dist, version, files, requires = layouts[name]
        eb.install_distribution(sp, dist, version, files, requires)
    return sp


def scan(sp: Path, monkeypatch, torch_cuda: str | None = None):
    if torch_cuda is not None:  # torch as its version.py says, without the package itself
        (sp / "torch").mkdir(exist_ok=True)
        (sp / "torch" / "version.py").write_text(f"__version__ = '2.9.0+cu{torch_cuda.replace('.', '')}'\n"
                                                 f"cuda: Optional[str] = '{torch_cuda}'\n")
    monkeypatch.setattr(ex, "site_dirs", lambda: [str(sp)])
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    monkeypatch.delenv("BNB_CUDA_VERSION", raising=False)
    return ex.read_cuda_extensions(None)


def test_a_cu12_extension_with_no_cuda_12_library_anywhere_fails_naming_it(built, tmp_path, monkeypatch):
    sp = make_site(tmp_path, built, "fastops", "clean")
    (sp / "loose").mkdir()
    (sp / "loose" / built["orphan"].name).write_bytes(built["orphan"].read_bytes())  # no RECORD names it
    reading = scan(sp, monkeypatch)
    assert reading.shared_objects == 3 and reading.unreadable == 0 and reading.resolved
    by_path = {os.path.relpath(e.path, sp): e for e in reading.linked}
    assert set(by_path) == {EXT, f"loose/_orphan{eb.EXT_SUFFIX}"}  # the clean one links nothing
    assert by_path[EXT].distribution == "fastops" and by_path[EXT].cuda_libs == {"libcudart.so.12": 12}
    assert [(lib.soname, lib.found) for lib in by_path[EXT].needs] == [("libcudart.so.12", None)]

    verdict = g01.judge_extensions(reading, None, GB10)
    assert verdict.status is Status.FAIL
    assert verdict.summary.startswith("2 packages will not load: ")
    assert "fastops (libcudart.so.12 not found)" in verdict.summary and "(no distribution) " in verdict.summary
    assert f"; for fastops, {BUILD13.format(name='fastops')}; or keep this build and add its libraries" in verdict.fix
    assert verdict.fix.startswith(f"for (no distribution) {sp / 'loose' / built['orphan'].name}, rebuild ")
    assert "against CUDA 13 or remove it (no installed distribution owns it)" in verdict.fix


def test_its_cuda_12_libraries_from_nvidia_wheels_make_it_load_beside_cuda_13(built, tmp_path, monkeypatch):
    alone = g01.judge_extensions(scan(make_site(tmp_path / "a", built, "widget-cu12"), monkeypatch), None, GB10)
    assert alone.line == "G1 FAIL: widget-cu12: CUDA 12 libraries not found: libcublas.so.12, libcudart.so.12"
    assert alone.fix == (BUILD13.format(name="widget-cu12") + "; or keep this build and add its libraries (pip "
                         "install nvidia-cublas-cu12 nvidia-cuda-runtime-cu12): it then runs beside CUDA 13")
    with_libs = make_site(tmp_path / "b", built, "widget-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12")
    verdict = g01.judge_extensions(scan(with_libs, monkeypatch), None, GB10)
    assert verdict.line == ("G1 WARN: widget-cu12 uses CUDA 12 (its libraries are installed); "
                            "the gb10 profile expects CUDA 13")
    assert "nvidia-cublas-cu12" not in verdict.line and "nvidia-cuda-runtime-cu12" not in verdict.fix
    report = verdict.readings["packages"]["widget-cu12"]
    assert report["libraries"]["libcudart.so.12"].endswith("nvidia/cuda_runtime/lib/libcudart.so.12 (RPATH)")
    assert report["not_found"] == ["libnccl.so.2"]  # its optional NCCL module: noted, not failed


def test_library_wheels_alone_are_no_finding(built, tmp_path, monkeypatch):
    sp = make_site(tmp_path, built, "nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12", "clean")
    verdict = g01.judge_extensions(scan(sp, monkeypatch), None, GB10)
    assert verdict.line == ("G1 PASS: no package uses CUDA (4 shared objects read); "
                            "the gb10 profile expects CUDA 13")


@pytest.mark.parametrize("torch_cuda,line", [
    (None, "G1 PASS: bitsandbytes loads libbitsandbytes_cuda130.so; the gb10 profile expects CUDA 13"),
    ("13.0", "G1 PASS: bitsandbytes loads libbitsandbytes_cuda130.so; the gb10 profile expects CUDA 13"),
    ("12.8", "G1 FAIL: bitsandbytes (cuda128 build): CUDA 12 libraries not found: libcublas.so.12, "
             "libcudart.so.12"),
], ids=["no torch", "torch cu130", "torch cu128"])
def test_several_cuda_builds_pass_when_one_is_for_the_run(built, tmp_path, monkeypatch, torch_cuda, line):
    sp = make_site(tmp_path, built, "bitsandbytes")
    verdict = g01.judge_extensions(scan(sp, monkeypatch, torch_cuda), None, GB10)
    assert verdict.line == line
    if verdict.status is Status.FAIL:  # torch picks the build: fixing torch fixes it
        assert verdict.fix.startswith("reinstall torch for CUDA 13 (pip install --force-reinstall torch "
                                      "--index-url https://download.pytorch.org/whl/cu130): bitsandbytes then "
                                      "loads its CUDA 13 build")
    else:
        assert verdict.readings["packages"]["bitsandbytes"]["builds"] == {"libbitsandbytes_*.so": [12, 13]}


def test_several_builds_without_one_for_the_run_fail(built, tmp_path, monkeypatch):
    sp = make_site(tmp_path, built, "bitsandbytes-old")
    verdict = g01.judge_extensions(scan(sp, monkeypatch), None, GB10)
    assert verdict.line == ("G1 FAIL: bitsandbytes has no CUDA 13 build (it holds 12; "
                            "the gb10 profile expects CUDA 13)")
    assert verdict.fix == ("install a release of bitsandbytes that ships a CUDA 13 build (pip install -U "
                           "bitsandbytes), or build it from source against CUDA 13")


def test_the_override_variable_picks_the_build(built, tmp_path, monkeypatch):
    sp = make_site(tmp_path, built, "bitsandbytes")
    reading = scan(sp, monkeypatch)
    reading.overrides = {"BNB_CUDA_VERSION": "121"}
    verdict = g01.judge_extensions(reading, None, GB10)
    assert verdict.line.startswith("G1 FAIL: bitsandbytes (cuda121 build): CUDA 12 libraries not found")


def test_a_package_that_loads_cuda_12_by_name_is_judged_too(built, tmp_path, monkeypatch):
    sp = make_site(tmp_path, built, "loader-cuda12")
    reading = scan(sp, monkeypatch)
    (ext,) = reading.linked
    assert ext.needs == [] and [lib.soname for lib in ext.loads] == ["libcublas.so.12"]
    verdict = g01.judge_extensions(reading, None, GB10)  # the with-cuda extra's wheel ships both
    assert verdict.line == "G1 FAIL: loader-cuda12: CUDA 12 libraries it loads not found: libcublas.so.12, libcublasLt.so.12"
    assert verdict.fix == (BUILD13.format(name="loader-cuda12") + "; or keep this build and add its libraries "
                           "(pip install nvidia-cublas-cu12): it then runs beside CUDA 13")  # no loader-cuda13 on PyPI
    with_libs = make_site(tmp_path / "b", built, "loader-cuda12", "nvidia-cublas-cu12")
    verdict = g01.judge_extensions(scan(with_libs, monkeypatch), None, GB10)
    assert verdict.line == ("G1 WARN: loader-cuda12 uses CUDA 12 (its libraries are installed); "
                            "the gb10 profile expects CUDA 13")


def test_the_requirements_of_an_extra_not_chosen_are_no_need(built, tmp_path, monkeypatch):
    """numba-cuda 0.30 offers a cu12 and a cu13 extra; a machine with neither (or the cu13 one) must
    not read the cu12 extra's libnvJitLink.so.12 as a library it needs (a false FAIL on the H200)."""
    reading = scan(make_site(tmp_path, built, "numbaish-cuda"), monkeypatch)
    (dist,) = [d for d in reading.distributions if d.name == "numbaish-cuda"]
    assert dist.requires_majors == {} and dist.declared == []
    assert "numbaish" not in g01.judge_extensions(reading, None, GB10).line


def test_an_rpath_into_the_cu12_wheels_is_evidence_of_cuda_12(built, tmp_path, monkeypatch):
    sp = make_site(tmp_path, built, "jax-cuda12-plugin")
    reading = scan(sp, monkeypatch)
    assert [e.rpath_majors for e in reading.linked] == [[12]]
    verdict = g01.judge_extensions(reading, None, GB10)  # the folder names the libraries it loads from there
    assert verdict.line == ("G1 FAIL: jax-cuda12-plugin: CUDA 12 libraries it loads not found: libcublas.so.12, "
                            "libcublasLt.so.12")
    assert verdict.readings["packages"]["jax-cuda12-plugin"]["evidence"] == "its RPATH/RUNPATH names a CUDA 12 folder"
    assert "pip install jax-cuda13-plugin" in verdict.fix
    info = g01.judge_extensions(reading, None, NONE)
    assert info.line == "G1 INFO: CUDA 12: jax-cuda12-plugin; no driver to compare with"
    assert info.detail == "--spark-profile gb10 judges these packages as a Spark would load them"


def test_the_one_extra_that_brings_cuda_libraries_names_what_the_package_loads(built, tmp_path, monkeypatch):
    """jax-cuda12-plugin's only CUDA extra (with-cuda) lists the CUDA 12 wheels it loads by name: not
    installed and found nowhere, the plugin will not load (FAIL); installed, it runs beside CUDA 13."""
    verdict = g01.judge_extensions(scan(make_site(tmp_path, built, "jax-with-cuda"), monkeypatch), None, GB10)
    assert verdict.line == ("G1 FAIL: jax-cuda12-plugin: CUDA 12 libraries it loads not found: libcublas.so.12 +2")
    assert verdict.fix.startswith("install its CUDA 13 build instead: pip uninstall -y jax-cuda12-plugin && "
                                  "pip install jax-cuda13-plugin; or keep this build and add its libraries")
    with_libs = make_site(tmp_path / "b", built, "jax-with-cuda", "nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12")
    verdict = g01.judge_extensions(scan(with_libs, monkeypatch), None, GB10)
    assert verdict.status is Status.WARN and "jax-cuda12-plugin uses CUDA 12" in verdict.line


def test_pytest_fast_as_a_spark_fails_g1_naming_the_distribution(built, tmp_path):
    """``pytest -m fast --spark-profile gb10`` from the repo root with the cu12 wheel on the path."""
    sp = make_site(tmp_path / "env", built, "fastops")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    # no NVML: the fix targets the profile's GPU (sm_121), not the GPU of the machine running the test
    env["PYTHONPATH"] = os.pathsep.join([str(no_nvml.folder(tmp_path)), str(sp), env.get("PYTHONPATH", "")])
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "fast", "-k", "g01",
                           "--spark-profile", "gb10", "--json-report", f"--json-report-file={report}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    block = glines(out, (1,))
    g1 = [line for line in block if line.startswith("G1 ")]
    assert len(g1) == 1 and g1[0].startswith("G1 FAIL: "), out[-3000:]  # the CPU torch fails G1 here too
    assert "Traceback" not in out
    data = json.loads(report.read_text())
    (ext_check,) = [t for t in data["tests"] if t["nodeid"].endswith("test_g1_extensions_link_driver_cuda")]
    gotcha = ext_check["metadata"]["gotcha"]
    assert gotcha["status"] == "FAIL" and "fastops" in gotcha["summary"], gotcha  # others of this venv may be named
    assert gotcha["readings"]["packages"]["fastops"]["not_found"] == ["libcudart.so.12"]
    assert BUILD13.format(name="fastops") in gotcha["fix"]
    assert data["spark_gotchas"]["platform"]["profile"] == "gb10"


def test_odd_files_and_metadata_give_a_verdict_not_a_traceback(built, tmp_path, monkeypatch):
    """A FIFO named like a library, a truncated ELF, a name that is not UTF-8, a distribution whose
    METADATA has no name and one whose RECORD quotes its paths, a hostile distribution name."""
    sp = make_site(tmp_path, built, "fastops")
    os.mkfifo(sp / "fifo.so")  # never opened: the walk takes regular files only
    (sp / "cut.so").write_bytes(built["ext12"].read_bytes()[:200])
    (sp / os.fsdecode(b"\xff\xfe.so")).write_bytes(built["ext12"].read_bytes())
    nameless = sp / "nameless-1.0.dist-info"
    nameless.mkdir()
    (nameless / "METADATA").write_text("Metadata-Version: 2.1\nRequires-Dist: nvidia-cublas-cu12\n")
    (nameless / "RECORD").write_text('"nameless/_C,odd.so",,\n')
    info = eb.install_distribution(sp, "evil-cuda12", "1", {f"evil/_C{eb.EXT_SUFFIX}": built["ext12"]},
                                   requires=("nvidia-cuda-runtime-cu12",))
    metadata = info / "METADATA"
    metadata.write_text(metadata.read_text().replace("Name: evil-cuda12", "Name: evil-cuda12\x1b[2J"))
    reading = scan(sp, monkeypatch)
    assert reading.unreadable >= 1  # the truncated one (the FIFO is not read at all)
    verdict = g01.judge_extensions(reading, None, GB10)
    assert verdict.status is Status.FAIL and "\x1b" not in verdict.line + verdict.fix
    assert "fastops" in verdict.summary


@pytest.mark.parametrize("specifier, major", [("==12.*", 12), ("<13.0.0,>=12.9.1", 12), ("13.0.0.19", 13),
                                              ("12.9.10", 12), ("<14.0.0,>=12.9.1", None), (">=13", None), ("", None),
                                              ("not a specifier", None)])
def test_a_requirement_names_a_cuda_major_only_when_it_allows_one(specifier, major):
    from spark_gotchas.knowledge.readings.cuda_libs import requirement_major

    assert requirement_major("cuda-bindings", specifier) == major



# -- CUDA loaded at run time by name, by a package whose name and requirements say nothing of CUDA ----------
def gb10_line(tmp_path: Path, built, monkeypatch, *packages: str) -> str:
    """The G1 line of a fresh site holding ``packages``, judged as a Spark."""
    return g01.judge_extensions(scan(make_site(tmp_path / "with", built, *packages), monkeypatch), None, GB10).line


def test_ctranslate2_loads_cublas_12_by_name_from_its_libs_folder(built, tmp_path, monkeypatch):
    """ctranslate2 4.8.5 printed "no package uses CUDA": its library sits in ctranslate2.libs/ under a
    name ending .so.4.8.5, links cudart statically and dlopens libcublas.so.12."""
    reading = scan(make_site(tmp_path, built, "ctranslate2"), monkeypatch)
    (ext,) = reading.linked
    assert ext.path.endswith("ctranslate2.libs/libctranslate2-a7a60d30.so.4.8.5") and ext.distribution == "ctranslate2"
    assert [lib.soname for lib in ext.loads] == ["libcublas.so.12", "libnccl.so.2"]
    verdict = g01.judge_extensions(reading, None, GB10)
    assert verdict.line == "G1 FAIL: ctranslate2: CUDA 12 libraries it loads not found: libcublas.so.12"
    assert verdict.fix == (BUILD13.format(name="ctranslate2") + "; or keep this build and add its libraries (pip "
                           "install nvidia-cublas-cu12): it then runs beside CUDA 13")
    assert gb10_line(tmp_path, built, monkeypatch, "ctranslate2", "nvidia-cublas-cu12") == (
        "G1 WARN: ctranslate2 uses CUDA 12 (its libraries are installed); the gb10 profile expects CUDA 13")


def test_its_kernels_reach_sm_121_only_through_ptx_and_the_fix_says_so(built, tmp_path, monkeypatch):
    """ctranslate2's fatbins hold SASS sm_53 … sm_86 and PTX compute_86 (its real kernel list)."""
    reading = scan(make_site(tmp_path, built, "ctranslate2", "nvidia-cublas-cu12"), monkeypatch)
    (dist,) = [d for d in reading.distributions if d.name == "ctranslate2"]
    dist.kernels = {"ctranslate2.libs/libctranslate2-a7a60d30.so.4.8.5": [
        "sm_53", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "compute_86"]}
    verdict = g01.judge_extensions(reading, None, GB10)
    assert verdict.status is Status.WARN
    assert verdict.fix.endswith("; as it is, its kernels reach sm_121 only through PTX compute_86 (compiled at "
                                "first use)")


def test_nvimgcodec_loads_nvjpeg_12_by_name_and_its_extra_makes_it_optional(built, tmp_path, monkeypatch):
    """nvidia-nvimgcodec-cu12's libnvjpeg_ext.so.0.9.0 dlopens libnvjpeg.so.12, which only its nvjpeg
    extra installs: without it the package loads (its nvJPEG codec does not), so no FAIL."""
    reading = scan(make_site(tmp_path, built, "nvimgcodec"), monkeypatch)
    (ext,) = reading.linked
    assert [lib.soname for lib in ext.loads] == ["libnvjpeg.so.12"]
    verdict = g01.judge_extensions(reading, None, GB10)
    assert verdict.line == ("G1 WARN: nvidia-nvimgcodec-cu12 uses CUDA 12 (loaded by name at run time); "
                            "the gb10 profile expects CUDA 13")
    assert verdict.fix == ("install its CUDA 13 build instead: pip uninstall -y nvidia-nvimgcodec-cu12 && "
                           "pip install nvidia-nvimgcodec-cu13")
    assert verdict.readings["packages"]["nvidia-nvimgcodec-cu12"]["not_found"] == ["libnvjpeg.so.12"]
    assert gb10_line(tmp_path, built, monkeypatch, "nvimgcodec", "nvidia-nvjpeg-cu12") == (
        "G1 WARN: nvidia-nvimgcodec-cu12 uses CUDA 12 (its libraries are installed); the gb10 profile expects CUDA 13")


def test_a_soname_in_a_file_that_never_calls_dlopen_is_no_use_of_cuda(built, tmp_path, monkeypatch):
    reading = scan(make_site(tmp_path, built, "mention", "clean"), monkeypatch)
    assert reading.linked == []
    assert g01.judge_extensions(reading, None, GB10).line == (
        "G1 PASS: no package uses CUDA (2 shared objects read); the gb10 profile expects CUDA 13")


def test_the_dynamic_section_says_which_files_import_dlopen(built):
    from spark_gotchas.machine import elf

    assert elf.dynamic(str(built["ct2lib"])).dlopen and not elf.dynamic(str(built["mention"])).dlopen
    with open(built["ct2lib"], "rb") as fh:
        assert elf.dynamic_pyelftools(fh).dlopen  # the reference reader agrees
    assert elf.strings(str(built["ct2lib"]), cuda_libs.IN_BINARY) == ["libcublas.so.12", "libnccl.so.2"]


# -- the Spark is aarch64 ---------------------------------------------------------------------------------
EM_AARCH64 = 183


def as_aarch64(src: Path, dst: Path) -> Path:
    """``src`` with the ELF machine of an aarch64 build (e_machine, bytes 18-19): the reader takes the
    headers and strings of a manylinux aarch64 wheel as it takes an x86_64 one's."""
    data = bytearray(src.read_bytes())
    data[18:20] = EM_AARCH64.to_bytes(2, "little")
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(bytes(data))
    return dst


def ld_so_cache(path: Path, libraries: dict[str, Path]) -> Path:
    """A loader cache in glibc's format (``glibc-ld.so.cache1.1``, what ``ldconfig`` writes and
    ``ldconfig -p`` prints), its entries flagged as an aarch64 machine's (libc6, AArch64 lib64)."""
    import struct

    header = struct.Struct("<20sIIB3xI12x")
    entry = struct.Struct("<iIIIQ")
    strings = b""
    rows = []
    start = header.size + entry.size * len(libraries)
    for soname, target in libraries.items():
        key = start + len(strings)
        strings += soname.encode() + b"\0"
        value = start + len(strings)
        strings += str(target).encode() + b"\0"
        rows.append(entry.pack(0x0a03, key, value, 0, 0))
    path.write_bytes(header.pack(b"glibc-ld.so.cache1.1", len(libraries), len(strings), 2, 0) + b"".join(rows) + strings)
    return path


@pytest.mark.parametrize("package,line", [
    ("ctranslate2", "G1 FAIL: ctranslate2: CUDA 12 libraries it loads not found: libcublas.so.12"),
    ("fastops", "G1 FAIL: fastops: CUDA 12 libraries not found: libcudart.so.12"),
    ("nvimgcodec", "G1 WARN: nvidia-nvimgcodec-cu12 uses CUDA 12 (loaded by name at run time); "
                   "the gb10 profile expects CUDA 13"),
])
def test_an_aarch64_build_is_judged_as_its_x86_64_twin(built, tmp_path, monkeypatch, package, line):
    """No ELF file is passed over for its machine: an aarch64 wheel scanned on x86_64 (tests, CI) and
    a live scan on a Spark (aarch64 native) read the same headers."""
    sp = make_site(tmp_path, built, package)
    for path in [p for p in sp.rglob("*.so*") if p.is_file()]:
        as_aarch64(path, path)
    reading = scan(sp, monkeypatch)
    assert all(Path(e.path).read_bytes()[18] == EM_AARCH64 for e in reading.linked)
    assert g01.judge_extensions(reading, None, GB10).line == line


def test_a_sparks_loader_cache_and_sbsa_toolkit_provide_cuda_13(built, tmp_path, monkeypatch):
    """A DGX OS machine: libcublas.so.13 in /usr/lib/aarch64-linux-gnu through ld.so.cache, libcudart.so.13
    in the toolkit's targets/sbsa-linux/lib; judged on the Spark itself (a driver read), both are found."""
    from spark_gotchas.knowledge.readings.gpu import GpuInventory

    root = tmp_path / "root"
    cublas13 = eb.cuda_stub(tmp_path / "b" / "cublas", 13, "cublas")
    cudart13 = eb.cuda_stub(tmp_path / "b" / "cudart", 13, "cudart")
    system = as_aarch64(cublas13, root / "usr/lib/aarch64-linux-gnu/libcublas.so.13")
    toolkit = root / "usr/local/cuda-13.0"
    as_aarch64(cudart13, toolkit / "targets/sbsa-linux/lib/libcudart.so.13")
    cache = ld_so_cache(tmp_path / "ld.so.cache", {"libcublas.so.13": system})
    assert ex.ld_cache(str(cache)) == {"libcublas.so.13": str(system)}
    user = eb.extension(tmp_path / "b" / "user", "cublas", [cudart13, cublas13])
    sp = tmp_path / "env" / "lib" / "python3.12" / "site-packages"
    eb.install_distribution(sp, "cupy-cuda13x", "14.2.0", {
        "cupy_backends/cuda/libs/cublas.cpython-312-aarch64-linux-gnu.so": as_aarch64(user, tmp_path / "u.so")})
    real_cache = ex.ld_cache
    monkeypatch.setattr(ex, "ld_cache", lambda path="/etc/ld.so.cache": real_cache(str(cache)))
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    monkeypatch.setattr(ex, "INTERPRETER_MACHINE", "aarch64")  # the Spark's own Python, not this x86_64 one
    reading = scan(sp, monkeypatch)
    spark = GpuInventory(driver_version="580.95.05", cuda_driver_version=13000)
    verdict = g01.judge_extensions(reading, spark, GB10)
    assert verdict.line == "G1 PASS: cupy-cuda13x uses CUDA 13; the driver supports CUDA 13.0"
    libraries = verdict.readings["packages"]["cupy-cuda13x"]["libraries"]
    assert libraries == {"libcublas.so.13": f"{system} (ld.so.cache)",
                         "libcudart.so.13": f"{toolkit}/targets/sbsa-linux/lib/libcudart.so.13 (CUDA toolkit folder)"}


def test_a_fifo_where_a_shared_library_or_a_build_record_should_be_never_blocks(tmp_path):
    """A FIFO (or a device) in place of a file read to compare or parse: named unread, not waited on."""
    from spark_gotchas.knowledge.readings.env import FileOwner

    fifo = tmp_path / "libnccl.so.2"
    os.mkfifo(fifo)
    owners = [FileOwner("nvidia-nccl-cu12", "2.32.3", 12, size=1), FileOwner("nvidia-nccl-cu13", "2.32.6", 13, size=1)]
    assert ex.on_disk_owner(str(fifo), owners) == (None, "unread: not a regular file")
    assert ex.on_disk_owner(str(tmp_path / "gone.so.2"), owners) == (None, "missing")

    class Dist:
        def locate_file(self, rel):
            return tmp_path / rel

    record = tmp_path / "tensorflow" / "python" / "platform"
    record.mkdir(parents=True)
    os.mkfifo(record / "build_info.py")
    assert ex.build_info(Dist(), "tensorflow/python/platform/build_info.py,sha256=x,1\n") == {}
    (record / "build_info.py").unlink()
    (record / "build_info.py").write_text("build_info = collections.OrderedDict([('is_cuda_build', False)])\n")
    assert ex.build_info(Dist(), "tensorflow/python/platform/build_info.py,sha256=x,1\n") == {
        "file": "tensorflow/python/platform/build_info.py", "cuda_build": "False"}
