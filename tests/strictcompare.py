"""Type-, order- and bit-strict comparison of call outcomes, for the differential and thread tests.

``==`` is too lenient to compare the twins: ``1 == 1.0 == True``, it
ignores dict key order (the JSON text's and the encoders' order), and it
calls ``-0.0 == 0.0`` equal and ``nan == nan`` unequal.  ``diff`` tells
apart whatever the codec's outputs can tell apart.
"""

from __future__ import annotations

import decimal
import reprlib
import struct
from typing import Any, Callable, Iterator, List, Optional, Tuple

#: The outcome of a call: ("ok", value) or ("raised", exception type, message).
Outcome = Tuple[Any, ...]


def outcome(fn: Callable[..., Any], *args: Any) -> Outcome:
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
        return ("raised", type(exc), str(exc))


def diff(a: Any, b: Any, path: str = "$") -> Optional[str]:
    """None when a and b are the same value strictly, else where and how they first differ.

    Walked with an explicit stack, in order (a dict's key, then its value):
    values of any depth are compared without recursion.
    """
    stack: List[Iterator[Tuple[Any, Any, str]]] = [iter([(a, b, path)])]
    while stack:
        for a, b, path in stack[-1]:
            found, parts = _diff_here(a, b, path)
            if found is not None:
                return found
            if parts is not None:
                stack.append(parts)
                break
        else:
            stack.pop()
    return None


def _diff_here(a: Any, b: Any, path: str) -> Tuple[Optional[str], Optional[Iterator[Tuple[Any, Any, str]]]]:
    """(how a and b differ, ignoring their parts; the pairs of parts still to compare)."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {_short(a)} != {type(b).__name__} {_short(b)}", None
    if type(a) is dict:
        if len(a) != len(b):
            return f"{path}: {len(a)} keys {_short(list(a))} != {len(b)} keys {_short(list(b))}", None
        return None, _dict_parts(a, b, path)
    if type(a) in (list, tuple):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}: {_short(a)} != {_short(b)}", None
        return None, ((x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b)))
    return _scalar_diff(a, b, path), None


def _dict_parts(a: dict, b: dict, path: str) -> Iterator[Tuple[Any, Any, str]]:
    for i, (ka, kb) in enumerate(zip(list(a), list(b))):
        yield ka, kb, f"{path}.<key {i}>"
        yield a[ka], b[kb], f"{path}[{_short(ka)}]"


def _scalar_diff(a: Any, b: Any, path: str) -> Optional[str]:
    if type(a) is float:
        # bits: -0.0 vs 0.0, and NaN sign and payload, count
        if struct.pack("<d", a) != struct.pack("<d", b):
            return f"{path}: {a!r} != {b!r} (bits {struct.pack('>d', a).hex()} != {struct.pack('>d', b).hex()})"
        return None
    if type(a) in (str, bytes, bytearray):
        if a == b:
            return None
        i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        start = max(i - 40, 0)
        return (f"{path}: first difference at index {i} (lengths {len(a)}, {len(b)}): "
                f"{_short(a[start:i + 40])} != {_short(b[start:i + 40])}")
    if type(a) in (int, bool, type(None)):
        return None if a == b else f"{path}: {_short(a)} != {_short(b)}"
    if isinstance(a, (set, frozenset)):
        return None if a == b else f"{path}: {_short(a)} != {_short(b)}"
    if type(a) is decimal.Decimal:  # repr is exact (sign, digits, exponent, NaN payload); == raises for sNaN
        return None if repr(a) == repr(b) else f"{path}: {a!r} != {b!r}"
    # Anything else (datetimes, UUIDs, subclasses...: encoder inputs, not outputs): equal (or both
    # unequal to themselves, as a NaN) and spelled alike.
    if (a == b or (a != a and b != b)) and repr(a) == repr(b):
        return None
    return f"{path}: {_short(a)} != {_short(b)}"


def outcome_diff(a: Outcome, b: Outcome) -> Optional[str]:
    """None when both calls returned the same value strictly, or raised the same type with the same message."""
    if a[0] == "ok" and b[0] == "ok":
        return diff(a[1], b[1])
    if a[0] == "raised" and b[0] == "raised":
        if a[1] is not b[1]:
            return f"raised {_qualname(a[1])} != {_qualname(b[1])} ({a[2]!r} / {b[2]!r})"
        return None if a[2] == b[2] else f"{_qualname(a[1])} message {a[2]!r} != {b[2]!r}"
    return f"{describe(a)} != {describe(b)}"


def describe(o: Outcome) -> str:
    if o[0] == "ok":
        return f"returned {_short(o[1])}"
    return f"raised {_qualname(o[1])}({o[2]!r})"


def _qualname(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


# repr, but only a few levels deep (reprlib stops at maxlevel): safe for values of any depth.
_SHORT = reprlib.Repr()
_SHORT.maxlevel = 8
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 200
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = _SHORT.maxfrozenset = 20


def _short(value: Any, limit: int = 160) -> str:
    text = _SHORT.repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
