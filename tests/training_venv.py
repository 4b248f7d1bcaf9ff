"""A stand-in for a runner's training venv: the suite's dependencies without the suite, offline.

The workflow's install step must leave such a venv exactly as it found it. A real one is made
here in a second: a plain venv whose one ``.pth`` line points at a folder of links to this
interpreter's copies of pip, setuptools and the suite's dependencies (their whole closure, read
from the checkout's pyproject.toml), so nothing is downloaded and nothing of this interpreter's
own environment (the suite's editable install, torch) shows through.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
BUILD_TOOLS = ("pip", "setuptools")


@dataclass
class TrainingVenv:
    path: Path
    linked: Path  # the folder of links its .pth names

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    def freeze(self) -> str:
        """``pip freeze`` as the venv sees itself: what an install into it would change."""
        return subprocess.run([str(self.bin / "python"), "-m", "pip", "freeze", "--all"], capture_output=True,
                              text=True, timeout=60, env=self.env(), check=True).stdout

    def files(self) -> dict[str, tuple[int, int]]:
        """Every file of the venv and of its linked folder but bytecode caches: path -> (size, mtime)."""
        found = {}
        for top in (self.path, self.linked):
            for folder, dirs, names in os.walk(top, followlinks=True):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                for name in names:
                    path = Path(folder) / name
                    stat = path.stat()
                    found[str(path)] = (stat.st_size, stat.st_mtime_ns)
        return found

    def env(self, **more: str) -> dict[str, str]:
        """An activated venv's environment, with nothing of this test run's own Python settings."""
        keep = {k: v for k, v in os.environ.items()
                if not k.startswith(("PYTEST_", "PYTHON", "PIP_", "VIRTUAL_ENV"))}
        keep.update({"PATH": f"{self.bin}{os.pathsep}/usr/bin{os.pathsep}/bin", "VIRTUAL_ENV": str(self.path),
                     "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1"})
        keep.update(more)
        return keep


def can_build_offline() -> str:
    """Why this interpreter's setuptools cannot build the suite's wheel without the network ('' if it can)."""
    try:
        version = Version(md.version("setuptools"))
    except md.PackageNotFoundError:
        return "setuptools is not installed here"
    if version >= Version("70.1"):
        return ""
    try:
        md.version("wheel")
        return ""
    except md.PackageNotFoundError:
        return f"setuptools {version} builds wheels only with the wheel package (or setuptools>=70.1)"


def _dependencies() -> list[str]:
    """The suite's own requirements: from the checkout's pyproject.toml where Python reads TOML (3.11+),
    else from the installed suite's metadata."""
    try:
        import tomllib
    except ImportError:
        return [r for r in md.requires("spark-gotchas") or [] if "extra ==" not in r]
    return list(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"])


def _closure() -> set[str]:
    wanted = _dependencies() + list(BUILD_TOOLS)
    seen: set[str] = set()
    while wanted:
        req = Requirement(wanted.pop())
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        dist = md.distribution(req.name)
        name = dist.metadata["Name"].lower()
        if name not in seen:
            seen.add(name)
            wanted += dist.requires or []
    return seen


def make(base: Path) -> TrainingVenv:
    """A venv at ``base/train`` holding pip, setuptools and the suite's dependencies (not the suite)."""
    venv, linked = base / "train", base / "train-packages"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    linked.mkdir()
    for name in sorted(_closure()):
        dist = md.distribution(name)
        for top in sorted({Path(str(f)).parts[0] for f in dist.files or []} - {"..", "__pycache__"}):
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (linked / top).exists():
                (linked / top).symlink_to(source)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "train-packages.pth").write_text(f"{linked}\n", encoding="utf-8")
    return TrainingVenv(venv, linked)


UNTRACKED = (".git", ".venv", ".ci-venv", ".tox", ".whl", ".ab", "build", "dist", "reports", "*.egg-info",
             "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis")


def checkout_copy(dest: Path) -> Path:
    """The working tree's files (tracked, and new ones git does not ignore), copied: a build writes
    ``build/`` and ``*.egg-info`` into the tree it builds from, and that must not be this one. A tree
    that is no git checkout (itself a copy) is copied whole but for what git would ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, timeout=60)
    if listed.returncode != 0:
        shutil.copytree(ROOT, dest, symlinks=True, ignore=shutil.ignore_patterns(*UNTRACKED))
        return dest
    for rel in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(source.read_bytes())
    return dest
