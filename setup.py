"""Which packages the distribution holds; everything else about it is in pyproject.toml.

The checks (``tests_gotchas/``) and the GPU measurements (``microbench/``) live at the top of a
checkout, where ``pytest -m fast`` finds them, and ship inside the suite's own namespace as
``spark_gotchas.checks`` and ``spark_gotchas.microbench``: one copy of each, and an installed suite
takes no top-level name that is not its own (PyPI's ``microbench`` is another project).
"""

from setuptools import find_packages, setup

SHIPPED_FROM_THE_TOP = {"spark_gotchas.checks": "tests_gotchas", "spark_gotchas.microbench": "microbench"}

setup(
    packages=[*find_packages(include=["spark_gotchas", "spark_gotchas.*"]), *SHIPPED_FROM_THE_TOP],
    package_dir=SHIPPED_FROM_THE_TOP,
)
