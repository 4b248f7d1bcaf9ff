"""What a process is: a known GPU server or trainer, and every bound it was started with.

Pure functions of how the process was started: its command line, its process name (servers
retitle their engines, ``VLLM::EngineCore``) and, where the reader could record them, the
variables of its environment that bound a server, the text of the config files its command line
names and its server's installed version (:class:`spark_gotchas.knowledge.readings.gpu.ServerStart`). A
replayed snapshot classifies exactly as the live run did.

Each server is read as its own parser reads it (docs/checks/g06.md cites each project's source):

- vLLM (``vllm serve``, ``python -m vllm.entrypoints…``): argparse with abbreviations (its parser never
  turns them off), ``_`` in an option's name read as ``-``, ``--opt=v``; ``--config x.yaml`` (that exact
  token) inserted before the command line, which wins. ``--kv-cache-memory-bytes`` (0.10.2 on, ``30G``
  and ``30g`` sizes) sizes the KV cache and leaves ``--gpu-memory-utilization`` out of it; unset, the
  fraction is the release's default: 0.9 to 0.19, 0.92 from 0.20, all of the GPU from 0.34 (its
  extensible KV cache, on by default on CUDA).
- ``trl vllm-serve``: HfArgumentParser (``--gpu_memory_utilization`` or ``--gpu-memory-utilization``,
  abbreviations, ``--config`` YAML under the command line), default 0.9 in every release.
- SGLang: argparse with abbreviations, ``--config`` YAML; ``--mem-fraction-static`` unset is sized from
  the GPU's memory: the memory less what it leaves for activations and CUDA graphs (about 13 GiB on a
  GPU of 90 to 160 GiB, 0.4.6 to 0.5.10).
- TensorRT-LLM ``trtllm-serve``: click (exact names, ``=v``): ``--kv_cache_free_gpu_memory_fraction`` or
  ``--free_gpu_memory_fraction`` (of the memory free after the weights, default 0.9); a YAML given with
  ``--config`` / ``--extra_llm_api_options`` whose ``kv_cache_config`` replaces the command line's.
- TGI ``text-generation-launcher``: clap (exact names) ``--cuda-memory-fraction`` or its variable
  ``CUDA_MEMORY_FRACTION`` (default 1.0); the launcher hands its shards the variable.
- llama.cpp ``llama-server``, ``python -m llama_cpp.server``: no fraction; what the model and context
  need is taken when it loads (``-ngl``, ``-c``, ``--fit`` and their ``LLAMA_ARG_*`` variables).
- Ollama, llama-swap, llama-server in router mode: no fraction; models load on request (Ollama:
  ``OLLAMA_MAX_LOADED_MODELS``, ``OLLAMA_KEEP_ALIVE`` …).
- Trainer launchers (torchrun, accelerate, deepspeed, …): no bound.

A bound the recorded facts cannot settle (a config file not read, an engine whose launcher is not
visible, a value the server would not have started with) is :data:`UNKNOWN` with the reason; no
default is assumed in its place.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ..base import scrub
from .readings.gpu import ServerConfig, ServerStart

GIB = 1 << 30

# What bounds a workload (Bound.kind).
FRACTION = "fraction"  # a share of the GPU's total memory
FREE_FRACTION = "free fraction"  # a share of the memory still free after its weights (TensorRT-LLM)
KV_BYTES = "kv bytes"  # a KV cache of a fixed size, beside its weights (vLLM --kv-cache-memory-bytes)
AT_LOAD = "at load"  # takes what its model and context need when it loads them, and keeps it (llama.cpp)
ON_REQUEST = "on request"  # loads models on request, as many as its settings allow (Ollama, llama-swap)
NONE = "none"  # no bound at all (a trainer, an unknown program)
UNKNOWN = "unknown"  # bounded, but by a setting the recorded facts cannot tell

VLLM_NEWEST_CHECKED = "0.34.0"
MIB = 1 << 20
# The memory SGLang 0.5.x leaves for activations and CUDA graphs with its defaults (TP 1): 512 MiB + 1.5 x its
# chunked prefill + 2 x its CUDA-graph batch + TP x PP / 8 GiB, at least 10 GiB on a GPU over 60 GiB; by GPU size
# (below 20, 35, 60, 160 GiB, then above). SGLang 0.4.6 left 13 GiB on a GPU over 80 GiB, within 1 %.
SGLANG_RESERVES = ((20 * GIB, 3728 * MIB), (35 * GIB, 3760 * MIB), (60 * GIB, 6848 * MIB), (160 * GIB, 13440 * MIB),
                   (None, 26240 * MIB))


def sglang_fraction(pool: float) -> float:
    """--mem-fraction-static as SGLang sizes it unset, for a GPU of ``pool`` bytes."""
    reserve = next(r for limit, r in SGLANG_RESERVES if limit is None or pool < limit)
    return round(max(pool - reserve, 0.0) / pool, 3)


@dataclass(frozen=True)
class Bound:
    """How far a workload may grow, where that came from, and the setting that bounds it."""

    kind: str = NONE
    value: Optional[float] = None  # the fraction (FRACTION, FREE_FRACTION) or the bytes (KV_BYTES)
    setting: str = ""  # how it was set, for people: "--gpu-memory-utilization 0.5", "default of vLLM 0.20.0"
    source: str = "none"  # flag | config | env | default | child | none | unknown
    why: str = ""  # UNKNOWN (or a range of releases): why it cannot be told exactly
    knob: str = ""  # the setting to turn, as the server was started: "--kv-cache-memory-bytes"
    where: str = ""  # where that setting lives: "" (the command line), a config file's path, "environment"
    auto: bool = False  # a FRACTION the server sizes from the GPU's memory (SGLang): (memory - reserve) / memory
    notes: tuple[str, ...] = ()  # other settings read that bound it in part (max_tokens, OLLAMA_MAX_LOADED_MODELS)

    def fraction_for(self, pool: Optional[float]) -> Optional[float]:
        """The fraction of ``pool`` it may take (FRACTION, FREE_FRACTION); None when not a fraction."""
        if self.kind not in (FRACTION, FREE_FRACTION):
            return None
        if self.auto:
            return sglang_fraction(pool) if pool else None
        return self.value


NO_BOUND = Bound()


@dataclass(frozen=True)
class Workload:
    """A recognised program and what bounds it."""

    kind: str  # vllm, sglang, trtllm, tgi, ollama, llama.cpp, trainer
    program: str  # for people: "vLLM", "torchrun", ...
    role: str  # "server" or "trainer"
    bound: Bound = NO_BOUND
    loads_on_demand: bool = False  # may grow later without a restart (Ollama, llama-swap, router mode)
    engine: bool = False  # an engine process: its launcher's command line holds its flags
    version: Optional[str] = None  # the server's installed version, where it was read

    @property
    def cap_fraction(self) -> Optional[float]:
        """The fraction it was started with, where that is one figure (not one sized from the GPU)."""
        b = self.bound
        return b.value if b.kind in (FRACTION, FREE_FRACTION) and not b.auto else None

    @property
    def capped(self) -> bool:
        return self.bound.kind in (FRACTION, FREE_FRACTION, KV_BYTES)

    @property
    def cap_source(self) -> str:
        return self.bound.source

    @property
    def cap_text(self) -> str:
        """``--gpu-memory-utilization 0.5``, ``default --gpu-memory-utilization 0.92 (vLLM 0.20.0)``,
        ``no memory cap``, ``bound unknown: …``."""
        b = self.bound
        if b.kind == UNKNOWN:
            return f"bound unknown: {b.why}"
        if b.kind in (NONE, AT_LOAD, ON_REQUEST) or not b.setting:
            return "no memory cap"
        return b.setting


def _base(token: str) -> str:
    return os.path.basename(token.strip())


def _follows(argv: Sequence[str], first: set[str], second: set[str]) -> int:
    """The index after a token whose basename is in ``first`` followed by one in ``second``; 0 when none."""
    for i, (a, b) in enumerate(zip(argv, argv[1:], strict=False)):
        if _base(a) in first and b in second:
            return i + 2
    return 0


def _module(argv: Sequence[str], prefixes: tuple[str, ...]) -> int:
    """The index after ``python -m <module>`` (or the module path given as a token) starting with a prefix; 0 when none."""
    for i, tok in enumerate(argv):
        if tok.startswith(prefixes):
            return i + 1
    return 0


def _named(argv: Sequence[str], names: set[str]) -> int:
    """The index after a token whose basename is one of ``names``; 0 when none."""
    for i, tok in enumerate(argv):
        if _base(tok) in names:
            return i + 1
    return 0


# -- reading a command line as a server's own parser does ---------------------------------------------
@dataclass(frozen=True)
class Spelling:
    """How a server's parser reads its options."""

    abbreviations: bool = False  # argparse: an unambiguous prefix of a long option is that option
    underscores: bool = False  # vLLM, llama.cpp: "_" in a --option's name is read as "-"
    equals: bool = True  # --opt=value


