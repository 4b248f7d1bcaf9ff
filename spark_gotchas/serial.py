"""Typed readings <-> JSON. Readings are dataclasses; snapshots store them as plain JSON.

``to_jsonable`` and ``from_jsonable`` round-trip nested dataclasses, lists, tuples, dicts and
optionals, so a replayed reading is the same typed object a live run judged.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, get_args, get_origin, get_type_hints

_HINTS: dict[type, dict[str, Any]] = {}


def to_jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and obj != obj:  # NaN is not JSON
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def from_jsonable(tp: Any, data: Any) -> Any:
    """Build a value of type ``tp`` from JSON data (lenient: unknown keys are ignored)."""
    if tp is Any or data is None:
        return data
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        for arg in args:
            try:
                return from_jsonable(arg, data)
            except (TypeError, ValueError, KeyError):
                continue
        return data
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise TypeError(f"{tp.__name__} needs an object, got {type(data).__name__}")
        hints = _HINTS.get(tp)
        if hints is None:
            hints = _HINTS[tp] = get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = from_jsonable(hints.get(f.name, Any), data[f.name])
        return tp(**kwargs)
    if origin in (list, typing.List):
        (arg,) = get_args(tp) or (Any,)
        return [from_jsonable(arg, v) for v in data]
    if origin in (tuple, typing.Tuple):
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_jsonable(args[0], v) for v in data)
        return tuple(from_jsonable(a, v) for a, v in zip(args, data, strict=False)) if args else tuple(data)
    if origin in (dict, typing.Dict):
        kt, vt = get_args(tp) or (Any, Any)
        return {k: from_jsonable(vt, v) for k, v in data.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if tp is float and isinstance(data, int):
        return float(data)
    return data
