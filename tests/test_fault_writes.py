"""Writes met for real: two processes writing the same snapshot at once, a writer killed with
SIGKILL mid-write, a folder that cannot be written, a full device, a FIFO nobody reads, stdout
redirected to a file. A reader never finds an empty or torn file; a failure is an OSError that
names the path, never a hang and never a stray file under the target's name."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fs_limits import locked

from spark_gotchas.base import atomic
from spark_gotchas.machine.snapshot import Snapshot, save

WRITER = """
import sys
from spark_gotchas.machine.snapshot import Snapshot, save
name, path, times = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(times):
    save(Snapshot(readings={"writer": name, "i": i, "pad": name * 200_000}), path)
print("done", name)
"""


def start_writer(name: str, path: Path, times: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, name, str(path), str(times)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_two_processes_writing_the_same_snapshot_never_leave_it_empty_or_torn(tmp_path):
    path = tmp_path / "run.json"
    save(Snapshot(readings={"writer": "first", "i": -1, "pad": ""}), path)
    writers = [start_writer(name, path, 50) for name in ("a", "b")]
    seen, checks = set(), 0
    deadline = time.monotonic() + 120
    while any(w.poll() is None for w in writers) and time.monotonic() < deadline:
        text = path.read_text(encoding="utf-8")  # at every moment: one writer's whole snapshot
        readings = json.loads(text)["readings"]
        assert readings["pad"] == readings["writer"] * (200_000 if readings["writer"] != "first" else 0)
        seen.add(readings["writer"])
        checks += 1
    outputs = [w.communicate(timeout=60) for w in writers]
    assert [w.returncode for w in writers] == [0, 0], outputs
    assert [out for out, _ in outputs] == ["done a\n", "done b\n"] and all(err == "" for _, err in outputs)
    assert checks > 10 and seen & {"a", "b"}
    assert json.loads(path.read_text())["readings"]["i"] == 49
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # no temp file left behind


def test_a_writer_killed_mid_write_leaves_a_whole_snapshot(tmp_path):
    path = tmp_path / "run.json"
    writer = start_writer("k", path, 10_000)
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    assert json.loads(path.read_text())["readings"]["writer"] == "k"
    # at most the temp file of the write it was killed in, hidden beside it, never under the snapshot's name
    assert all(p.name == "run.json" or (p.name.startswith(".run.json.") and p.name.endswith(".tmp"))
               for p in tmp_path.iterdir())


@pytest.fixture
def unwritable_folder(tmp_path):
    """A folder this process cannot create files in: read-only for a user, immutable for root."""
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "run.json").write_text('{"old": true}')
    with locked(folder):
        yield folder


def test_an_unwritable_folder_is_an_oserror_naming_the_path_and_the_old_file_stays(unwritable_folder):
    path = unwritable_folder / "run.json"
    with pytest.raises(OSError) as info:
        save(Snapshot(readings={"k": 1}), path)
    assert str(info.value).startswith(f"[Errno {info.value.errno}] ")
    assert f"(cannot create a file in {unwritable_folder}): '{path}'" in str(info.value)
    assert path.read_text() == '{"old": true}' and sorted(p.name for p in unwritable_folder.iterdir()) == ["run.json"]


def test_a_folder_that_cannot_be_created_is_an_oserror_naming_it(unwritable_folder):
    path = unwritable_folder / "runs" / "run.json"
    with pytest.raises(OSError, match=f"cannot create the folder {unwritable_folder / 'runs'}"):
        save(Snapshot(readings={}), path)


def test_a_full_device_is_an_oserror_naming_it():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with pytest.raises(OSError) as info:
        save(Snapshot(readings={}), "/dev/full")
    assert str(info.value) == "[Errno 28] No space left on device: '/dev/full'"


@pytest.mark.timeout(60)
def test_a_fifo_nobody_reads_is_an_oserror_not_a_hang(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "FIFO_WAIT_S", 0.5)
    fifo = tmp_path / "summary.fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as info:
        atomic.write_text(fifo, "G1 PASS: …\n")
    assert str(info.value) == f"[Errno 6] No such device or address (a FIFO that nothing read within 0.5 s): '{fifo}'"
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_stdout_redirected_to_a_file_keeps_its_order_and_its_file(tmp_path):
    out = tmp_path / "out.txt"
    script = ("import sys; print('before', flush=True); "
              "from spark_gotchas.machine.snapshot import Snapshot, save; save(Snapshot(readings={'k': 1}), '/dev/stdout'); "
              "print('after', flush=True)")
    with open(out, "w") as fh:
        inode = os.fstat(fh.fileno()).st_ino
        subprocess.run([sys.executable, "-c", script], stdout=fh, check=True, timeout=60)
    text = out.read_text()
    assert text.startswith("before\n{") and text.endswith("}\nafter\n")
    assert json.loads(text[len("before\n"):-len("after\n")])["readings"] == {"k": 1}
    assert out.stat().st_ino == inode  # written through, not replaced


def test_modes_symlinks_and_appends(tmp_path):
    fresh = atomic.write_text(tmp_path / "fresh.json", "{}")
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
    private = tmp_path / "private.json"
    private.write_text("old")
    private.chmod(0o600)
    atomic.write_text(private, "new")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and private.read_text() == "new"
    link = tmp_path / "latest.json"
    link.symlink_to("private.json")
    atomic.write_text(link, "via the link")
    assert link.is_symlink() and private.read_text() == "via the link"
    summary = tmp_path / "step_summary.md"
    atomic.write_text(summary, "## earlier step\n", append=True)
    atomic.write_text(summary, "## spark-gotchas\n", append=True)
    assert summary.read_text() == "## earlier step\n## spark-gotchas\n"
    with pytest.raises(IsADirectoryError):
        atomic.write_text(tmp_path, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.json", "latest.json", "private.json",
                                                           "step_summary.md"]


APPENDER = """
import sys
from spark_gotchas.base import atomic
name, path, times = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(times):
    atomic.write_text(path, f"## block {name}-{i}\\n" + name * 20_000 + "\\n", append=True)