ARGPARSE = Spelling(abbreviations=True)
VLLM_SPELLING = Spelling(abbreviations=True, underscores=True)
EXACT = Spelling()  # click, clap
LLAMA_CPP = Spelling(underscores=True, equals=False)


@dataclass(frozen=True)
class Option:
    dest: str
    names: tuple[str, ...]  # every spelling the parser declares
    shortest: int = 0  # the shortest abbreviation that is this option alone in every release checked (argparse)
    takes_value: bool = True


@dataclass
class Found:
    """What a command line sets: dest -> (value, as spelled); the last occurrence wins, as in every parser here."""

    values: dict[str, tuple[Optional[str], str]] = field(default_factory=dict)
    doubtful: list[str] = field(default_factory=list)  # abbreviations this suite cannot map to one option

    def get(self, dest: str) -> Optional[tuple[Optional[str], str]]:
        return self.values.get(dest)


def read_options(tokens: Sequence[str], options: Sequence[Option], spelling: Spelling) -> Found:
    """The options of ``options`` that ``tokens`` set, read the way ``spelling`` says."""
    names = {name: opt for opt in options for name in opt.names}
    found = Found()
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("-") or tok in ("-", "--"):
            continue
        key, eq, inline = tok.partition("=") if spelling.equals and tok.startswith("--") else (tok, "", "")
        if spelling.underscores and key.startswith("--"):
            head, dot, tail = key.partition(".")
            key = head.replace("_", "-") + dot + tail
        opt = names.get(key)
        if opt is None and spelling.abbreviations and key.startswith("--") and len(key) > 3:
            matches = {o.dest: o for name, o in names.items() if name.startswith(key)}
            if len(matches) == 1:
                candidate = next(iter(matches.values()))
                if len(key) >= candidate.shortest:
                    opt = candidate
                else:
                    found.doubtful.append(key)
        if opt is None:
            continue
        if not opt.takes_value:
            found.values[opt.dest] = (None, tok)
            continue
        if eq:
            found.values[opt.dest] = (inline, tok)
        elif i < len(tokens):
            found.values[opt.dest] = (tokens[i], f"{tok} {tokens[i]}")
            i += 1
        else:
            found.values[opt.dest] = (None, tok)
    return found


