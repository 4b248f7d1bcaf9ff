"""The soak check's last step, after it judged: the PNG titled with the verdict, the files named.

The engine returns a reading and never judges; the check judges it and hands the verdict here.
Live, this draws the PNG beside the CSV with the verdict line as its title, names the PNG in the
reading (so the snapshot records it, as before) and in the verdict's ``png`` field, lists it among
the run's files, and says the two closing lines. A replay draws nothing and says nothing: its
reading names the PNG the run drew.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from ..base.serial import to_jsonable
from ..knowledge.judges.g04_thermal import clock_floor, rated_power
from ..knowledge.profiles import Profile
from ..knowledge.readings.thermal import SoakReading
from ..knowledge.verdict import Verdict
from ..runtime.soak.plot import plot_soak, png_path_of

KEY = "thermal.soak"


class CheckContext(Protocol):
    """What this step uses of the checks' ``spark`` fixture."""

    @property
    def live(self) -> bool: ...

    @property
    def profile(self) -> Profile: ...

    @property
    def provider(self) -> Any: ...

    def say(self, text: str) -> None: ...

    def add_artifact(self, name: str, path: str) -> None: ...


def finish(spark: CheckContext, reading: SoakReading, verdict: Verdict) -> Verdict:
    """Live: draw the PNG titled with ``verdict``'s line and name the files. Returns the verdict to
    report (its ``png`` field names the PNG drawn)."""
    if not spark.live or not reading.attempted:
        return verdict
    profile = spark.profile
    floor, _ = clock_floor(profile, reading.max_sm_clock_mhz)
    rated, label = rated_power(profile, reading.power_limit_w)
    reading.png_path, reading.plot_note = plot_soak(reading, verdict.line, png_path_of(reading), floor, rated, label)
    if KEY in spark.provider.recorded:  # recorded when it was read, before there was a PNG to name
        spark.provider.recorded[KEY] = to_jsonable(reading)
    if reading.png_path:
        spark.add_artifact("g4_soak_png", reading.png_path)
    spark.say(f"G4 soak finished ({reading.end_reason}): {verdict.line}")
    spark.say(f"G4 soak files: {reading.csv_path}"
              + (f", {reading.png_path}" if reading.png_path else f" ({reading.plot_note})"))
    if "png" not in verdict.readings:
        return verdict
    return replace(verdict, readings={**verdict.readings, "png": reading.png_path})
