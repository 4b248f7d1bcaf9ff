"""The run the user plans, as the judges read it: weights, load factor, precision.

Built from ``--spark-model-gb``, ``--spark-load-factor`` and ``--spark-precision`` (the options
are recorded in a snapshot, so a replay judges the same plan). Every judge that weighs the plan
takes a :class:`Plan`, never the run's options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..base.units import GB

DEFAULT_LOAD_FACTOR = 2.0  # a safetensors load peaks at about twice the weights (page cache + CUDA copy)


@dataclass(frozen=True)
class Plan:
    model_gb: Optional[float] = None  # planned weights, GB (10^9 bytes); None: no plan
    load_factor: float = DEFAULT_LOAD_FACTOR  # peak memory while loading, as a multiple of the weights
    precision: Optional[str] = None  # bf16, fp8 or nvfp4 (G7)

    @property
    def factor(self) -> float:
        """The load factor, never below 1 (a load holds the weights at least once)."""
        return max(float(self.load_factor or DEFAULT_LOAD_FACTOR), 1.0)

    def peak_bytes(self, unified: bool) -> Optional[float]:
        """The planned load's peak in the memory a GPU process draws from (None without a plan).

        Unified: the whole peak (N x F) lands in the one pool. Discrete: the device holds the
        weights once (N); the rest of the peak is host memory.
        """
        if self.model_gb is None:
            return None
        weights = float(self.model_gb) * GB
        return weights * self.factor if unified else weights