def config_tokens(data: Mapping[str, Any], bool_flags: Mapping[str, str] = {}) -> list[str]:  # noqa: B006
    """A YAML mapping as the ``--key value`` tokens vLLM and SGLang insert before the command line
    (a true boolean as ``--key``, a list as ``--key a b``, anything else as ``str(value)``)."""
    out: list[str] = []
    for key, value in list(data.items())[:4096]:
        key = str(key)
        if isinstance(value, bool):
            if value:
                out.append(f"--{key}")
            elif key in bool_flags:
                out.append(bool_flags[key])
        elif isinstance(value, list):
            if value:
                out += [f"--{key}", *(_scalar(v) for v in value[:64])]
        else:
            out += [f"--{key}", _scalar(value)]
    return out


def _scalar(value: Any) -> str:
    """A YAML value as a server's ``str(value)`` gives it, for a scalar; a container stays unwritten (a
    document of aliases would expand exponentially in writing)."""
    return "[...]" if isinstance(value, (list, dict, set, tuple)) else scrub.clip(str(value), 4096, mark="")


MAX_YAML_NODES = 20_000  # a server's config holds tens of keys; a document of more is not judged


@functools.lru_cache(maxsize=64)
def parse_yaml(text: str) -> tuple[Optional[dict], str]:
    """(the mapping, '') or (None, why): PyYAML's safe loader, as the servers themselves use it. An
    alias is one shared object (no copy), so a document of aliases that expand exponentially stays
    small; only named keys are looked up, never the whole walked."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML is a dependency
        return None, "PyYAML is not installed"

    class Counting(yaml.SafeLoader):
        composed = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.composed += 1
            if self.composed > MAX_YAML_NODES:
                raise yaml.YAMLError(f"more than {MAX_YAML_NODES} values")
            return super().compose_node(parent, index)

    try:
        data = yaml.load(text, Loader=Counting)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        return None, f"not YAML it can read: {str(exc).splitlines()[0][:120]}"
    except RecursionError:
        return None, "nested too deeply to read"
    except (ValueError, TypeError, OverflowError) as exc:
        return None, scrub.clip(f"not YAML it can read: {exc}", 160, mark="")
    if data is None:
        return {}, ""
    if not isinstance(data, dict):
        return None, "not a mapping of settings"
    return data, ""


@dataclass(frozen=True)
class ConfigRead:
    """One config file named on a command line, as read for judging."""

    path: str
    data: Optional[dict] = None
    problem: str = ""  # why it could not be read or parsed ('' when data holds it)


def config_named(start: Optional[ServerStart], path: str) -> ConfigRead:
    """The recorded config file ``path``: its mapping, or why there is none."""
    configs: list[ServerConfig] = start.configs if start is not None else []
    rec = next((c for c in configs if c.path == path), None)
    if rec is None:
        why = "was not recorded (an older snapshot)" if start is None else "was not read"
        return ConfigRead(path, problem=why)
    if rec.text is None:
        return ConfigRead(path, problem=f"could not be read: {rec.error or 'not read'}")
    data, why = parse_yaml(rec.text)
    return ConfigRead(path, data, f"is {why}" if why else "")


def pull_config(tokens: Sequence[str], start: Optional[ServerStart], yaml_only: bool = True
                ) -> tuple[list[str], Optional[ConfigRead]]:
    """(the other tokens, the config) of ``--config PATH``, as vLLM, SGLang and trl take it out of a command
    line before parsing the rest (only that exact token); vLLM and SGLang refuse a file not named .yaml/.yml."""
    tokens = list(tokens)
    if "--config" not in tokens:
        return tokens, None
    at = tokens.index("--config")
    path = tokens[at + 1] if at + 1 < len(tokens) else ""
    rest = tokens[:at] + tokens[at + 2:]
    if yaml_only and not path.endswith((".yaml", ".yml")):
        return rest, ConfigRead(path, problem="is no .yaml or .yml file, which the server refuses (it would not have "
                                              "started with it)")
    return rest, config_named(start, path)


def _env(start: Optional[ServerStart], name: str) -> Optional[str]:
    env = start.environ if start is not None else None
    return None if env is None else env.get(name)


def _env_unread(start: Optional[ServerStart]) -> str:
    """Why the environment was not read ('' when it was)."""
    if start is None:
        return "its environment was not recorded"
    if start.environ is None:
        return f"its environment could not be read ({start.environ_error or 'not read'})"
    return ""


# -- sizes and fractions as each server parses them -----------------------------------------------------
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def vllm_bytes(text: Optional[str]) -> Optional[int]:
    """vLLM's human_readable_int: ``30g`` = 30 x 10^9, ``30G`` = 30 x 2^30 (no decimals with a binary
    suffix), or a plain integer; None where vLLM refuses the value."""
    if text is None:
        return None
    value = text.strip()
    m = _HUMAN.fullmatch(value)
    if m:
        number, suffix = m.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            return None
        return int(number) * _BINARY[suffix]
    try:
        return int(value)
    except ValueError:
        return None


def _fraction(text: Optional[str], low_open: bool = True) -> Optional[float]:
    """A fraction in (0, 1] (in [0, 1] where ``low_open`` is False); None where the server refuses it."""
    try:
        value = float(text or "")
    except ValueError:
        return None
    if value != value or value > 1.0 or value < 0.0 or (low_open and value == 0.0):
        return None
    return value


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def _version_key(version: Optional[str]):
    """``packaging`` Version of a recorded version; None when it is missing or does not parse."""
    if not version:
        return None
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging is a dependency
        return None
    try:
        return Version(version)
    except InvalidVersion:
        return None


# -- vLLM ----------------------------------------------------------------------------------------------
VLLM_OPTIONS = (
    Option("gmu", ("--gpu-memory-utilization", "--device-memory-utilization"), shortest=len("--gpu-m")),
    Option("kv", ("--kv-cache-memory-bytes",), shortest=len("--kv-cache-mem")),
    Option("seqs", ("--max-num-seqs",), shortest=len("--max-num-se")),
    Option("blocks", ("--num-gpu-blocks-override",), shortest=len("--num-g")),
    Option("ext_on", ("--enable-extensible-kv-cache",), shortest=len("--enable-ext"), takes_value=False),
    Option("ext_off", ("--no-enable-extensible-kv-cache",), shortest=len("--no-enable-e"), takes_value=False),
)
VLLM_BOOL_FLAGS = {"enable-extensible-kv-cache": "--no-enable-extensible-kv-cache",
                   "enable_extensible_kv_cache": "--no-enable-extensible-kv-cache"}
VLLM_GMU_FIX = "--gpu-memory-utilization 0.5 or lower"


def _version_unread(start: Optional[ServerStart]) -> str:
    """Why a server's version is not known, in a few words."""
    if start is None:
        return "its version was not recorded"
    return f"its version was not read ({start.version_error})" if start.version_error else "its version was not read"


