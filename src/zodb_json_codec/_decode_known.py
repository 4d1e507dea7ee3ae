"""Decoding rules for known types: values the decoder built become compact markers.

Functions that look at values the decoder built (``{"@t": [...]}``,
``{"@b": ...}``, objects under construction) and return the compact marker
(``@dt``, ``@dec``, ``@kv``...), or None when the shape is not exactly one
that round-trips, so the generic form is kept (docs/format.md, "Markers" and
"BTrees"); and the class metadata of a record ("Class metadata").
Both decoder twins call them; ``_encode_known`` is the way back.
"""

from __future__ import annotations

from typing import Any, Optional

from ._common import CodecError, I64_MAX, I64_MIN, has_surrogate
from ._known import (
    OFFSET_MAX_SECONDS, date_exists, decimal_reads, global_name, is_ref, raw_bytes, timedelta_exists, tuple_items,
)

# Kinds of objects under construction (REDUCE / NEWOBJ results): the
# decoders make them (_decode_common.Obj), the rules below read them.
REDUCE, NEWOBJ = 0, 1


def newobj_ex_callable() -> dict:
    """The callable of NEWOBJ_EX's call, a new marker each time: ``copyreg.__newobj_ex__``, which
    ``copyreg`` defines as ``cls.__new__(cls, *args, **kwargs)``."""
    return {"@cls": ["copyreg", "__newobj_ex__"]}


def _plain_text(s: Any) -> bool:
    """Text that goes into a marker verbatim must need no PostgreSQL escaping."""
    return type(s) is str and s.isascii() and "\x00" not in s


def _is_int(v: Any) -> bool:
    return type(v) is int


# ---------------------------------------------------------------------------
# REDUCE results -> known-type markers
# ---------------------------------------------------------------------------

def recognize_reduce(callable_: Any, args: Any, objs: dict) -> Optional[dict]:
    """The marker for ``callable(*args)`` if it is a known type of exactly the usual shape."""
    cls = global_name(callable_)
    if cls is None:
        return None
    items = tuple_items(args)
    if items is None:
        return None
    module, name = cls
    if module == "datetime":
        if name == "datetime":
            return _datetime_marker(items, objs)
        if name == "date":
            return _date_marker(items)
        if name == "time":
            return _time_marker(items, objs)
        if name == "timedelta":
            if len(items) == 3 and all(_is_int(x) for x in items) and timedelta_exists(items):
                return {"@td": list(items)}
        return None
    if module == "decimal" and name == "Decimal":
        if len(items) == 1 and _plain_text(items[0]) and decimal_reads(items[0]):
            return {"@dec": items[0]}
        return None
    if module == "builtins" and name in ("set", "frozenset"):
        if len(items) == 1 and type(items[0]) is list:
            # A copy: the set holds what the list held at the call; the pickle may fill the list later.
            return {"@set" if name == "set" else "@fset": list(items[0])}
    return None


def _state_bytes(items: list, size: int) -> Optional[bytes]:
    """The state bytes of a datetime or time call (state[, zone]) if they have this size."""
    if len(items) not in (1, 2):
        return None
    raw = raw_bytes(items[0])
    return raw if raw is not None and len(raw) == size else None


def _datetime_marker(items: list, objs: dict) -> Optional[dict]:
    raw = _state_bytes(items, 10)
    if raw is None:
        return None
    year = raw[0] << 8 | raw[1]
    month, day, hour, minute, second = raw[2], raw[3], raw[4], raw[5], raw[6]
    us = raw[7] << 16 | raw[8] << 8 | raw[9]
    if not (date_exists(year, month, day) and hour < 24 and minute < 60 and second < 60 and us < 1000000):
        return None  # a datetime that does not exist, or the protocol 4 fold bit (month >= 128): the raw bytes
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
    if us:
        text += f".{us:06d}"
    return _with_tz("@dt", text, items, objs)


def _time_marker(items: list, objs: dict) -> Optional[dict]:
    raw = _state_bytes(items, 6)
    if raw is None:
        return None
    hour, minute, second = raw[0], raw[1], raw[2]
    us = raw[3] << 16 | raw[4] << 8 | raw[5]
    if not (hour < 24 and minute < 60 and second < 60 and us < 1000000):
        return None
    text = f"{hour:02d}:{minute:02d}:{second:02d}"
    if us:
        text += f".{us:06d}"
    return _with_tz("@time", text, items, objs)


def _with_tz(key: str, text: str, items: list, objs: dict) -> Optional[dict]:
    if len(items) == 1:
        return {key: text}
    tz = _tz_marker(items[1], objs)
    if tz is None:
        return None
    if type(tz) is str:
        return {key: text + tz}
    return {key: text, "@tz": tz}


def _date_marker(items: list) -> Optional[dict]:
    if len(items) != 1:
        return None
    raw = raw_bytes(items[0])
    if raw is None or len(raw) != 4:
        return None
    year = raw[0] << 8 | raw[1]
    month, day = raw[2], raw[3]
    if not date_exists(year, month, day):
        return None
    return {"@date": f"{year:04d}-{month:02d}-{day:02d}"}


def _pending_call(v: Any, objs: dict) -> Optional[tuple]:
    """(callable, args items) of an unbuilt REDUCE result."""
    if type(v) is not dict:
        return None
    obj = objs.get(id(v))
    if obj is None or obj.value is not v or obj.kind != REDUCE or obj.built or obj.items or obj.appends:
        return None
    items = tuple_items(obj.args)
    if items is None:
        return None
    return obj.callable, items


