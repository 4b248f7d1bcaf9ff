"""Folders with fewer rights or less room than a run expects, made for real: a folder no file can be
created in (read-only for a user, immutable for root), a tmpfs a few KiB large. Each test skips,
saying why, where this machine cannot make one."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[Path]:
    """``folder`` as one this process cannot create files in, for the ``with`` block."""
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        if chattr is None or subprocess.run([chattr, "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("running as root, and this file system cannot make a folder immutable (chattr +i)")
        try:
            yield folder
        finally:
            subprocess.run([chattr, "-i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "64k") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``folder`` (made if missing) for the ``with`` block."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    folder.mkdir(exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                      capture_output=True).returncode:
        pytest.skip("this machine cannot mount a tmpfs here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)