def _vllm_default(version: Optional[str], found: Found, unread: str = "its version was not recorded") -> Bound:
    """The fraction vLLM takes without --gpu-memory-utilization, for its recorded release."""
    extensible_off = "ext_off" in found.values or "blocks" in found.values
    v = _version_key(version)
    untagged = v is not None and v.is_devrelease and v.release[:2] == (0, 1)  # a source build without tags
    if v is None or untagged or v > _version_key(VLLM_NEWEST_CHECKED + ".post99"):
        why = (unread if not version else
               f"vLLM {version} is {'an untagged source build' if untagged else 'newer than the releases checked'}")
        return Bound(FRACTION, 0.9, f"no --gpu-memory-utilization: vLLM takes 0.9 to all of the GPU by release "
                                    f"(0.9 to 0.19, 0.92 from 0.20, all from 0.34); {why}",
                     "default", why=why, knob="--gpu-memory-utilization")
    base = v.base_version
    if _version_key(base) >= _version_key("0.34.0") and not extensible_off:
        return Bound(FRACTION, 1.0, f"default --gpu-memory-utilization of vLLM {version}: all of the GPU (its "
                                    "extensible KV cache is sized from the memory free after warmup)",
                     "default", knob="--gpu-memory-utilization")
    value = 0.92 if _version_key(base) >= _version_key("0.20.0") else 0.9
    return Bound(FRACTION, value, f"default --gpu-memory-utilization {value:g} (vLLM {version})", "default",
                 knob="--gpu-memory-utilization")


def vllm_bound(tokens: Sequence[str], start: Optional[ServerStart], version: Optional[str]) -> Bound:
    """vLLM as its FlexibleArgumentParser reads ``tokens`` (after ``serve`` or the module)."""
    tokens, config = pull_config(tokens, start)  # only the exact token: --config=x.yaml is parsed and ignored
    cli = read_options(tokens, VLLM_OPTIONS, VLLM_SPELLING)
    from_config = read_options(config_tokens(config.data, VLLM_BOOL_FLAGS), VLLM_OPTIONS, VLLM_SPELLING) \
        if config is not None and config.data is not None else Found()
    doubtful = cli.doubtful + from_config.doubtful
    if doubtful:
        return Bound(UNKNOWN, source="unknown", why=f"{doubtful[0]} abbreviates one of several vLLM options "
                                                     "across releases", knob="--gpu-memory-utilization")
    seqs, seqs_where = (cli.get("seqs"), "") if cli.get("seqs") else (from_config.get("seqs"), config.path if config
                                                                       else "")
    notes = (_as_set(seqs[1], seqs_where, f"--max-num-seqs {seqs[0]}"),) if seqs else ()

    def pick(dest: str) -> tuple[Optional[tuple[Optional[str], str]], str]:
        if dest in cli.values:
            return cli.values[dest], ""
        if dest in from_config.values:
            return from_config.values[dest], config.path if config else ""
        return None, ""

    kv, kv_where = pick("kv")
    gmu, gmu_where = pick("gmu")
    config_unread = config is not None and config.data is None
    if kv is not None:
        size = vllm_bytes(kv[0])
        if size is None or size <= 0:
            return Bound(UNKNOWN, source="unknown", knob="--kv-cache-memory-bytes", where=kv_where,
                         why=f"{kv[1]!r} is no size vLLM accepts (it would not have started with it)")
        return Bound(KV_BYTES, size, f"{_as_set(kv[1], kv_where, kv[1])}: a {_gb(size)} KV cache beside its weights",
                     "config" if kv_where else "flag", knob="--kv-cache-memory-bytes", where=kv_where, notes=notes)
    if config_unread:  # the config may set either; the command line set neither
        return Bound(UNKNOWN, source="unknown", knob="--gpu-memory-utilization", where=config.path,
                     why=f"its config {config.path} {config.problem}")
    if gmu is not None:
        value = _fraction(gmu[0])
        if value is None:
            return Bound(UNKNOWN, source="unknown", knob="--gpu-memory-utilization", where=gmu_where,
                         why=f"{gmu[1]!r} is no fraction vLLM accepts (it would not have started with it)")
        return Bound(FRACTION, value, _as_set(gmu[1], gmu_where, f"--gpu-memory-utilization {value:g}"),
                     "config" if gmu_where else "flag", knob="--gpu-memory-utilization", where=gmu_where,
                     notes=notes)
    default = _vllm_default(version, Found({**from_config.values, **cli.values}), _version_unread(start))
    return Bound(default.kind, default.value, default.setting, default.source, default.why, default.knob,
                 config.path if config else "", notes=notes)


