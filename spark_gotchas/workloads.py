"""What a command line is: a known GPU server or trainer, and the memory cap it runs with.

Pure functions of ``argv`` (and the process name, which servers overwrite with a title such
as ``VLLM::EngineCore``), so a replayed snapshot classifies exactly as the live run did.

Caps and their documented defaults:
- vLLM ``--gpu-memory-utilization`` (fraction of the GPU's total memory), default 0.9; also
  ``trl vllm-serve --gpu_memory_utilization``.
- SGLang ``--mem-fraction-static`` (fraction of total); unset, SGLang sizes it from the GPU's
  memory (well above 0.5 on large GPUs; 0.85 is assumed here).
- TensorRT-LLM ``trtllm-serve --kv_cache_free_gpu_memory_fraction`` (fraction of the memory
  still free after the weights), default 0.9.
- TGI ``text-generation-launcher --cuda-memory-fraction``, default 1.0.
- Ollama and llama.cpp have no fraction cap: they take what their models need, and Ollama
  (and llama-swap) load models on request.
- Trainer launchers (torchrun, accelerate, deepspeed, …) have no cap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Sequence

# The caps a server takes when its flag is not given (documented defaults; SGLang's is sized from
# the GPU's memory, so a figure is assumed).
VLLM_DEFAULT_FRACTION = 0.9
TRTLLM_DEFAULT_FRACTION = 0.9  # of the memory still free after the weights
TGI_DEFAULT_FRACTION = 1.0
SGLANG_ASSUMED_FRACTION = 0.85


@dataclass(frozen=True)
class Workload:
    """A recognised program. ``cap_fraction`` None means it has no memory cap at all."""

    kind: str  # vllm, sglang, trtllm, tgi, ollama, llama.cpp, trainer
    program: str  # for people: "vLLM", "torchrun", ...
    role: str  # "server" or "trainer"
    cap_fraction: Optional[float] = None
    cap_flag: str = ""
    cap_source: str = "none"  # flag | default | auto | child | invalid | none
    cap_of: str = "total"  # "total" GPU memory, or "free" memory after the weights (TensorRT-LLM)
    loads_on_demand: bool = False  # may grow later without a restart (Ollama, llama-swap)

    @property
    def capped(self) -> bool:
        return self.cap_fraction is not None

    @property
    def cap_text(self) -> str:
        if self.cap_source == "flag":
            return f"{self.cap_flag} {self.cap_fraction:g}"
        if self.cap_source == "default":
            return f"default {self.cap_flag} {self.cap_fraction:g}"
        if self.cap_source == "auto":
            return f"{self.cap_flag} unset (auto-sized, ~{self.cap_fraction:g} assumed)"
        if self.cap_source == "child":
            return f"engine process; cap set on its parent ({self.cap_flag})"
        if self.cap_source == "invalid":
            return f"{self.cap_flag} unreadable (default {self.cap_fraction:g} assumed)"
        return "no memory cap"


def _base(token: str) -> str:
    return os.path.basename(token.strip())


def _follows(argv: Sequence[str], first: set[str], second: set[str]) -> bool:
    """True when a token whose basename is in ``first`` is followed by one in ``second``."""
    return any(_base(a) in first and b in second for a, b in zip(argv, argv[1:], strict=False))


def _module(argv: Sequence[str], prefixes: tuple[str, ...]) -> bool:
    """``python -m <module>`` (or the module path given as a token) starting with a prefix."""
    return any(tok.startswith(prefixes) for tok in argv)


def flag_value(argv: Sequence[str], names: Sequence[str]) -> tuple[bool, Optional[str]]:
    """(present, value) for ``--flag value`` or ``--flag=value``; the last occurrence wins."""
    found, value = False, None
    for i, tok in enumerate(argv):
        for name in names:
            if tok == name:
                found, value = True, argv[i + 1] if i + 1 < len(argv) else None
            elif tok.startswith(name + "="):
                found, value = True, tok.split("=", 1)[1]
    return found, value


def _fraction(argv: Sequence[str], names: Sequence[str], default: Optional[float],
              missing_source: str = "default") -> tuple[Optional[float], str]:
    found, text = flag_value(argv, names)
    if not found:
        return default, missing_source
    try:
        value = float(text or "")
    except ValueError:
        return default, "invalid"
    if not 0.0 < value <= 1.0:
        return default, "invalid"
    return value, "flag"


def _capped(kind, program, argv, names, default, missing_source="default", cap_of="total") -> Workload:
    fraction, source = _fraction(argv, names, default, missing_source)
    return Workload(kind, program, "server", fraction, names[0], source, cap_of)


VLLM_FLAGS = ("--gpu-memory-utilization", "--gpu_memory_utilization")
SGLANG_FLAGS = ("--mem-fraction-static", "--mem_fraction_static")
TRTLLM_FLAGS = ("--kv_cache_free_gpu_memory_fraction", "--kv-cache-free-gpu-memory-fraction")
TGI_FLAGS = ("--cuda-memory-fraction", "--cuda_memory_fraction")


def classify(argv: Sequence[str] | None, name: str = "") -> Optional[Workload]:
    """The workload a process is, from its command line and name; None when not recognised."""
    argv = [str(a) for a in (argv or [])]
    title = name or (argv[0] if argv else "")
    if not argv and not title:
        return None
    # Engine children retitle themselves and keep no flags: their cap is their parent's.
    if title.startswith("VLLM::") or (argv and argv[0].startswith("VLLM::")):
        return Workload("vllm", "vLLM", "server", VLLM_DEFAULT_FRACTION, VLLM_FLAGS[0], "child")
    if title.startswith("sglang::") or (argv and argv[0].startswith("sglang::")):
        return Workload("sglang", "SGLang", "server", SGLANG_ASSUMED_FRACTION, SGLANG_FLAGS[0], "child")
    if _follows(argv, {"vllm"}, {"serve"}) or _module(argv, ("vllm.entrypoints",)):
        return _capped("vllm", "vLLM", argv, VLLM_FLAGS, VLLM_DEFAULT_FRACTION)
    if _follows(argv, {"trl"}, {"vllm-serve"}):
        return _capped("vllm", "vLLM (trl vllm-serve)", argv, VLLM_FLAGS, VLLM_DEFAULT_FRACTION)
    if _module(argv, ("sglang.launch_server",)):
        return _capped("sglang", "SGLang", argv, SGLANG_FLAGS, SGLANG_ASSUMED_FRACTION, "auto")
    if any(_base(t) == "trtllm-serve" for t in argv):
        return _capped("trtllm", "TensorRT-LLM", argv, TRTLLM_FLAGS, TRTLLM_DEFAULT_FRACTION, cap_of="free")
    if any(_base(t) == "text-generation-launcher" for t in argv):
        return _capped("tgi", "TGI", argv, TGI_FLAGS, TGI_DEFAULT_FRACTION)
    if _follows(argv, {"text-generation-server"}, {"serve"}):
        return Workload("tgi", "TGI", "server", TGI_DEFAULT_FRACTION, TGI_FLAGS[0], "child")
    if _follows(argv, {"ollama"}, {"serve", "runner"}) or any(_base(t) == "ollama_llama_server" for t in argv):
        return Workload("ollama", "Ollama", "server", loads_on_demand=True)
    if any(_base(t) == "llama-swap" for t in argv):
        return Workload("llama.cpp", "llama-swap", "server", loads_on_demand=True)
    if any(_base(t) == "llama-server" for t in argv) or _module(argv, ("llama_cpp.server",)):
        return Workload("llama.cpp", "llama.cpp server", "server")
    trainer = _trainer(argv)
    if trainer:
        return Workload("trainer", trainer, "trainer")
    return None


def _trainer(argv: Sequence[str]) -> str:
    if any(_base(t) == "torchrun" for t in argv) or _module(argv, ("torch.distributed.run", "torch.distributed.launch")):
        return "torchrun"
    if _follows(argv, {"accelerate"}, {"launch"}) or _module(argv, ("accelerate.commands.launch",)):
        return "accelerate launch"
    if any(_base(t) == "deepspeed" for t in argv[:3]) or _module(argv, ("deepspeed.launcher",)):
        return "deepspeed"
    if _follows(argv, {"llamafactory-cli"}, {"train"}):
        return "llamafactory-cli train"
    if _follows(argv, {"tune"}, {"run"}):
        return "torchtune"
    if _follows(argv, {"axolotl"}, {"train"}) or _module(argv, ("axolotl.cli.train",)):
        return "axolotl train"
    return ""
