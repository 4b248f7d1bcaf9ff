"""The preflight's "last watch" checks (G3, G4): what the heartbeats earlier watches left say, read from a
real state folder and judged, and the next watch saying the same."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

from spark_gotchas.base.serial import to_jsonable
from spark_gotchas.knowledge.judges import g03_unified_memory_log as g03_log
from spark_gotchas.knowledge.judges import g04_thermal as g04
from spark_gotchas.knowledge.readings.watch import EarlierWatch, EarlierWatches, WatchHeartbeat
from spark_gotchas.knowledge.verdict import Status, format_line
from spark_gotchas.machine.readers import watch as watch_reader
from spark_gotchas.machine.readers.thermal.reboot import boot_id

NOW = time.time()


def beat(**kw) -> WatchHeartbeat:
    base = dict(boot_id=boot_id(), btime_s=None, watch_pid=999_999, host="spark1", started_epoch=NOW - 7200,
                last_sample_epoch=NOW - 60, command=["python", "train.py", "--lr", "3e-4", "--epochs", "9"],
                job_pid=4242, out_dir="/runs/spark-gotchas-watch-20261207", samples=7140)
    base.update(kw)
    return WatchHeartbeat(**base)


def left(*beats: WatchHeartbeat, now_boot: str = "this-boot") -> EarlierWatches:
    return EarlierWatches(state_dir="/home/u/.local/state/spark-gotchas", boot_id=now_boot,
                          watches=[EarlierWatch(path=f"/s/watch-{i}.json", heartbeat=b) for i, b in enumerate(beats)])


def test_a_watched_run_under_which_the_machine_rebooted_fails_g4_with_the_soaks_fix():
    v = g04.judge_earlier_watches(left(beat(boot_id="an-earlier-boot")))
    assert v.status is Status.FAIL
    assert v.summary.startswith("watched `python train.py …` ended in a reboot/power loss at about ")
    assert "ended in a reboot/power loss at about" in v.summary
    assert v.fix.startswith("improve cooling and cap run length")
    assert "journalctl -k -b -1" in v.fix and "spark-gotchas -m soak" not in v.fix
    assert "/runs/spark-gotchas-watch-20261207" in v.detail and "removes its record" in v.detail
    assert len(format_line(4, v.status, v.summary)) <= 100


def test_a_long_command_keeps_the_line_within_100_columns():
    v = g04.judge_earlier_watches(left(beat(boot_id="old", command=["/opt/" + "x" * 90 + "/python", "t.py"])))
    assert v.status is Status.FAIL and len(format_line(4, v.status, v.summary)) <= 100
    assert v.summary.startswith("a watched run ended in a reboot/power loss")


def test_a_watch_killed_in_this_boot_is_info_and_none_is_a_skip():
    killed = g04.judge_earlier_watches(left(beat(boot_id="this-boot")))
    assert killed.status is Status.INFO and "was killed with its watch" in killed.summary
    none = g04.judge_earlier_watches(left())
    assert none.status is Status.SKIP and none.summary == "no earlier watch recorded: nothing to check for a reboot"
    ended = beat(boot_id="old", end_reason="exit status 0", ended_epoch=NOW - 30)
    assert g04.judge_earlier_watches(left(ended)).status is Status.PASS  # it ended: no reboot under it


def test_an_oom_killed_watched_run_warns_g3_and_g4_stays_quiet():
    oom = beat(boot_id="this-boot", end_reason="killed by SIGKILL (the kernel's OOM killer)", oom_kill=True,
               ended_epoch=NOW - 100)
    v = g03_log.judge_watched_oom(left(oom))
    assert v.status is Status.WARN and v.summary.startswith("the OOM killer ended the watched run `python train.py")
    assert v.fix == g03_log.FIX_RAN_OUT  # the same remedy as the kernel log's OOM kill
    assert g04.judge_earlier_watches(left(oom)).status is Status.PASS
    assert g03_log.judge_watched_oom(left(beat())).status is Status.PASS


def test_an_unlistable_folder_skips_both():
    bad = EarlierWatches(state_dir="/s", problem="cannot list /s: Permission denied")
    assert g04.judge_earlier_watches(bad).status is Status.SKIP
    assert g03_log.judge_watched_oom(bad).status is Status.SKIP


def test_the_reader_reads_a_real_state_folder_and_leaves_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_GOTCHAS_STATE_DIR", str(tmp_path))
    rebooted = beat(boot_id="an-earlier-boot")
    (tmp_path / "watch-1-1.json").write_text(json.dumps(to_jsonable(rebooted)))
    (tmp_path / "watch-2-2.json").write_text("{not json")
    os.mkfifo(tmp_path / "watch-3-3.json")  # never opened for reading as a plain file
    (tmp_path / "other.json").write_text("{}")
    reading = watch_reader.read_earlier_watches(None)
    assert reading.state_dir == str(tmp_path) and reading.boot_id == boot_id()
    assert [os.path.basename(w.path) for w in reading.watches] == ["watch-1-1.json", "watch-2-2.json", "watch-3-3.json"]
    assert reading.watches[0].heartbeat == rebooted and not reading.watches[0].watch_alive
    assert reading.watches[1].heartbeat is None and reading.watches[1].problem
    assert "FIFO" in reading.watches[2].problem or "regular" in reading.watches[2].problem
    v = g04.judge_earlier_watches(reading)
    assert v.status is Status.FAIL and "left unread" in v.detail
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.json", "watch-1-1.json", "watch-2-2.json",
                                                           "watch-3-3.json"]  # the preflight removes nothing


def test_a_missing_folder_is_a_skip_and_a_running_watch_is_info(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_GOTCHAS_STATE_DIR", str(tmp_path / "none"))
    reading = watch_reader.read_earlier_watches(None)
    assert reading.watches == [] and reading.problem == ""
    assert g04.judge_earlier_watches(reading).status is Status.SKIP
    assert g03_log.judge_watched_oom(reading).status is Status.SKIP
    monkeypatch.setenv("SPARK_GOTCHAS_STATE_DIR", str(tmp_path))
    running = replace(beat(), watch_pid=os.getpid(), started_epoch=time.time())
    (tmp_path / "watch-9-9.json").write_text(json.dumps(to_jsonable(running)))
    reading = watch_reader.read_earlier_watches(None)
    assert reading.watches[0].watch_alive
    v = g04.judge_earlier_watches(reading)
    assert v.status is Status.INFO and v.summary.startswith("a watch is running now")