def _in(where: str) -> str:
    return f" in {where}" if where else ""


def _as_set(spelled: str, where: str, canonical: str) -> str:
    """How a setting was written: ``--gpu-memory-utilization 0.5`` on the command line, ``kv_cache_memory_bytes:
    20G in serve.yaml`` (as its key is spelled there) in a config."""
    if not where:
        return canonical
    key, _, value = spelled.removeprefix("--").partition(" ")
    return f"{key}: {value} in {where}"


# -- trl vllm-serve (its own parser, before it became a vLLM process) -----------------------------------
TRL_OPTIONS = (Option("gmu", ("--gpu_memory_utilization", "--gpu-memory-utilization"), shortest=len("--gpu")),)


def trl_bound(tokens: Sequence[str], start: Optional[ServerStart]) -> Bound:
    tokens, config = pull_config(tokens, start, yaml_only=False)
    cli = read_options(tokens, TRL_OPTIONS, ARGPARSE)
    where = ""
    gmu = cli.get("gmu")
    if gmu is None and config is not None:
        if config.data is None:
            return Bound(UNKNOWN, source="unknown", knob="--gpu_memory_utilization", where=config.path,
                         why=f"its config {config.path} {config.problem}")
        if "gpu_memory_utilization" in config.data:
            gmu, where = (_scalar(config.data["gpu_memory_utilization"]), "gpu_memory_utilization"), config.path
    if gmu is None:
        return Bound(FRACTION, 0.9, "default --gpu_memory_utilization 0.9 (trl vllm-serve)", "default",
                     knob="--gpu_memory_utilization")
    value = _fraction(gmu[0])
    if value is None:
        return Bound(UNKNOWN, source="unknown", knob="--gpu_memory_utilization",
                     why=f"{gmu[1]!r} is no fraction trl accepts")
    return Bound(FRACTION, value, f"gpu_memory_utilization: {value:g} in {where}" if where else
                 f"--gpu_memory_utilization {value:g}", "config" if where else "flag",
                 knob="--gpu_memory_utilization", where=where)


# -- SGLang ----------------------------------------------------------------------------------------------
SGLANG_OPTIONS = (Option("mfs", ("--mem-fraction-static",), shortest=len("--mem")),
                  Option("tokens", ("--max-total-tokens",), shortest=len("--max-t")))


def sglang_bound(tokens: Sequence[str], start: Optional[ServerStart], version: Optional[str]) -> Bound:
    tokens, config = pull_config(tokens, start)
    cli = read_options(tokens, SGLANG_OPTIONS, ARGPARSE)
    from_config = read_options(config_tokens(config.data), SGLANG_OPTIONS, ARGPARSE) \
        if config is not None and config.data is not None else Found()
    mfs, where = (cli.get("mfs"), "") if cli.get("mfs") else (from_config.get("mfs"), config.path if config else "")
    tokens_cap = cli.get("tokens") or from_config.get("tokens")
    notes = (f"--max-total-tokens {tokens_cap[0]}",) if tokens_cap else ()
    if mfs is None and config is not None and config.data is None:
        return Bound(UNKNOWN, source="unknown", knob="--mem-fraction-static", where=config.path,
                     why=f"its config {config.path} {config.problem}")
    if mfs is not None:
        value = _fraction(mfs[0])
        if value is None:
            return Bound(UNKNOWN, source="unknown", knob="--mem-fraction-static",
                         why=f"{mfs[1]!r} is no fraction SGLang accepts")
        return Bound(FRACTION, value, _as_set(mfs[1], where, f"--mem-fraction-static {value:g}"),
                     "config" if where else "flag",
                     knob="--mem-fraction-static", where=where, notes=notes)
    release = f"SGLang {version}" if version else "SGLang 0.4.6 to 0.5.10 (its version not read)"
    return Bound(FRACTION, None, f"--mem-fraction-static unset: sized by {release} from the GPU's memory, less what "
                                 "it leaves for activations and CUDA graphs", "default", knob="--mem-fraction-static",
                 where=config.path if config else "", auto=True, notes=notes)


