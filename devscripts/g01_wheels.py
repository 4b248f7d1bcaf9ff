"""Real wheels for G1: lay them out as pip installs them, record what the scan reads of them.

    python devscripts/g01_wheels.py site SITE WHEEL... [--requested NAME,NAME]
    python devscripts/g01_wheels.py record SITE CASE [--fixture tests/fixtures/g01_wheels.json] [--machine=aarch64]
    python devscripts/g01_wheels.py lines SITE          # the G1 extension line, as gb10 and without a profile

``site`` unpacks each wheel into SITE as pip does (its .data/purelib and platlib at the top, an
INSTALLER file, a REQUESTED marker for the distributions named by --requested, all by default):
a later wheel overwrites the files of an earlier one, as pip does when two install the same path.
``record`` runs the env.cuda_extensions reader on SITE and stores its reading under CASE in the
fixture (the site folder written as ``/site``), with the wheels' file names: the tests judge these
recorded readings, never the wheels themselves (hundreds of MB; they stay out of the repository).
The reading is taken as a Python of the wheels' platform would take it: ``--machine`` (default: the
CPU most of SITE's shared objects were built for) stands for this interpreter's own.
Wheels come from ``pip download --no-deps --only-binary=:all: --python-version 3.12 --platform
manylinux_2_28_aarch64 …`` (CHANGELOG.md lists the ones tried, G1 of 2026-12-05).
"""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_gotchas.base.serial import to_jsonable  # noqa: E402
from spark_gotchas.knowledge.judges import g01_cuda_abi as g01  # noqa: E402
from spark_gotchas.knowledge.profiles import PROFILES  # noqa: E402
from spark_gotchas.machine.readers import env as ex  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "g01_wheels.json"
SITE = "/site"


def unpack(wheel: Path, site: Path, requested: bool) -> str:
    """Unpack one wheel as pip installs it; its distribution's name."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            parts = info.filename.split("/")
            if ".data" in parts[0] and len(parts) > 2:  # NAME-VER.data/purelib/... -> ...
                if parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            if info.is_dir() or not parts[-1]:
                continue
            target = site.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        info_dir = next(n.split("/")[0] for n in zf.namelist() if n.split("/")[0].endswith(".dist-info"))
    (site / info_dir / "INSTALLER").write_text("pip\n")
    if requested:
        (site / info_dir / "REQUESTED").write_text("")
    return info_dir.rsplit("-", 1)[0]


def relocated(value, site: str):
    """The reading with the site folder written as /site (paths inside and outside it)."""
    if isinstance(value, str):
        return value.replace(site, SITE)
    if isinstance(value, list):
        return [relocated(v, site) for v in value]
    if isinstance(value, dict):
        return {relocated(k, site): relocated(v, site) for k, v in value.items()}
    return value


def scan(site: Path, machine: str | None = None):
    """The reader on SITE, as a Python of ``machine`` (the wheels' platform) would read it."""
    ex.site_dirs = lambda: [str(site)]
    ex.INTERPRETER_MACHINE = machine
    return ex.read_cuda_extensions(None)


def site_machine(site: Path) -> str | None:
    """The CPU most of SITE's shared objects were built for (the platform its wheels were downloaded for)."""
    from collections import Counter

    from spark_gotchas.machine import elf
    found = Counter(info.machine for path in ex.find_shared_objects(str(site)) if (info := elf.dynamic(path)))
    return found.most_common(1)[0][0] if found else None


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    command, site = argv[0], Path(argv[1]).resolve()
    if command == "site":
        names = [a for a in argv[2:] if not a.startswith("--requested")]
        wanted = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--requested=")), None)
        site.mkdir(parents=True, exist_ok=True)
        for wheel in names:
            dist = Path(wheel).name.split("-")[0].replace("_", "-").lower()
            unpack(Path(wheel), site, wanted is None or dist in wanted)
            print(f"unpacked {Path(wheel).name} (requested: {wanted is None or dist in wanted})")
        return 0
    machine = next((a.split("=", 1)[1] for a in argv if a.startswith("--machine=")), None) or site_machine(site)
    reading = scan(site, machine)
    if command == "record":
        case = argv[2]
        fixture = Path(next((a.split("=", 1)[1] for a in argv if a.startswith("--fixture=")), FIXTURE))
        data = json.loads(fixture.read_text()) if fixture.exists() else {"_about": __doc__.splitlines()[0]}
        wheels = sorted(p.name for p in site.glob("*.dist-info"))
        body = relocated(to_jsonable(reading), str(site))
        body["seconds"] = body["strings_seconds"] = 0.0  # timings of this machine: not facts of the wheels
        data[case] = {"distributions": wheels, "reading": body}
        fixture.write_text(json.dumps(data, indent=None, separators=(",", ":"), sort_keys=True) + "\n")
        print(f"recorded {case}: {len(wheels)} distributions, {reading.shared_objects} shared objects")
    for key in ("gb10", "none"):
        verdict = g01.judge_extensions(reading, None, PROFILES[key])
        print(f"{key}: {verdict.line}")
        if verdict.fix:
            print(f"    fix: {verdict.fix}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
