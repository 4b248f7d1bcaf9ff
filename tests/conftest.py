"""The suite's own tests: judges on recorded readings, readers on fixture files, the plugin via pytester."""

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

RESEARCH = Path(__file__).resolve().parents[2] / "shared" / "research"
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