# -- TensorRT-LLM -----------------------------------------------------------------------------------------
TRTLLM_OPTIONS = (Option("free", ("--kv_cache_free_gpu_memory_fraction", "--free_gpu_memory_fraction")),
                  Option("config", ("--config", "--extra_llm_api_options")))
TRTLLM_DEFAULT_FRACTION = 0.9


def trtllm_bound(tokens: Sequence[str], start: Optional[ServerStart]) -> Bound:
    found = read_options(tokens, TRTLLM_OPTIONS, EXACT)
    knob = "--kv_cache_free_gpu_memory_fraction"
    path = found.get("config")[0] if found.get("config") else None
    if path:
        config = config_named(start, path)
        if config.data is None:
            return Bound(UNKNOWN, source="unknown", knob="kv_cache_config.free_gpu_memory_fraction", where=path,
                         why=f"its config {path} {config.problem}")
        kv = config.data.get("kv_cache_config")
        if isinstance(kv, dict):  # the YAML's kv_cache_config replaces the command line's whole
            notes = (f"kv_cache_config.max_tokens {_scalar(kv['max_tokens'])}",) if kv.get("max_tokens") is not None else ()
            raw = kv.get("free_gpu_memory_fraction")
            if raw is None:
                return Bound(FREE_FRACTION, TRTLLM_DEFAULT_FRACTION,
                             f"kv_cache_config in {path} without free_gpu_memory_fraction: default 0.9 of the memory "
                             "free after its weights", "default", knob="kv_cache_config.free_gpu_memory_fraction",
                             where=path, notes=notes)
            raw = _scalar(raw)
            value = _fraction(raw, low_open=False)
            if value is None:
                return Bound(UNKNOWN, source="unknown", knob="kv_cache_config.free_gpu_memory_fraction", where=path,
                             why=f"kv_cache_config.free_gpu_memory_fraction {raw!r} in {path} is no fraction")
            return Bound(FREE_FRACTION, value, f"kv_cache_config.free_gpu_memory_fraction {value:g} in {path} (of the "
                                               "memory free after its weights)", "config",
                         knob="kv_cache_config.free_gpu_memory_fraction", where=path, notes=notes)
    flag = found.get("free")
    if flag is None:
        return Bound(FREE_FRACTION, TRTLLM_DEFAULT_FRACTION, f"default {knob} 0.9 (of the memory free after its "
                                                             "weights)", "default", knob=knob, where=path or "")
    value = _fraction(flag[0], low_open=False)
    if value is None:
        return Bound(UNKNOWN, source="unknown", knob=knob, why=f"{flag[1]!r} is no fraction trtllm-serve accepts")
    return Bound(FREE_FRACTION, value, f"{flag[1].split('=')[0].split(' ')[0]} {value:g} (of the memory free after "
                                       "its weights)", "flag", knob=knob, where=path or "")


# -- TGI ----------------------------------------------------------------------------------------------------
TGI_OPTIONS = (Option("fraction", ("--cuda-memory-fraction",)),)


def tgi_bound(tokens: Sequence[str], start: Optional[ServerStart], shard: bool = False) -> Bound:
    found = read_options(tokens, TGI_OPTIONS, EXACT)
    flag = found.get("fraction")
    env = _env(start, "CUDA_MEMORY_FRACTION")
    if flag is not None:
        raw, setting, source, where = flag[0], "--cuda-memory-fraction", "flag", ""
    elif env is not None:
        raw, setting, source, where = env, "CUDA_MEMORY_FRACTION", "env", "environment"
    elif shard or _env_unread(start):
        why = _env_unread(start) or "its launcher sets CUDA_MEMORY_FRACTION and this shard's has none"
        if shard:
            return Bound(UNKNOWN, source="unknown", knob="--cuda-memory-fraction",
                         why=f"a TGI shard takes CUDA_MEMORY_FRACTION from its launcher: {why}")
        return Bound(UNKNOWN, source="unknown", knob="--cuda-memory-fraction",
                     why=f"TGI also reads CUDA_MEMORY_FRACTION from its environment: {why}")
    else:
        return Bound(FRACTION, 1.0, "default --cuda-memory-fraction 1.0 (TGI)", "default", knob="--cuda-memory-fraction")
    value = _fraction(raw)
    if value is None:
        return Bound(UNKNOWN, source="unknown", knob="--cuda-memory-fraction", where=where,
                     why=f"{setting} {raw!r} is no fraction TGI accepts")
    return Bound(FRACTION, value, f"{setting}{'=' if source == 'env' else ' '}{value:g}", source,
                 knob="--cuda-memory-fraction", where=where)


# -- llama.cpp ------------------------------------------------------------------------------------------------
LLAMA_OPTIONS = (Option("ngl", ("-ngl", "--gpu-layers", "--n-gpu-layers")), Option("ctx", ("-c", "--ctx-size")),
                 Option("fit", ("-fit", "--fit")), Option("parallel", ("-np", "--parallel")),
                 Option("models_dir", ("--models-dir",)), Option("models_preset", ("--models-preset",)),
                 Option("models_max", ("--models-max",)))
LLAMA_ENV = {"ngl": "LLAMA_ARG_N_GPU_LAYERS", "ctx": "LLAMA_ARG_CTX_SIZE", "fit": "LLAMA_ARG_FIT",
             "parallel": "LLAMA_ARG_N_PARALLEL", "models_dir": "LLAMA_ARG_MODELS_DIR",
             "models_preset": "LLAMA_ARG_MODELS_PRESET", "models_max": "LLAMA_ARG_MODELS_MAX"}