"""


def test_runs_appending_to_one_summary_at_once_each_keep_every_block(tmp_path):
    """Two runs appending to one Markdown summary (``$GITHUB_STEP_SUMMARY``, ``fleet --summary-md``)
    at the same moment: each reads, adds and renames while the other waits, so no block is lost
    (without the folder's lock, 9 of 40 were) and none is torn."""
    summary = tmp_path / "summary.md"
    summary.write_text("## earlier step\n")
    runs = [subprocess.Popen([sys.executable, "-c", APPENDER, name, str(summary), "20"],
                             cwd=Path(__file__).resolve().parents[1]) for name in "ab"]
    assert [run.wait(timeout=120) for run in runs] == [0, 0]
    blocks = [line for line in summary.read_text().splitlines() if line.startswith("## ")]
    assert blocks[0] == "## earlier step"
    assert sorted(blocks[1:]) == sorted(f"## block {n}-{i}" for n in "ab" for i in range(20))
    assert all(line in ("a" * 20_000, "b" * 20_000) for line in summary.read_text().splitlines() if not line.startswith("## "))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]


def test_an_append_to_a_file_past_its_bound_leaves_it_and_says_so(tmp_path):
    """An append reads the old content whole: a 100 MB file (a runaway summary, a sparse file) is
    not read into memory and rewritten; the write fails naming the path and the bound."""
    big = tmp_path / "summary.md"
    with open(big, "wb") as fh:
        fh.truncate(100 << 20)
    with pytest.raises(OSError, match=r"larger than 64 MiB: not rewritten") as caught:
        atomic.write_text(big, "## spark-gotchas\n", append=True)
    assert caught.value.filename == str(big)
    assert big.stat().st_size == 100 << 20 and sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: to give a link to another user (lchown)")
def test_another_users_link_in_a_shared_folder_is_not_followed(tmp_path):
    """A link another user put in a sticky world-writable folder (``/tmp``) could aim an output at
    any file this run may write, as root too: it is refused, as the kernel's protected_symlinks
    refuses it, and the file it names is untouched. This user's own link there is followed."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "victim"
    victim.write_text("kept")
    planted = shared / "report.json"
    planted.symlink_to(victim)
    os.lchown(planted, 65534, 65534)
    with pytest.raises(PermissionError, match="a link another user put in a shared folder: not followed"):
        atomic.write_text(planted, "{}")
    assert victim.read_text() == "kept" and planted.is_symlink()
    own = shared / "own.json"
    own.symlink_to(victim)
    atomic.write_text(own, "{}")
    assert victim.read_text() == "{}"
