"""Launch configs (``--spark-launch-config``) and the launch environment, read for parallelism (G10).

Formats: accelerate config YAML, DeepSpeed JSON, Megatron/NeMo YAML, vLLM/SGLang YAML configs,
and text: shell scripts or argument files with torchrun / ``python -m torch.distributed.run``,
``accelerate launch``, ``deepspeed``, ``vllm serve``, ``python -m sglang.launch_server`` lines.
Config files a command names (``--config_file``, ``--deepspeed``, ``--config``) are read too.
A file that cannot be read or parsed is a reading with the error, never an exception.

Every file is read within limits (MAX_FILE_BYTES, MAX_DEPTH, MAX_NODES with YAML aliases
expanded, MAX_EXPANDED_CHARS for script variables), and only a regular file is opened for
reading at all: ``/dev/zero``, a FIFO with no writer, a 200 MB file, a billion-laughs YAML or
JSON nested 100 000 levels deep is a reading that says which limit it passed, never a hang,
a RecursionError or a full memory.

Key: ``launch.review``; its types and limits are in :mod:`spark_gotchas.knowledge.readings.launch`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from ...base.bounded_read import LAUNCH_CONFIG, Refused, read_bytes
from ...base.units import describe_size
from ...knowledge.readings.launch import (
    MAX_DEPTH,
    MAX_EXPANDED_CHARS,
    MAX_NODES,
    LaunchFile,
    LaunchReview,
    Setting,
    to_int,
)
from . import ReadContext, reader

ENV_KEYS = ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "RANK", "LOCAL_RANK", "NNODES", "PET_NNODES",
            "NODE_RANK", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "MASTER_ADDR", "MASTER_PORT", "SLURM_NNODES",
            "SLURM_JOB_NUM_NODES", "PARALLELISM_CONFIG_TP_SIZE", "ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED",
            "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA")

# Keys (YAML/JSON, at any depth) and command-line flags, by what they set.
TP_KEYS = {"tensor_model_parallel_size", "tensor_parallel_size", "tensor-parallel-size", "megatron_lm_tp_degree",
           "parallelism_config_tp_size", "autotp_size", "tp_size", "tp-size"}
TOP_TP_KEYS = {"tp", "mp_size"}  # only at the top level (vLLM/SGLang configs, old DeepSpeed inference)
PP_KEYS = {"pipeline_model_parallel_size", "pipeline_parallel_size", "pipeline-parallel-size", "megatron_lm_pp_degree",
           "pp_size", "pp-size"}
NODE_KEYS = {"num_machines", "num_nodes", "nnodes", "num-nodes"}
SETTING_KEYS = TP_KEYS | TOP_TP_KEYS | PP_KEYS | NODE_KEYS | {
    "num_processes", "nproc_per_node", "gpus_per_node", "devices", "distributed_type", "strategy", "_target_",
    "zero_optimization"}  # the keys settings_from_tree reads (a JSON setting's line is looked up for these only)
TP_FLAGS = {"--tensor-parallel-size", "--tensor_parallel_size", "-tp", "--tp", "--tp-size", "--tp_size",
            "--tensor-model-parallel-size", "--tensor_model_parallel_size", "--parallelism_config_tp_size",
            "--parallelism-config-tp-size"}
PP_FLAGS = {"--pipeline-parallel-size", "--pipeline_parallel_size", "-pp", "--pp", "--pp-size", "--pp_size",
            "--pipeline-model-parallel-size", "--pipeline_model_parallel_size"}
NODE_FLAGS = {"--nnodes", "--num_nodes", "--num-nodes", "--num_machines", "--num-machines"}
PER_NODE_FLAGS = {"--nproc_per_node", "--nproc-per-node", "--num_gpus", "--num-gpus", "--gpus-per-node",
                  "--gpus_per_node"}
TOTAL_FLAGS = {"--num_processes", "--num-processes"}
STRATEGY_FLAGS = {"--use_fsdp": "FSDP", "--use-fsdp": "FSDP", "--use_deepspeed": "DEEPSPEED",
                  "--use-deepspeed": "DEEPSPEED", "--multi_gpu": "MULTI_GPU", "--multi-gpu": "MULTI_GPU",
                  "--use_megatron_lm": "MEGATRON_LM", "--use-megatron-lm": "MEGATRON_LM"}
CONFIG_FLAGS = {"--config_file", "--config-file", "--deepspeed", "--deepspeed_config", "--deepspeed-config", "--config"}
FLAG_ROLES = ({f: "tp" for f in TP_FLAGS} | {f: "pp" for f in PP_FLAGS} | {f: "nodes" for f in NODE_FLAGS}
              | {f: "procs_per_node" for f in PER_NODE_FLAGS} | {f: "processes" for f in TOTAL_FLAGS})
LAUNCHER_WORDS = re.compile(r"torchrun|torch\.distributed\.(run|launch)|accelerate|deepspeed|vllm|sglang|trtllm")
ASSIGNMENT = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::?-(?P<default>[^}]*))?\}|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)")
PLAIN_VARIABLE = re.compile(r"\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)")  # past a token's last }: no ${…} can close


# -- YAML / JSON -------------------------------------------------------------------------------
NO_YAML = "not read: PyYAML is not installed (pip install PyYAML)"


class OverLimit(Exception):
    """A file past one of the review's limits; the message says which, e.g. ``too large to review: …``."""


