"""Typed readings <-> JSON. Readings are dataclasses; snapshots store them as plain JSON.

``to_jsonable`` and ``from_jsonable`` round-trip nested dataclasses, lists, tuples, dicts and
optionals, so a replayed reading is the same typed object a live run judged.

``from_jsonable`` checks every value against its declared type and raises :class:`Misfit`
(a TypeError) naming the field path when one does not fit: a string where a number belongs, a
capability written ``"12.1"`` where ``tuple[int, int]`` belongs, an object where a list
belongs. A judge never sees a value of the wrong type. The rules, so a snapshot means one thing:

- ``null`` fits an optional field and ``Any`` only; in any other field it is a misfit (a NaN is
  recorded as ``null``, so a reading that may hold one declares its field optional);
- ``true``/``false`` are booleans only, never integers or numbers;
- an integer fits a float field (and becomes a float); a float never fits an integer field,
  not even ``12.0``;
- a string fits only a string field (or an enum whose value it is);
- a union takes the first arm the value fits, and none fitting is a misfit;
- keys a dataclass does not have are ignored (a newer suite's snapshot still replays); a
  required field that is missing is a misfit.

Numbers must be readings a machine can give (:class:`OutOfRange`, a Misfit too), wherever they
occur, ``Any`` fields included:

- a number is finite: ``NaN`` and ``Infinity`` (which Python's JSON reader accepts and standard
  JSON does not) are no reading;
- an integer fits 64 bits: a 400-digit integer is no reading either;
- a field annotated with a quantity (``gbps: GBps``, :mod:`microbench.quantities`) lies in that
  quantity's range: a negative bandwidth or a clock of 10^9 MHz is refused, the message naming
  the field, the value and the range.

``to_jsonable`` records a NaN or an infinity as ``null`` and :func:`dumps` writes only standard
JSON (``allow_nan=False``), so no document the suite writes holds either.

Every string a value is built with has its credentials masked (:func:`spark_gotchas.base.scrub.mask_text`):
a judge never sees a credential, so what it cuts to fit a line (a variable's value, a GPU's name, an
error) holds none, not even a part of one; and a live run judges what its snapshot keeps.

Both walks are bounded in depth: ``to_jsonable`` copies iteratively (a value nested 1,000 levels
deep is no RecursionError), ``from_jsonable`` follows the declared type and refuses a value nested
deeper than :data:`MAX_DEPTH` levels (a ``SpotCheck`` holds its re-run, which could hold another …).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import numbers
import reprlib
import types
import typing
from typing import Annotated, Any, Callable, get_args, get_origin, get_type_hints

from . import scrub

_HINTS: dict[type, dict[str, Any]] = {}
INT_MIN, INT_MAX = -(1 << 63), (1 << 64) - 1  # a signed or an unsigned 64-bit value
MAX_DEPTH = 100  # levels of nesting a built value may have (bounded_read refuses deeper documents)


class Misfit(TypeError, ValueError):
    """A JSON value that does not fit its declared type; the message names the field path.

    Both a TypeError and a ValueError, as the looser errors it replaces were.
    """

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem


class OutOfRange(Misfit):
    """A number no machine can give: NaN, an infinity, an integer beyond 64 bits, or a value
    outside its field's declared range. The message names the field and the value."""


def _container(obj: Any) -> Any:
    """The items of ``obj`` as (key, value) pairs when it is a container to_jsonable opens, else None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    if isinstance(obj, dict):
        return [(str(k), v) for k, v in obj.items()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(enumerate(obj))
    return None


def _scalar_jsonable(obj: Any) -> Any:
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, float) and not math.isfinite(obj):  # NaN and infinities are not JSON
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if type(obj).__module__ == "numpy" and type(obj).__name__ in ("bool", "bool_"):  # numpy's bool
        return bool(obj)
    if isinstance(obj, numbers.Integral):  # numpy integers: numbers, not their str()
        return int(obj)
    if isinstance(obj, numbers.Real):
        value = float(obj)
        return value if math.isfinite(value) else None
    return str(obj)


def to_jsonable(obj: Any) -> Any:
    """``obj`` as JSON values: dataclasses as objects, tuples and sets as arrays, enums as their
    values, a NaN or an infinity as null. Iterative, so any depth of nesting is copied."""
    items = _container(obj)
    if items is None:
        return _scalar_jsonable(obj)
    root: Any = [] if isinstance(obj, (list, tuple, set, frozenset)) else {}
    todo = [(items, root)]
    while todo:
        items, copy = todo.pop()
        for key, value in items:
            inner = _container(value)
            if inner is not None:
                child: Any = [] if isinstance(value, (list, tuple, set, frozenset)) else {}
                todo.append((inner, child))
                value = child
            else:
                value = _scalar_jsonable(value)
            if isinstance(copy, list):
                copy.append(value)
            else:
                copy[key] = value
    return root


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` of standard JSON: dataclasses, tuples and enums as :func:`to_jsonable` writes
    them, a NaN or an infinity as ``null`` (``allow_nan=False`` then proves none is left)."""
    return json.dumps(to_jsonable(obj), allow_nan=False, **kwargs)


