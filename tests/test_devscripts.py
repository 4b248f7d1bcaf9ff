"""devscripts/README.md names every script in devscripts/, and no script that is gone."""

import re
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "devscripts"


def test_every_script_is_named_once_and_none_that_is_gone():
    named = re.findall(r"^\| `([^`]+)` \|", (FOLDER / "README.md").read_text(), flags=re.M)
    present = sorted(p.name for p in FOLDER.iterdir() if p.suffix in (".sh", ".py"))
    assert sorted(named) == present
    assert len(named) == len(set(named))