class _Budget:
    """Counts the values a walk visits; raises :class:`OverLimit` past MAX_NODES or MAX_DEPTH."""

    def __init__(self, what: str):
        self.what = what
        self.nodes = 0
        self.chars = 0

    def take(self, chars: int) -> None:
        """Characters produced by $VARIABLE expansion."""
        self.chars += chars
        if self.chars > MAX_EXPANDED_CHARS:
            raise OverLimit(f"too large to review: its $VARIABLES expand to more than "
                            f"{describe_size(MAX_EXPANDED_CHARS)}")

    def visit(self, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise OverLimit(f"too large to review: more than {MAX_NODES} values{self.what}")
        if depth > MAX_DEPTH:
            raise OverLimit(f"too deeply nested to review: more than {MAX_DEPTH} levels")


def _walk_yaml(node: Any, budget: _Budget, path: tuple[str, ...] = (), inside: frozenset[int] = frozenset()
               ) -> Iterator[tuple[tuple[str, ...], Any, int]]:
    """(key path, scalar value, 1-based line) for every scalar under a composed YAML node.

    Aliases are followed (a value shared by an anchor counts once per use), so the budget stops a
    document whose aliases expand exponentially; an alias inside its own anchor is refused.
    """
    import yaml

    budget.visit(len(path))
    if id(node) in inside:
        raise OverLimit(f"too deeply nested to review: a recursive alias (an anchor used inside itself) at line "
                        f"{node.start_mark.line + 1}")
    if isinstance(node, yaml.MappingNode):
        inside = inside | {id(node)}
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
            if isinstance(value_node, yaml.ScalarNode):
                budget.visit(len(path) + 1)
                yield path + (key,), value_node.value, value_node.start_mark.line + 1
            else:
                yield path + (key,), None, value_node.start_mark.line + 1
                yield from _walk_yaml(value_node, budget, path + (key,), inside)
    elif isinstance(node, yaml.SequenceNode):
        inside = inside | {id(node)}
        for i, item in enumerate(node.value):
            yield from _walk_yaml(item, budget, path + (str(i),), inside)


def _walk_json(obj: Any, budget: _Budget, path: tuple[str, ...] = ()
               ) -> Iterator[tuple[tuple[str, ...], Any, Optional[int]]]:
    budget.visit(len(path))
    if isinstance(obj, dict):
        for key, value in getattr(obj, "pairs", obj.items()):
            if isinstance(value, (dict, list)):
                yield path + (str(key),), None, None
                yield from _walk_json(value, budget, path + (str(key),))
            else:
                budget.visit(len(path) + 1)
                yield path + (str(key),), value, None
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from _walk_json(item, budget, path + (str(i),))


def _json_lines(text: str) -> Callable[[str], Optional[int]]:
    """The line of a key's first appearance, searched once per distinct key."""
    found: dict[str, Optional[int]] = {}

    def line(key: str) -> Optional[int]:
        if key not in found:
            match = re.search(r'"' + re.escape(key) + r'"\s*:', text)
            found[key] = text.count("\n", 0, match.start()) + 1 if match else None
        return found[key]

    return line


def settings_from_tree(items: list[tuple[tuple[str, ...], Any, Optional[int]]]) -> list[Setting]:
    """Parallelism settings among (key path, value, line) items of a YAML/JSON document."""
    out: list[Setting] = []
    values = {".".join(p): v for p, v, _ in items}
    for path, value, line in items:
        key, dotted = path[-1], ".".join(path)
        if value is None:
            if key == "zero_optimization":
                stage = values.get(dotted + ".stage")
                out.append(Setting("strategy", dotted + ".stage", f"DeepSpeed ZeRO-{stage}" if stage is not None
                                   else "DeepSpeed ZeRO", None, line))
            continue
        raw = str(value)
        if key in TP_KEYS or (len(path) == 1 and key in TOP_TP_KEYS):
            out.append(Setting("tp", dotted, raw, to_int(value), line))
        elif key in PP_KEYS:
            out.append(Setting("pp", dotted, raw, to_int(value), line))
        elif key in NODE_KEYS:
            out.append(Setting("nodes", dotted, raw, to_int(value), line))
        elif key == "num_processes":
            out.append(Setting("processes", dotted, raw, to_int(value), line))
        elif key in ("nproc_per_node", "gpus_per_node") or (key == "devices" and len(path) >= 2 and path[-2] == "trainer"):
            out.append(Setting("procs_per_node", dotted, raw, to_int(value), line))
        elif key == "distributed_type" or (key == "strategy" and len(path) >= 2 and path[-2] == "trainer"):
            out.append(Setting("strategy", dotted, raw, None, line))
        elif key == "_target_" and len(path) >= 3 and path[-2] == "strategy" and path[-3] == "trainer":
            out.append(Setting("strategy", dotted, raw.rsplit(".", 1)[-1], None, line))
    return out


def _kind_of_tree(keys: set[str], top: set[str]) -> str:
    if top & {"distributed_type", "compute_environment"}:
        return "accelerate"
    if keys & {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size"} or "tensor_parallel" in top:
        return "deepspeed"
    if keys & {"tensor_model_parallel_size", "pipeline_model_parallel_size"} or "trainer" in top:
        return "megatron"
    if top & {"tensor-parallel-size", "tensor_parallel_size", "model", "tp", "tp-size", "tp_size"}:
        return "vllm"
    return ""


def _yaml_error(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if problem and mark is not None:
        context = getattr(exc, "context", None)
        return f"YAML error: {problem}" + (f" ({context})" if context else "") + \
            f" at line {mark.line + 1}, column {mark.column + 1}"
    return "YAML error: " + " ".join(str(exc).split())


def _named_configs(items: list[tuple[tuple[str, ...], Any, Optional[int]]]) -> list[str]:
    """Config files a config names (accelerate's deepspeed_config.deepspeed_config_file)."""
    return [str(v) for p, v, _ in items if p[-1] == "deepspeed_config_file" and v not in (None, "", "null")]


def _bounded_loader() -> Any:
    """PyYAML's safe loader, counting nodes and depth while it composes (aliases are not expanded
    here: the walk counts those)."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        depth = 0
        composed = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.composed += 1
            self.depth += 1
            try:
                if self.composed > MAX_NODES:
                    raise OverLimit(f"too large to review: more than {MAX_NODES} values")
                if self.depth > MAX_DEPTH:
                    raise OverLimit(f"too deeply nested to review: more than {MAX_DEPTH} levels")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


def parse_yaml(path: str, text: str) -> tuple[LaunchFile, list[str]]:
    try:
        import yaml
    except ImportError:
        return LaunchFile(path, "yaml", unsupported=NO_YAML), []
    try:
        docs = [d for d in yaml.compose_all(text, Loader=_bounded_loader()) if d is not None]
        if docs and not isinstance(docs[0], yaml.MappingNode):
            return LaunchFile(path, "yaml", error="YAML error: the document is not a mapping of settings"), []
        budget = _Budget(" once its aliases are expanded")
        items = [item for doc in docs for item in _walk_yaml(doc, budget)]
    except yaml.YAMLError as exc:
        return LaunchFile(path, "yaml", error=_yaml_error(exc)), []
    except OverLimit as exc:
        return _over_limit(path, "yaml", str(exc))
    except RecursionError:
        return _over_limit(path, "yaml", f"too deeply nested to review: more than {MAX_DEPTH} levels")
    top = {p[0] for p, _, _ in items if len(p) == 1}
    kind = _kind_of_tree({p[-1] for p, _, _ in items}, top) or "yaml"
    return LaunchFile(path, kind, settings=settings_from_tree(items)), _named_configs(items)


class _Pairs(dict):
    """A JSON object that keeps every key it was written with, a key given twice included: the walk
    reports both values, as it does for a YAML mapping (json.loads alone keeps the last one only)."""

    def __init__(self, pairs: list[tuple[str, Any]]):
        super().__init__(pairs)
        self.pairs = pairs


def parse_json(path: str, text: str) -> tuple[LaunchFile, list[str]]:
    try:
        data = json.loads(text, object_pairs_hook=_Pairs)
    except json.JSONDecodeError as exc:
        return LaunchFile(path, "json", error=f"JSON error: {exc.msg} at line {exc.lineno}, column {exc.colno}"), []
    except RecursionError:
        return _over_limit(path, "json", f"too deeply nested to review: more than {MAX_DEPTH} levels")
    except ValueError:  # an integer of more digits than Python parses (4300)
        return _over_limit(path, "json", "too large to review: a number of more digits than Python reads (4300)")
    if not isinstance(data, dict):
        return LaunchFile(path, "json", error="JSON error: the document is not an object of settings"), []
    try:
        items = list(_walk_json(data, _Budget("")))
    except OverLimit as exc:
        return _over_limit(path, "json", str(exc))
    line = _json_lines(text)
    items = [(p, v, line(p[-1]) if p[-1] in SETTING_KEYS else None) for p, v, _ in items]
    kind = _kind_of_tree({p[-1] for p, _, _ in items}, set(data)) or "json"
    return LaunchFile(path, kind, settings=settings_from_tree(items)), _named_configs(items)


def _over_limit(path: str, fmt: str, error: str) -> tuple[LaunchFile, list[str]]:
    return LaunchFile(path, fmt, error=error, over_limit=True), []


# -- command lines -----------------------------------------------------------------------------------
def logical_lines(text: str) -> list[tuple[int, str]]:
    """Lines with backslash continuations joined, each with its first line number."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def expand(token: str, variables: dict[str, str], budget: Optional[_Budget] = None) -> str:
    """``$VAR``, ``${VAR}``, ``${VAR:-default}`` from the script's own assignments (else left as written).

    ``budget`` counts the characters substituted, so variables that double at every line
    (``B=$A$A``, ``C=$B$B`` …) stop at MAX_EXPANDED_CHARS instead of filling memory.
    """
    def sub(match: re.Match) -> str:
        found = match.groupdict()
        name = found.get("name") or found["plain"]
        if name in variables:
            out = variables[name]
        elif found.get("default") is not None:
            out = found["default"]
        else:
            return match.group(0)
        if budget is not None:
            budget.take(len(out))
        return out

    # A ${ that no } closes would be read to the token's end from every such ${ (quadratic: a 1 MiB
    # token of "${a:-" took hours): past the token's last }, only $NAME can match.
    closed = token.rfind("}") + 1
    return VARIABLE.sub(sub, token[:closed]) + PLAIN_VARIABLE.sub(sub, token[closed:])


def _launchers(tokens: list[str]) -> list[str]:
    found = []
    for i, tok in enumerate(tokens):
        base = os.path.basename(tok)
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if base == "torchrun" or tok in ("torch.distributed.run", "torch.distributed.launch"):
            found.append("torchrun")
        elif base == "accelerate" and nxt == "launch":
            found.append("accelerate launch")
        elif base in ("deepspeed", "deepspeed.launcher.runner"):
            found.append("deepspeed")
        elif (base == "vllm" and nxt == "serve") or tok.startswith("vllm.entrypoints"):
            found.append("vllm serve")
        elif tok.startswith("sglang.launch_server") or (base == "sglang" and nxt in ("serve", "launch_server")):
            found.append("sglang")
        elif base == "trtllm-serve":
            found.append("trtllm-serve")
    return found


def settings_from_tokens(tokens: list[str], line: int) -> tuple[list[Setting], list[str]]:
    """Parallelism settings and named config files among one command's tokens."""
    settings: list[Setting] = []
    configs: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        flag, value = (tok.split("=", 1) + [None])[:2] if tok.startswith("-") and "=" in tok else (tok, None)
        if flag in STRATEGY_FLAGS:
            settings.append(Setting("strategy", flag, STRATEGY_FLAGS[flag], None, line))
        elif flag in FLAG_ROLES or flag in CONFIG_FLAGS:
            if value is None and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                value = tokens[i + 1]
                i += 1
            if value is not None:
                if flag in CONFIG_FLAGS:
                    configs.append(value)
                else:
                    settings.append(Setting(FLAG_ROLES[flag], flag, value, to_int(value), line))
        i += 1
    return settings, configs


def parse_text(path: str, text: str) -> tuple[LaunchFile, list[str]]:
    """A shell script, a command line, or an argument file; returns the file and the configs it names."""
    try:
        return _parse_text(path, text)
    except OverLimit as exc:
        return _over_limit(path, "text", str(exc))


def _parse_text(path: str, text: str) -> tuple[LaunchFile, list[str]]:
    out = LaunchFile(path, "text")
    variables: dict[str, str] = {}
    configs: list[str] = []
    budget = _Budget("")
    for number, line in logical_lines(text):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as exc:
            if LAUNCHER_WORDS.search(line) or any(f in line for f in FLAG_ROLES):
                out.error = f"line {number}: {exc} (cannot split the command)"
                return out, []
            continue
        if tokens and tokens[0] == "export":
            tokens = tokens[1:]
        if tokens and all(ASSIGNMENT.match(t) for t in tokens):
            for t in tokens:
                name, value = ASSIGNMENT.match(t).groups()  # type: ignore[union-attr]
                variables[name] = expand(value, variables, budget)
            continue
        tokens = [expand(t, variables, budget) for t in tokens]
        out.launchers += _launchers(tokens)
        found, named = settings_from_tokens(tokens, number)
        out.settings += found
        configs += named
    out.launchers = list(dict.fromkeys(out.launchers))
    out.format = "script" if out.launchers else ("arguments" if out.settings else "text")
    return out, configs


# -- files -------------------------------------------------------------------------------------------
def _read_text(path: str) -> tuple[Optional[str], Optional[str], bool]:
    """(text, None, False), or (None, why not, whether that is a limit rather than a read error)."""
    try:
        data = read_bytes(path, LAUNCH_CONFIG)
    except Refused as exc:
        if str(exc).startswith("larger"):
            return None, f"too large to review: {exc}", True
        return None, f"cannot review: {exc}", True
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}", False
    try:
        return data.decode("utf-8"), None, False
    except UnicodeDecodeError as exc:
        return None, f"cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})", False


def parse_file(path: str) -> tuple[LaunchFile, list[str]]:
    text, error, over_limit = _read_text(path)
    if text is None:
        return LaunchFile(path, "unknown", error=error, over_limit=over_limit), []
    suffix = Path(path).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return parse_yaml(path, text)
    if suffix == ".json":
        return parse_json(path, text)
    return parse_text(path, text)


def review_files(paths: list[str] | tuple[str, ...]) -> list[LaunchFile]:
    """Every file named, then the config files their commands name (one level, if they exist)."""
    files: list[LaunchFile] = []
    seen: set[str] = set()
    for path in paths:
        parsed, named = parse_file(path)
        files.append(parsed)
        seen.add(os.path.realpath(path))
        for ref in named:
            if not ref.lower().endswith((".json", ".yaml", ".yml")):
                continue
            candidate = ref if os.path.isabs(ref) else os.path.join(os.path.dirname(path) or ".", ref)
            if os.path.realpath(candidate) in seen or not os.path.exists(candidate):
                continue
            seen.add(os.path.realpath(candidate))
            child, _ = parse_file(candidate)
            child.referenced_by = path
            files.append(child)
    return files


def review_named_files(ctx: ReadContext, recorded: LaunchReview) -> LaunchReview:
    """In a replay, the files named on this command line, with the recorded run's environment."""
    return LaunchReview(files=review_files(ctx.options.spark_launch_config), environment=recorded.environment)


@reader("launch.review", replay_input=("spark_launch_config", review_named_files))
def read_launch_review(ctx: ReadContext) -> LaunchReview:
    """The ``--spark-launch-config`` files and the launch variables of this process's environment."""
    return LaunchReview(
        files=review_files(ctx.options.spark_launch_config),
        environment={k: os.environ[k] for k in ENV_KEYS if os.environ.get(k)},
    )