def from_jsonable(tp: Any, data: Any) -> Any:
    """Build a value of type ``tp`` from JSON data; :class:`Misfit` names the first value that does
    not fit. Every string is masked (:func:`spark_gotchas.base.scrub.mask_text`)."""
    values = scrub.secret_values()
    return _build(tp, data, "", lambda text: scrub.mask_text(text, values))


def type_name(tp: Any) -> str:
    """How a declared type reads in a message: ``int``, ``tuple[int, int]``, ``list[GpuDevice]``."""
    if tp is type(None):
        return "null"
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in get_args(tp))
    if origin is not None:
        args = get_args(tp)
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join('...' if a is Ellipsis else type_name(a) for a in args)}]" if args else name
    return getattr(tp, "__name__", str(tp))


_REPR = reprlib.Repr()  # two levels, four items of each: a value nested 1,000 deep is no RecursionError
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxtuple = 2, 4, 4, 4
_REPR.maxstring = _REPR.maxother = 1 << 20  # strings whole: reprlib cuts one in its middle, before the masker sees it


def _shown(data: Any) -> str:
    """The offending value, short and printable (control characters escaped by repr): at most two
    levels of it (a value nested 1,000 deep is no RecursionError), masked before it is cut."""
    if data is None:
        return "null"
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(data), type(data).__name__)
    if isinstance(data, int) and not isinstance(data, bool) and not INT_MIN <= data <= INT_MAX:
        return f"{kind} of {len(str(abs(data)))} digits"
    return f"{kind} {scrub.clip(_REPR.repr(data), 40)}"


def _misfit(tp: Any, data: Any, path: str) -> Misfit:
    return Misfit(path, f"needs {type_name(tp)}, got {_shown(data)}")