def _tz_marker(tz: Any, objs: dict) -> Any:
    """An offset text, an ``@tz`` dict, or None for a zone we do not map."""
    call = _pending_call(tz, objs)
    if call is None:
        return None
    callable_, items = call
    cls = global_name(callable_)
    if cls == ("datetime", "timezone"):
        if len(items) != 1:
            return None  # a named fixed offset: keep the generic form
        td = _pending_call(items[0], objs)
        if td is None or global_name(td[0]) != ("datetime", "timedelta"):
            return None
        parts = td[1]
        if len(parts) != 3 or not all(_is_int(x) for x in parts):
            return None
        total = (parts[0] * 86400 + parts[1]) * 1000000 + parts[2]
        return offset_text(total)
    if cls == ("pytz", "_UTC"):
        return "+00:00" if not items else None
    if cls == ("pytz", "_p"):
        if items and _plain_text(items[0]) and all(
                _plain_text(x) or (_is_int(x) and I64_MIN <= x <= I64_MAX) for x in items):
            for offset in items[1:3]:  # utcoffset, dstoffset: under a day, or the generic call
                if _is_int(offset) and not -OFFSET_MAX_SECONDS <= offset <= OFFSET_MAX_SECONDS:
                    return None
            return {"pytz": list(items), "name": items[0]}
        return None
    if cls is None:
        inner = _pending_call(callable_, objs)
        if inner is None or global_name(inner[0]) != ("builtins", "getattr"):
            return None
        target = inner[1]
        if (len(target) == 2 and global_name(target[0]) == ("zoneinfo", "ZoneInfo")
                and target[1] == "_unpickle" and len(items) == 2 and _plain_text(items[0])
                and _is_int(items[1]) and items[1] == 1):  # the C zoneinfo's "from cache" flag
            return {"zoneinfo": items[0]}
    return None


def offset_text(total_us: int) -> Optional[str]:
    """``+HH:MM``, with ``:SS`` and ``.ffffff`` only when present (docs/format.md, "Known types")."""
    sign = "+" if total_us >= 0 else "-"
    a = -total_us if total_us < 0 else total_us
    seconds, us = divmod(a, 1000000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours >= 24:
        return None  # not a valid datetime.timezone
    text = f"{sign}{hours:02d}:{minutes:02d}"
    if secs or us:
        text += f":{secs:02d}"
    if us:
        text += f".{us:06d}"
    return text


def uuid_from_state(state: Any) -> Optional[str]:
    """The ``@uuid`` text of a UUID whose state is exactly ``{"int": value}``."""
    if type(state) is not dict or len(state) != 1 or "int" not in state:
        return None
    value = state["int"]
    if type(value) is dict and len(value) == 1 and "@bi" in value:
        value = int(value["@bi"])
    if not _is_int(value) or not 0 <= value < 1 << 128:
        return None
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# ---------------------------------------------------------------------------
# BTree states (docs/format.md, "BTrees")
# ---------------------------------------------------------------------------

def btree_state(state: Any, is_tree: bool, is_map: bool) -> Any:
    """The flattened form of a BTree/bucket/set state, or the state itself if it has another shape."""
    if state is None:
        return None
    items = tuple_items(state)
    if items is None:
        return state
    if is_tree:
        if len(items) == 1:
            level = tuple_items(items[0])
            if level is not None and len(level) == 1:
                level = tuple_items(level[0])
                if level is not None and len(level) == 1:
                    flat = tuple_items(level[0])
                    if flat is not None:
                        out = _flat(flat, is_map)
                        if out is not None:
                            return out
        elif len(items) == 2:
            children = tuple_items(items[0])
            if children is not None and any(is_ref(c) for c in children):
                return {"@children": children, "@first": items[1]}
        return state
    if len(items) in (1, 2):
        flat = tuple_items(items[0])
        if flat is not None:
            out = _flat(flat, is_map)
            if out is not None:
                if len(items) == 2:
                    out["@next"] = items[1]
                return out
    return state


def _flat(flat: list, is_map: bool) -> Optional[dict]:
    if not is_map:
        return {"@ks": flat}
    if len(flat) % 2:
        return None  # not a bucket ZODB writes: keep every item in the generic form
    return {"@kv": [[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)]}


# ---------------------------------------------------------------------------
# Class metadata (docs/format.md, "Class metadata")
# ---------------------------------------------------------------------------

def _name_text(v: Any) -> Optional[str]:
    if type(v) is str:
        return v
    raw = raw_bytes(v)
    if raw is not None:
        return raw.decode("latin-1")  # Python 2 str names are ASCII in practice
    return None


def class_metadata(klass: Any) -> Optional[tuple]:
    """(module, name, args) of every class pickle form ZODB has written; args None if absent.

    None when the first pickle is something else (an instance, a persistent
    reference to a class): the record is then an object record (docs/format.md,
    "Class metadata").
    """
    cls = global_name(klass)
    if cls is not None:
        return cls[0], cls[1], None
    items = tuple_items(klass)
    if items is not None and len(items) == 2:
        first, second = items
        cls = global_name(first)
        if cls is not None:
            return cls[0], cls[1], second
        inner = tuple_items(first)
        if inner is not None and len(inner) == 2:
            module, name = _name_text(inner[0]), _name_text(inner[1])
            if module is not None and name is not None:
                return module, name, second
        module, name = _name_text(first), _name_text(second)
        if module is not None and name is not None:
            return module, name, None
    return None


def check_class_names(v: Any) -> None:
    """Module and class names go into JSON verbatim: PostgreSQL must be able to store them."""
    for part in v:
        if type(part) is str and ("\x00" in part or (not part.isascii() and has_surrogate(part))):
            raise CodecError("a class module or name contains U+0000 or a lone surrogate, "
                             "which PostgreSQL cannot store")
