"""One provider for every reading: read once, record, replay without touching the machine."""

import threading
from dataclasses import dataclass
from typing import Optional

import pytest

from spark_gotchas.machine import readers
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.provider import Provider, ReadingUnavailable, peek
from spark_gotchas.machine.readers import ReaderSpec
from spark_gotchas.machine.snapshot import Snapshot


@dataclass
class Clock:
    sm_mhz: int
    capability: Optional[tuple[int, int]] = None


class Calls:
    def __init__(self):
        self.count = 0


@pytest.fixture
def register(monkeypatch):
    """Register test readers for one test only."""
    readers.load_all()

    def add(key, func, returns=Clock, replay_input=None):
        monkeypatch.setitem(readers.READERS, key, ReaderSpec(key, func, returns, "", replay_input))

    return add


def test_a_live_reading_is_taken_once_recorded_and_typed(register):
    calls = Calls()

    def read(ctx):
        calls.count += 1
        return Clock(2418, (12, 1))

    register("test.clock", read)
    provider = Provider(RunOptions())
    first = provider.read("test.clock")
    assert provider.read("test.clock") is first and calls.count == 1
    assert first == Clock(2418, (12, 1)) and isinstance(first.capability, tuple)  # came back through JSON
    assert provider.recorded == {"test.clock": {"sm_mhz": 2418, "capability": [12, 1]}}
    assert provider.seconds["test.clock"] >= 0
    assert provider.live


def test_a_crashing_reader_becomes_unavailable_once(register):
    calls = Calls()

    def read(ctx):
        calls.count += 1
        raise OSError("permission denied: /sys/class/hwmon")

    register("test.broken", read)
    provider = Provider(RunOptions())
    for _ in range(2):
        with pytest.raises(ReadingUnavailable) as info:
            provider.read("test.broken")
        assert info.value.key == "test.broken"
        assert info.value.reason == "reader failed: OSError: permission denied: /sys/class/hwmon"
        assert info.value.bug  # a reader that raises is a defect (the check reports FAIL, not SKIP)
    assert calls.count == 1
    assert provider.try_read("test.broken") is None
    assert "test.broken" not in provider.recorded


def test_unknown_key():
    with pytest.raises(ReadingUnavailable, match="no reader of that name"):
        Provider(RunOptions()).read("test.nobody")


def test_replay_reads_the_snapshot_and_never_the_machine(register):
    def read(ctx):
        raise AssertionError("a replay must not call a reader")

    register("test.clock", read)
    snap = Snapshot(readings={"test.clock": {"sm_mhz": 600, "capability": [12, 1]}}, path="/runs/spark1.json")
    provider = Provider(RunOptions(), replay=snap)
    assert provider.read("test.clock") == Clock(600, (12, 1))
    assert not provider.live and provider.recorded == {}


def test_replay_of_a_reading_absent_from_the_snapshot(register):
    register("test.clock", lambda ctx: Clock(1))
    provider = Provider(RunOptions(), replay=Snapshot(path="/runs/old.json"))
    with pytest.raises(ReadingUnavailable) as info:
        provider.read("test.clock")
    assert info.value.reason == "not in the snapshot old.json"
    assert not info.value.bug


def test_replay_of_a_reading_that_no_longer_fits_its_type(register):
    register("test.clock", lambda ctx: Clock(1))
    provider = Provider(RunOptions(), replay=Snapshot(readings={"test.clock": ["not", "an", "object"]}))
    with pytest.raises(ReadingUnavailable, match="recorded reading does not fit Clock"):
        provider.read("test.clock")


def test_readers_reach_other_readings_and_the_options(register):
    register("test.base", lambda ctx: Clock(int(ctx.options.spark_fast_timeout)))
    register("test.derived", lambda ctx: Clock(ctx.provider.read("test.base").sm_mhz * 2))
    provider = Provider(RunOptions(spark_fast_timeout=30.0))
    assert provider.read("test.derived").sm_mhz == 60
    assert set(provider.recorded) == {"test.base", "test.derived"}


def test_without_a_worker_gpu_readings_are_unavailable(register):
    register("test.gpu", lambda ctx: Clock(ctx.worker.call("x:y").value))
    with pytest.raises(ReadingUnavailable, match="no GPU worker"):
        Provider(RunOptions()).read("test.gpu")


def test_peek_never_reads(register):
    calls = Calls()

    def read(ctx):
        calls.count += 1
        return Clock(1)

    register("test.clock", read)
    provider = Provider(RunOptions())
    assert peek(provider, "test.clock") is None and calls.count == 0
    provider.read("test.clock")
    assert peek(provider, "test.clock") == Clock(1)
    replay = Provider(RunOptions(), replay=Snapshot(readings={"test.clock": {"sm_mhz": 5}}))
    assert peek(replay, "test.clock") == Clock(5)


def test_prefetch_takes_a_reading_in_the_background_and_read_waits_for_it(register):
    calls = Calls()
    release = threading.Event()
    threads = []

    def read(ctx):
        calls.count += 1
        threads.append(threading.current_thread().name)
        release.wait(5)
        return Clock(1980)

    register("test.clock", read)
    provider = Provider(RunOptions())
    provider.prefetch("test.clock")
    provider.prefetch("test.clock")  # a second prefetch starts nothing more
    threading.Timer(0.2, release.set).start()
    assert provider.read("test.clock") == Clock(1980)  # waits for the background reading
    assert calls.count == 1 and threads == ["prefetch test.clock"]


def test_a_reading_unavailable_in_the_background_is_unavailable_in_the_check(register):
    calls = Calls()

    def read(ctx):
        calls.count += 1
        raise ReadingUnavailable("torch.build", "torch is not installed")

    register("test.clock", read)
    provider = Provider(RunOptions())
    provider.prefetch("test.clock")
    for _ in range(2):
        with pytest.raises(ReadingUnavailable) as info:
            provider.read("test.clock")
        assert info.value.key == "torch.build" and info.value.reason == "torch is not installed"
    assert calls.count == 1


def test_prefetch_does_nothing_in_a_replay_or_for_an_unknown_key(register):
    calls = Calls()
    register("test.clock", lambda ctx: calls.__setattr__("count", calls.count + 1) or Clock(1))
    replay = Snapshot(readings={"test.clock": {"sm_mhz": 1500, "capability": None}}, path="s.json")
    provider = Provider(RunOptions(), replay=replay)
    provider.prefetch("test.clock")
    Provider(RunOptions()).prefetch("no.such.reading")
    assert calls.count == 0 and provider.read("test.clock").sm_mhz == 1500


def test_a_replay_reads_inputs_named_anew_on_the_command_line_and_keeps_the_rest(register):
    def redo(ctx, recorded):
        return Clock(sm_mhz=len(ctx.options.spark_launch_config), capability=recorded.capability)

    register("test.clock", lambda ctx: Clock(1), replay_input=("spark_launch_config", redo))
    replay = Snapshot(readings={"test.clock": {"sm_mhz": 1500, "capability": [12, 1]}}, path="s.json")
    as_recorded = Provider(RunOptions(spark_launch_config=("a.yaml", "b.sh")), replay=replay)
    assert as_recorded.read("test.clock") == Clock(1500, (12, 1))  # not set on the command line: recorded
    named = Provider(RunOptions(spark_launch_config=("a.yaml", "b.sh"), explicit=frozenset({"spark_launch_config"})),
                     replay=replay)
    assert named.read("test.clock") == Clock(2, (12, 1))
