"""G4 reboot check: the last soak's heartbeat against this boot's id and boot time."""

import json
import os
import time

import pytest

from spark_gotchas.knowledge.judges import g04_thermal as g04
from spark_gotchas.knowledge.readings.thermal import Heartbeat
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers import ReadContext
from spark_gotchas.machine.readers.thermal import reboot
from spark_gotchas.machine.readers.thermal.reboot import HEARTBEAT_NAME, check_heartbeat, write_heartbeat

STARTED = 1_780_000_000.0  # 2026-05-28 20:26:40 UTC
BOOT_A = "6f0b5e9a-1c1e-4f6b-9b5d-6c2f1a7e0a01"
BOOT_B = "d3c1b2a4-0000-4000-8000-1234567890ab"


@pytest.fixture
def this_boot(monkeypatch):
    """Pretend this machine booted (BOOT_B) two hours after the soak started."""
    monkeypatch.setattr(reboot, "boot_id", lambda: BOOT_B)
    monkeypatch.setattr(reboot, "boot_time_s", lambda: int(STARTED + 7200))


def beat(**kw) -> Heartbeat:
    base = dict(boot_id=BOOT_A, btime_s=int(STARTED - 86400), pid=999_999, host="spark-1", started_epoch=STARTED,
                planned_s=28800.0, last_sample_epoch=STARTED + 5025.0, samples=5025,
                csv_path="/home/me/reports/g4-soak-20260528-202640.csv")
    base.update(kw)
    return Heartbeat(**base)


def judged(tmp_path, heartbeat):
    path = tmp_path / HEARTBEAT_NAME
    write_heartbeat(path, heartbeat)
    return g04.judge_reboot(check_heartbeat(path))


def test_a_soak_that_ended_in_a_reboot_fails_with_when_it_started_and_its_last_heartbeat(tmp_path, this_boot):
    v = judged(tmp_path, beat())
    assert v.status is Status.FAIL
    assert v.line == "G4 FAIL: the last soak ended in a reboot/power loss at about 2026-05-28 21:50:25 UTC"
    assert v.detail == "it started 2026-05-28 20:26:40 UTC; boot id changed; this boot began 2026-05-28 22:26:40 UTC"
    assert "journalctl -k -b -1" in v.fix and "cooling" in v.fix


def test_without_boot_ids_the_boot_time_decides(tmp_path, this_boot, monkeypatch):
    monkeypatch.setattr(reboot, "boot_id", lambda: None)
    v = judged(tmp_path, beat(boot_id=None, btime_s=None))
    assert v.status is Status.FAIL and v.detail.endswith("; this boot began 2026-05-28 22:26:40 UTC")
    assert "boot id" not in v.detail


def test_a_completed_soak_passes(tmp_path, this_boot):
    v = judged(tmp_path, beat(ended_epoch=STARTED + 28801, end_reason="completed"))
    assert v.line == "G4 PASS: the last soak (8:00:00 planned) ended normally at 2026-05-29 04:26:41 UTC"
    assert v.detail == "it started 2026-05-28 20:26:40 UTC"


def test_a_soak_cut_short_is_information_not_a_reboot(tmp_path, this_boot):
    v = judged(tmp_path, beat(ended_epoch=STARTED + 600, end_reason="cut short by SIGINT"))
    assert v.status is Status.INFO
    assert v.line == "G4 INFO: the last soak ended at 2026-05-28 20:36:40 UTC: cut short by SIGINT; no reboot"
    assert v.detail == "it started 2026-05-28 20:26:40 UTC"


def test_same_boot_and_the_process_gone_is_a_killed_soak(tmp_path, this_boot):
    v = judged(tmp_path, beat(boot_id=BOOT_B))
    assert v.status is Status.INFO
    assert v.line == "G4 INFO: the last soak was killed at about 2026-05-28 21:50:25 UTC (no end marker, no reboot)"
    assert v.detail == ("it started 2026-05-28 20:26:40 UTC; its CSV keeps what it measured "
                        "(/home/me/reports/g4-soak-20260528-202640.csv)")


def test_a_soak_still_running_is_said_so(tmp_path, monkeypatch):
    monkeypatch.setattr(reboot, "boot_id", lambda: BOOT_A)
    now = time.time()
    v = judged(tmp_path, beat(pid=os.getpid(), started_epoch=now, last_sample_epoch=now - 2))
    assert v.status is Status.INFO and v.line.startswith("G4 INFO: a soak is running now (started ")
    assert f"pid {os.getpid()}, last sample " in v.line


def test_no_heartbeat_and_a_broken_one_are_skips_with_the_reason(tmp_path, this_boot):
    missing = g04.judge_reboot(check_heartbeat(tmp_path / HEARTBEAT_NAME))
    assert missing.line == "G4 SKIP: no earlier soak recorded: nothing to check for a reboot"
    assert missing.detail == f"no heartbeat at {tmp_path / HEARTBEAT_NAME}"
    (tmp_path / HEARTBEAT_NAME).write_text('{"format": "spark-gotchas-soak-heartb')
    broken = g04.judge_reboot(check_heartbeat(tmp_path / HEARTBEAT_NAME))
    assert broken.status is Status.SKIP and "is not JSON" in broken.line
    (tmp_path / HEARTBEAT_NAME).write_text(json.dumps({"format": "spark-gotchas-soak-heartbeat", "pid": 1}))
    partial = g04.judge_reboot(check_heartbeat(tmp_path / HEARTBEAT_NAME))
    assert partial.status is Status.SKIP and "lacks fields of a soak heartbeat" in partial.line
    (tmp_path / HEARTBEAT_NAME).write_text("[]")
    assert "is not a soak heartbeat" in g04.judge_reboot(check_heartbeat(tmp_path / HEARTBEAT_NAME)).line


def test_the_reader_looks_in_the_soak_dir_and_reads_this_boot(tmp_path):
    ctx = ReadContext(options=RunOptions(soak_dir=str(tmp_path)), worker_factory=lambda: None)
    check = reboot.read_reboot(ctx)
    assert check.heartbeat_path == str(tmp_path.resolve() / HEARTBEAT_NAME) and not check.found
    assert check.boot_id == open("/proc/sys/kernel/random/boot_id").read().strip()
    assert isinstance(check.btime_s, int) and check.btime_s < time.time()
