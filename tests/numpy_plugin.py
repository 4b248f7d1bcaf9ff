"""Test-only pytest plugin: imports numpy, as some installed plugins do (jaxtyping, say)."""

import numpy  # noqa: F401
