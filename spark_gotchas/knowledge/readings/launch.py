"""Reading types of the ``launch.*`` keys (G10): the parallelism settings of each launch config, the
limits within which a config is read, and how a written value becomes a number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

# What one review reads at most: a launch config is a few KiB; anything past these is not one, or
# is built to explode (YAML aliases that expand exponentially, JSON nested 100 000 levels deep,
# shell variables that double at every line). Past a limit the file is a finding, never a hang.
MAX_FILE_BYTES = 1 << 20  # 1 MiB read at most
MAX_DEPTH = 100  # levels of nesting in a YAML/JSON document
MAX_NODES = 100_000  # values in a YAML/JSON document, YAML aliases expanded
MAX_EXPANDED_CHARS = 4 << 20  # characters that $VARIABLE expansion may produce in one script


@dataclass
class Setting:
    """One parallelism setting as written: ``role`` is tp, pp, nodes, procs_per_node, processes or strategy."""

    role: str
    key: str  # "--tensor-parallel-size", "megatron_lm_config.megatron_lm_tp_degree", "trainer.num_nodes"
    raw: str  # the value as written
    value: Optional[int] = None  # None: not a number here (e.g. "$TP" left unresolved)
    line: Optional[int] = None

    @property
    def where(self) -> str:
        return f"{self.key}" + (f", line {self.line}" if self.line else "")


@dataclass
class LaunchFile:
    path: str
    format: str = "unknown"  # accelerate | deepspeed | megatron | vllm | yaml | json | script | arguments | text
    error: Optional[str] = None  # unreadable or malformed: the parse error
    over_limit: bool = False  # the error is a limit: too large, too deeply nested, not a regular file
    unsupported: Optional[str] = None  # this environment cannot parse the format (no PyYAML)
    settings: list[Setting] = field(default_factory=list)
    launchers: list[str] = field(default_factory=list)  # "torchrun", "vllm serve" … found in a script
    referenced_by: Optional[str] = None  # the script whose command named this config

    def _all(self, role: str) -> list[Setting]:
        return [s for s in self.settings if s.role == role]

    def largest(self, role: str) -> Optional[Setting]:
        """The setting of a role with the largest known value (the first one when none is known)."""
        found = self._all(role)
        known = [s for s in found if s.value is not None]
        return max(known, key=lambda s: s.value) if known else (found[0] if found else None)

    @property
    def tp(self) -> Optional[Setting]:
        return self.largest("tp")

    @property
    def nodes(self) -> Optional[int]:
        s = self.largest("nodes")
        return s.value if s is not None else None

    @property
    def procs_per_node(self) -> Optional[int]:
        s = self.largest("procs_per_node")
        if s is not None and s.value:
            return s.value
        total = self.largest("processes")
        if total is not None and total.value and self.nodes:
            return max(1, total.value // self.nodes)
        return None

    @property
    def strategy(self) -> Optional[str]:
        found = self._all("strategy")
        return found[0].raw if found else None


@dataclass
class LaunchReview:
    """``cat`` each ``--spark-launch-config`` file; ``env | grep -E 'WORLD_SIZE|NNODES|MASTER_ADDR|…'``"""

    files: list[LaunchFile] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)


def to_int(raw: Any) -> Optional[int]:
    """``2`` -> 2, ``"2"`` -> 2, torchrun's elastic ``"1:2"`` -> 2; anything else -> None, a
    number of more than 18 digits too (no count of GPUs or nodes has one; ``int()`` of 10,000
    digits is a ValueError, and a reading holds 64-bit integers only)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if abs(raw) < 10 ** 18 else None
    text = str(raw).strip()
    if re.fullmatch(r"\d{1,18}", text):
        return int(text)
    if re.fullmatch(r"\d{1,18}:\d{1,18}", text):
        return max(int(x) for x in text.split(":"))
    return None