def _at(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


Mask = Callable[[str], str]


def _build(tp: Any, data: Any, path: str, mask: Mask, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise Misfit(path[:80] + ("…" if len(path) > 80 else ""), f"nested deeper than {MAX_DEPTH} levels")
    if tp is Any:
        _check_numbers(data, path)
        return scrub.map_strings(data, mask)
    if data is None:
        if type(None) in get_args(tp) or tp is type(None):
            return None
        raise _misfit(tp, data, path)
    origin = get_origin(tp)
    if origin is Annotated:
        return _annotated(tp, data, path, mask, depth)
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in get_args(tp) if a is not type(None)]
        if len(arms) == 1:  # Optional[X]: X's own message, which names the deeper field
            return _build(arms[0], data, path, mask, depth)
        for arm in arms:
            try:
                return _build(arm, data, path, mask, depth)
            except (TypeError, ValueError):
                continue
        raise _misfit(tp, data, path)
    if origin is typing.Literal:
        if any(data == choice and type(data) is type(choice) for choice in get_args(tp)):
            return data
        raise _misfit(tp, data, path)
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, data, path, mask, depth)
    if origin in (list, typing.List, set, frozenset):
        if not isinstance(data, list):
            raise _misfit(tp, data, path)
        (arg,) = get_args(tp) or (Any,)
        items = [_build(arg, v, _at(path, i), mask, depth + 1) for i, v in enumerate(data)]
        return items if origin in (list, typing.List) else origin(items)
    if origin in (tuple, typing.Tuple):
        return _tuple(tp, data, path, mask, depth)
    if origin in (dict, typing.Dict):
        if not isinstance(data, dict):
            raise _misfit(tp, data, path)
        _kt, vt = get_args(tp) or (Any, Any)
        return {k: _build(vt, v, _at(path, k), mask, depth + 1) for k, v in data.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            member = tp(data)
        except (TypeError, ValueError):
            raise Misfit(path, f"{_shown(data)} is not one of {', '.join(repr(m.value) for m in tp)}") from None
        if type(member.value) is not type(data):  # True is not the enum value 1
            raise _misfit(tp, data, path)
        return member
    return _scalar(tp, data, path, mask)


def _annotated(tp: Any, data: Any, path: str, mask: Mask, depth: int) -> Any:
    """``Annotated[float, Bound(...)]``: the value as its type builds it, then each bound's check
    (any metadata with a ``problem(value)`` method, :class:`microbench.quantities.Bound`)."""
    inner, *metadata = get_args(tp)
    value = _build(inner, data, path, mask, depth)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for meta in metadata:
            why = meta.problem(value) if callable(getattr(meta, "problem", None)) else None
            if why:
                raise OutOfRange(path, why)
    return value


def number_problem(data: Any) -> str | None:
    """Why a JSON number cannot be a reading (not finite, beyond 64 bits); None when it can."""
    if isinstance(data, float) and not math.isfinite(data):
        return f"{'NaN' if data != data else ('-' if data < 0 else '') + 'Infinity'} is not a finite number"
    if isinstance(data, int) and not isinstance(data, bool) and not INT_MIN <= data <= INT_MAX:
        return f"{len(str(abs(data)))} digits, beyond 64 bits"
    return None


def _check_numbers(data: Any, path: str) -> None:
    """Every number in an untyped value (an ``Any`` field) finite and within 64 bits."""
    todo = [(data, path)]
    while todo:
        value, at = todo.pop()
        if isinstance(value, dict):
            todo.extend((v, _at(at, k)) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((v, _at(at, i)) for i, v in enumerate(value))
        else:
            why = number_problem(value)
            if why:
                raise OutOfRange(at, why)


def _scalar(tp: Any, data: Any, path: str, mask: Mask) -> Any:
    if tp in (int, float) and not isinstance(data, bool):
        why = number_problem(data) if isinstance(data, (int, float)) else None
        if why:
            raise OutOfRange(path, why)
    if tp is bool:
        if isinstance(data, bool):
            return data
    elif tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
    elif tp is float:
        if isinstance(data, float):
            return data
        if isinstance(data, int) and not isinstance(data, bool):
            return float(data)
    elif tp is str:
        if isinstance(data, str):
            return mask(data)
    elif isinstance(tp, type):
        if isinstance(data, tp):
            return data
    else:  # a hint this module does not know: take the value as it is
        return data
    raise _misfit(tp, data, path)


def _tuple(tp: Any, data: Any, path: str, mask: Mask, depth: int) -> tuple:
    args = get_args(tp)
    if not isinstance(data, list):
        raise _misfit(tp, data, path)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_build(args[0], v, _at(path, i), mask, depth + 1) for i, v in enumerate(data))
    if not args:
        return tuple(data)
    if len(data) != len(args):
        raise Misfit(path, f"needs {type_name(tp)} ({len(args)} items), got {_shown(data)}")
    return tuple(_build(a, v, _at(path, i), mask, depth + 1) for i, (a, v) in enumerate(zip(args, data, strict=True)))


def _dataclass(tp: Any, data: Any, path: str, mask: Mask, depth: int) -> Any:
    if not isinstance(data, dict):
        raise Misfit(path, f"{tp.__name__} needs an object, got {_shown(data)}")
    hints = _HINTS.get(tp)
    if hints is None:
        # the module's names as the class was made (its __init__'s globals): a module dropped from
        # sys.modules since (an in-process pytest run drops what it imported) resolves all the same
        hints = _HINTS[tp] = get_type_hints(tp, globalns=getattr(tp.__init__, "__globals__", None),
                                            include_extras=True)
    kwargs = {}
    for f in dataclasses.fields(tp):
        if not f.init:
            continue
        if f.name in data:
            kwargs[f.name] = _build(hints.get(f.name, Any), data[f.name], _at(path, f.name), mask, depth + 1)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise Misfit(_at(path, f.name), f"missing (a {tp.__name__} always has it)")
    try:
        return tp(**kwargs)
    except (TypeError, ValueError) as exc:  # a __post_init__ that checks its values
        raise Misfit(path, f"{tp.__name__}: {exc}") from None