def llama_cpp_bound(tokens: Sequence[str], start: Optional[ServerStart]) -> tuple[Bound, bool]:
    """(its bound, whether it loads models on request: router mode)."""
    found = read_options(tokens, LLAMA_OPTIONS, LLAMA_CPP)
    settings = {}
    for dest, var in LLAMA_ENV.items():  # llama.cpp reads the variables first; the command line overrides them
        env = _env(start, var)
        if env is not None:
            settings[dest] = f"{var}={env}"
        if dest in found.values:
            settings[dest] = found.values[dest][1]
    model_env = any(_env(start, v) for v in ("LLAMA_ARG_MODEL", "LLAMA_ARG_HF_REPO", "LLAMA_ARG_MODEL_URL"))
    router = any(k in settings for k in ("models_dir", "models_preset")) or not (model_env or _env_unread(start) or any(
        t in ("-m", "--model", "-hf", "--hf-repo", "-mu", "--model-url", "-dr", "--docker-repo") for t in tokens))
    shown = ", ".join(settings[k] for k in ("ngl", "ctx", "fit", "parallel", "models_max") if k in settings)
    unset = "unset, all layers and the model's trained context, fitted to the free memory less 1 GiB (--fit, on " \
            "since late 2025)"
    text = f"takes what its model and context need when it loads ({shown or unset})"
    if router:
        return Bound(ON_REQUEST, setting=f"router mode: loads models on request ({settings.get('models_max') or 'up to 4 at once by default'})",
                     knob="--models-max"), True
    knob = "LLAMA_ARG_CTX_SIZE" if settings.get("ctx", "").startswith("LLAMA_ARG_") else "-c/--ctx-size"
    return Bound(AT_LOAD, setting=text, knob=knob), False


LLAMA_PY_OPTIONS = (Option("ngl", ("--n_gpu_layers",), shortest=len("--n_g")),
                    Option("config", ("--config_file",), shortest=len("--conf")))


def llama_cpp_python_bound(tokens: Sequence[str], start: Optional[ServerStart]) -> Bound:
    found = read_options(tokens, LLAMA_PY_OPTIONS, ARGPARSE)
    config = _env(start, "CONFIG_FILE") or (found.get("config")[0] if found.get("config") else None)
    if config:
        read = config_named(start, config)
        models = read.data.get("models") if read.data else None
        layers = [_scalar(m.get("n_gpu_layers", 0)) for m in models[:8] if isinstance(m, dict)] \
            if isinstance(models, list) else []
        shown = f"n_gpu_layers {', '.join(layers)} in {config}" if layers else f"models in {config}"
        return Bound(AT_LOAD, setting=f"takes what its models need when it loads them ({shown})", knob="n_gpu_layers",
                     where=config)
    ngl = found.get("ngl")
    env = _env(start, "N_GPU_LAYERS")
    shown = ngl[1] if ngl else f"N_GPU_LAYERS={env}" if env is not None else "--n_gpu_layers unset: 0, none on the GPU"
    return Bound(AT_LOAD, setting=f"takes what its model needs when it loads it ({shown})", knob="--n_gpu_layers")


# -- Ollama -----------------------------------------------------------------------------------------------
OLLAMA_VARIABLES = (("OLLAMA_MAX_LOADED_MODELS", "unset: 3 per GPU"), ("OLLAMA_KEEP_ALIVE", "unset: 5m"),
                    ("OLLAMA_NUM_PARALLEL", "unset: 1"), ("OLLAMA_CONTEXT_LENGTH", "unset: by memory"))


def ollama_bound(start: Optional[ServerStart]) -> Bound:
    """Ollama's limits are variables of its environment; unread (an older snapshot) they go unsaid."""
    if start is None:
        settings = ""
    elif start.environ is None:
        settings = f"its limits not known: {_env_unread(start)}"
    else:
        settings = ", ".join(f"{k}={_env(start, k)}" if _env(start, k) is not None else f"{k} {v}"
                             for k, v in OLLAMA_VARIABLES[:2])
    return Bound(ON_REQUEST, setting=settings, knob="OLLAMA_MAX_LOADED_MODELS", where="environment")


# -- what each program is ------------------------------------------------------------------------------------
DISTRIBUTIONS = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt_llm", "trl": "trl",
                 "llama_cpp_python": "llama_cpp_python"}
# The variables of a server's environment that bound it (recorded, masked); prefixes end in "_".
BOUND_VARIABLES = ("OLLAMA_", "LLAMA_ARG_", "CUDA_MEMORY_FRACTION", "MAX_BATCH_TOTAL_TOKENS", "MAX_TOTAL_TOKENS",
                   "N_GPU_LAYERS", "N_CTX", "CONFIG_FILE")


def bounds_a_server(name: str) -> bool:
    """Whether an environment variable ``name`` is one a known server is bounded by."""
    return any(name.startswith(v) if v.endswith("_") else name == v for v in BOUND_VARIABLES)


