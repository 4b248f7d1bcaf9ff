"""docs/report.md documents every field a real report of this machine carries."""

from __future__ import annotations

import json

from ci_preflight import ROOT, preflight

DOC = (ROOT / "docs" / "report.md").read_text(encoding="utf-8")


def test_every_field_of_the_report_is_documented():
    report = json.loads(preflight().report.read_text())
    section = report["spark_gotchas"]
    gotcha = next(iter(section["gotchas"].values()))
    verdict = next(t["metadata"]["gotcha"] for t in report["tests"] if "gotcha" in t.get("metadata", {}))
    fields = {
        "top level": set(report),
        "spark_gotchas": set(section),
        "gotchas.G<n>": {f"gotchas.G<n>.{k}" for k in gotcha},
        "platform": set(section["platform"]),
        "options": set(section["options"]),
        "versions": set(section["versions"]),
        "metadata.gotcha": {f"metadata.gotcha.{k}" for k in verdict},
        "timing": set(section["timing"]),
        "timing.worker": {f"worker.{k}" for k in section["timing"]["worker"] or {}},
        "timing.load_worker": {"load_worker"} if "load_worker" in section["timing"] else set(),
    }
    missing = {where: sorted(k for k in keys if f"`{k}`" not in DOC) for where, keys in fields.items()}
    assert not any(missing.values()), f"undocumented fields: {missing}"
