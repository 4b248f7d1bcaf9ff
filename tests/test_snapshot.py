"""Snapshot documents: written atomically, read back, refused with one clear line when unusable."""

import json
import os
import stat
import threading

import pytest

from spark_gotchas.machine import snapshot
from spark_gotchas.machine.snapshot import FORMAT, VERSION, Snapshot, SnapshotError, load, save


def test_save_then_load(tmp_path):
    snap = Snapshot(readings={"env.container": {"dockerenv": True}}, options={"spark_profile": "gb10"},
                    platform={"profile": "gb10"}, verdicts=[{"id": "G9", "status": "PASS"}],
                    created="2026-01-01T00:00:00+00:00", suite_version="0.1.0")
    path = snapshot.save(snap, tmp_path / "runs" / "spark1.json")
    assert [p.name for p in path.parent.iterdir()] == ["spark1.json"]  # no temp file left behind
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT and data["version"] == VERSION
    back = snapshot.load(path)
    assert (back.readings, back.options, back.platform, back.verdicts, back.created, back.suite_version) == (
        snap.readings, snap.options, snap.platform, snap.verdicts, snap.created, snap.suite_version)
    assert back.path == str(path)


def test_created_is_filled_in():
    assert Snapshot().to_json()["created"].endswith("+00:00")


def write(tmp_path, text):
    path = tmp_path / "snap.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text,message", [
    ("{not json", "is not JSON"),
    ("[]", "is not a spark-gotchas snapshot"),
    ('{"format": "something-else", "version": 1, "readings": {}}', "is not a spark-gotchas snapshot"),
    (json.dumps({"format": FORMAT, "version": VERSION + 1, "readings": {}}),
     f"has version {VERSION + 1}; this suite reads up to {VERSION}"),
    (json.dumps({"format": FORMAT, "version": "1", "readings": {}}), "has version '1'"),
    (json.dumps({"format": FORMAT, "readings": {}}), "has version None"),
    (json.dumps({"format": FORMAT, "version": 1, "readings": []}), "has no readings object"),
    (json.dumps({"format": FORMAT, "version": 1}), "has no readings object"),
])
def test_unusable_documents_say_why(tmp_path, text, message):
    with pytest.raises(SnapshotError, match=message.replace("(", r"\(")):
        snapshot.load(write(tmp_path, text))


def test_missing_and_unreadable(tmp_path):
    with pytest.raises(SnapshotError, match="snapshot not found"):
        snapshot.load(tmp_path / "nope.json")
    with pytest.raises(SnapshotError, match="is not a regular file"):
        snapshot.load(tmp_path)  # a directory
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SnapshotError, match="is not UTF-8 text|is not JSON"):
        snapshot.load(binary)


def test_minimal_document_loads_with_defaults(tmp_path):
    snap = snapshot.load(write(tmp_path, json.dumps({"format": FORMAT, "version": 1, "readings": {}})))
    assert snap.options == {} and snap.platform == {} and snap.verdicts == [] and snap.created == ""


def test_save_writes_through_a_device_or_fifo_and_never_replaces_it(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text(encoding="utf-8")))
    reader.start()
    save(Snapshot(readings={"k": 1}), fifo)
    reader.join(10)
    assert json.loads(got[0])["readings"] == {"k": 1}
    assert stat.S_ISFIFO(fifo.stat().st_mode) and not (tmp_path / "pipe.tmp").exists()


def test_save_to_a_directory_or_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    with pytest.raises(IsADirectoryError):
        save(Snapshot(readings={}), tmp_path)
    assert not (tmp_path.parent / f"{tmp_path.name}.tmp").exists()
    monkeypatch.setattr("os.replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError, match="No space"):
        save(Snapshot(readings={}), tmp_path / "snap.json")
    assert list(tmp_path.iterdir()) == []


def test_save_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(real)
    save(Snapshot(readings={"k": 2}), link)
    assert link.is_symlink() and load(real).readings == {"k": 2}