def config_paths(argv: Sequence[str] | None, name: str = "", environ: Mapping[str, str] | None = None) -> list[str]:
    """The config files a recognised server reads, as named on its command line (or environment)."""
    argv = [str(a) for a in (argv or [])]
    what = _recognise(argv, name)
    if what is None:
        return []
    kind, at = what
    tokens = argv[at:]
    if kind in ("vllm", "trl", "sglang") and "--config" in tokens:
        i = tokens.index("--config")
        path = tokens[i + 1] if i + 1 < len(tokens) else ""
        return [path] if path and (kind == "trl" or path.endswith((".yaml", ".yml"))) else []
    if kind == "trtllm":
        found = read_options(tokens, TRTLLM_OPTIONS, EXACT).get("config")
        return [found[0]] if found and found[0] else []
    if kind == "llama_cpp_python":
        env = (environ or {}).get("CONFIG_FILE")
        found = read_options(tokens, LLAMA_PY_OPTIONS, ARGPARSE).get("config")
        return [p for p in (env or (found[0] if found else None),) if p]
    return []


def distribution(argv: Sequence[str] | None, name: str = "") -> Optional[str]:
    """The Python distribution whose version bounds the server ``argv`` starts (None: not a Python server)."""
    what = _recognise([str(a) for a in (argv or [])], name)
    return DISTRIBUTIONS.get(what[0]) if what else None


def _recognise(argv: list[str], name: str) -> Optional[tuple[str, int]]:
    """(which server, the index its own arguments start at), before any reading of its options."""
    title = name or (argv[0] if argv else "")
    if title.startswith("VLLM::") or (argv and argv[0].startswith("VLLM::")):
        return "vllm_engine", len(argv)
    if title.startswith("sglang::") or (argv and argv[0].startswith("sglang::")):
        return "sglang_engine", len(argv)
    at = _follows(argv, {"vllm"}, {"serve"}) or _module(argv, ("vllm.entrypoints",))
    if at:
        if at < len(argv) and argv[at] == "serve":  # python -m vllm.entrypoints.cli.main serve ...
            at += 1
        return "vllm", at
    at = _follows(argv, {"trl"}, {"vllm-serve"})
    if at:
        return "trl", at
    at = _module(argv, ("sglang.launch_server",)) or _follows(argv, {"sglang"}, {"serve"})
    if at:
        return "sglang", at
    at = _named(argv, {"trtllm-serve"})
    if at:
        if at < len(argv) and argv[at] == "serve":
            at += 1
        return "trtllm", at
    at = _named(argv, {"text-generation-launcher"})
    if at:
        return "tgi", at
    at = _follows(argv, {"text-generation-server"}, {"serve"})
    if at:
        return "tgi_shard", at
    if _follows(argv, {"ollama"}, {"serve", "runner"}) or _named(argv, {"ollama_llama_server"}):
        return "ollama", len(argv)
    if _named(argv, {"llama-swap"}):
        return "llama-swap", len(argv)
    at = _named(argv, {"llama-server"})
    if at:
        return "llama.cpp", at
    at = _module(argv, ("llama_cpp.server",))
    if at:
        return "llama_cpp_python", at
    return None


ENGINE_WHY = "an engine process whose launcher (the command line with the flags that bound it) is not visible here"


def classify(argv: Sequence[str] | None, name: str = "", start: Optional[ServerStart] = None) -> Optional[Workload]:
    """The workload a process is, from how it was started; None when not recognised."""
    argv = [str(a) for a in (argv or [])]
    if not argv and not name:
        return None
    version = start.version if start is not None else None
    what = _recognise(argv, name)
    if what is None:
        trainer = _trainer(argv)
        return Workload("trainer", trainer, "trainer") if trainer else None
    kind, at = what
    tokens = argv[at:]
    if kind == "vllm_engine":
        return Workload("vllm", "vLLM", "server", Bound(UNKNOWN, source="child", knob="--gpu-memory-utilization",
                                                        why=ENGINE_WHY),
                        engine=True, version=version)
    if kind == "sglang_engine":
        return Workload("sglang", "SGLang", "server", Bound(UNKNOWN, source="child", knob="--mem-fraction-static",
                                                            why=ENGINE_WHY), engine=True, version=version)
    if kind == "vllm":
        return Workload("vllm", "vLLM", "server", vllm_bound(tokens, start, version), version=version)
    if kind == "trl":
        return Workload("vllm", "vLLM (trl vllm-serve)", "server", trl_bound(tokens, start), version=version)
    if kind == "sglang":
        return Workload("sglang", "SGLang", "server", sglang_bound(tokens, start, version), version=version)
    if kind == "trtllm":
        return Workload("trtllm", "TensorRT-LLM", "server", trtllm_bound(tokens, start), version=version)
    if kind in ("tgi", "tgi_shard"):
        return Workload("tgi", "TGI", "server", tgi_bound(tokens, start, shard=kind == "tgi_shard"),
                        engine=kind == "tgi_shard")
    if kind == "ollama":
        return Workload("ollama", "Ollama", "server", ollama_bound(start), loads_on_demand=True)
    if kind == "llama-swap":
        return Workload("llama.cpp", "llama-swap", "server",
                        Bound(ON_REQUEST, setting="starts the servers its config names on request", knob="groups"),
                        loads_on_demand=True)
    if kind == "llama.cpp":
        bound, router = llama_cpp_bound(tokens, start)
        return Workload("llama.cpp", "llama.cpp server", "server", bound, loads_on_demand=router)
    return Workload("llama.cpp", "llama.cpp server", "server", llama_cpp_python_bound(tokens, start), version=version)


def _trainer(argv: Sequence[str]) -> str:
    if _named(argv, {"torchrun"}) or _module(argv, ("torch.distributed.run", "torch.distributed.launch")):
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
