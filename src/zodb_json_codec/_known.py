"""Known types, BTree states and class metadata, in both directions, shared by both twins.

Decoding side: functions that look at values the decoder built (``{"@t":
[...]}``, ``{"@b": ...}``, objects under construction) and return the
compact marker (``@dt``, ``@dec``, ``@kv``...), or None when the shape is not
exactly one that round-trips, so the generic form is kept (REFERENCE 4, 6;
CONTRACT L7).  Encoding side: the same markers parsed back into ``Call``
descriptions (a callable and its arguments) that the encoder writes as
GLOBAL/REDUCE opcodes.
"""

from __future__ import annotations

import binascii
import datetime as _dt
import re
from typing import Any, Optional

from ._common import CodecError, I64_MAX, I64_MIN

# ---------------------------------------------------------------------------
# Small helpers on decoded values
# ---------------------------------------------------------------------------


def tuple_items(v: Any) -> Optional[list]:
    if type(v) is dict and len(v) == 1 and type(v.get("@t")) is list:
        return v["@t"]
    return None


# A hostile pickle can build a one-key dict such as {"@cls": 5} (only dicts
# of a marker's exact shape are rewritten as @d), so shapes are checked fully.

def raw_bytes(v: Any) -> Optional[bytes]:
    if type(v) is dict and len(v) == 1 and type(v.get("@b")) is str:
        return binascii.a2b_base64(v["@b"])
    return None


def global_name(v: Any) -> Optional[tuple]:
    """(module, name) of a ``{"@cls": [module, name]}`` made by GLOBAL or STACK_GLOBAL, else None."""
    if type(v) is dict and len(v) == 1 and "@cls" in v:
        names = v["@cls"]
        if type(names) is list and len(names) == 2 and type(names[0]) is str and type(names[1]) is str:
            return names[0], names[1]
    return None


def is_ref(v: Any) -> bool:
    return type(v) is dict and len(v) == 1 and "@ref" in v


_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*\Z")


def is_hex(text: str) -> bool:
    """Would this text read back as a hex oid?"""
    return _HEX.match(text) is not None


def _plain_text(s: Any) -> bool:
    """Text that goes into a marker verbatim must need no PostgreSQL escaping."""
    return type(s) is str and s.isascii() and "\x00" not in s


def _is_int(v: Any) -> bool:
    return type(v) is int


# ---------------------------------------------------------------------------
# Decoding: REDUCE results -> known-type markers
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
            if len(items) == 3 and all(_is_int(x) for x in items):
                return {"@td": list(items)}
        return None
    if module == "decimal" and name == "Decimal":
        if len(items) == 1 and _plain_text(items[0]):
            return {"@dec": items[0]}
        return None
    if module == "builtins" and name in ("set", "frozenset"):
        if len(items) == 1 and type(items[0]) is list:
            return {"@set" if name == "set" else "@fset": items[0]}
    return None


def _datetime_marker(items: list, objs: dict) -> Optional[dict]:
    if len(items) not in (1, 2):
        return None
    raw = raw_bytes(items[0])
    if raw is None or len(raw) != 10:
        return None
    year = raw[0] << 8 | raw[1]
    month, day, hour, minute, second = raw[2], raw[3], raw[4], raw[5], raw[6]
    us = raw[7] << 16 | raw[8] << 8 | raw[9]
    if not (1 <= year and 1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60
            and second < 60 and us < 1000000):
        return None  # includes the protocol 4 fold bit (month >= 128): keep the raw bytes
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
    if us:
        text += f".{us:06d}"
    return _with_tz("@dt", text, items, objs)


def _time_marker(items: list, objs: dict) -> Optional[dict]:
    if len(items) not in (1, 2):
        return None
    raw = raw_bytes(items[0])
    if raw is None or len(raw) != 6:
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
    if not (1 <= year and 1 <= month <= 12 and 1 <= day <= 31):
        return None
    return {"@date": f"{year:04d}-{month:02d}-{day:02d}"}


def _pending_call(v: Any, objs: dict) -> Optional[tuple]:
    """(callable, args items) of an unbuilt REDUCE result."""
    if type(v) is not dict:
        return None
    obj = objs.get(id(v))
    if obj is None or obj.value is not v or obj.kind != 0 or obj.built or obj.items or obj.appends:
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
    """``+HH:MM``, with ``:SS`` and ``.ffffff`` only when present (CONTRACT L7)."""
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
# BTree states (REFERENCE 6.2)
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
# Class metadata (REFERENCE 5.1, CONTRACT L1)
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


def is_object_record_state(state: Any) -> bool:
    """``{"@obj": first pickle, "@state": state}``: with the class ``["", ""]``, the state of a
    record whose first pickle is not class metadata, written back as two pickles."""
    return type(state) is dict and len(state) == 2 and "@obj" in state and "@state" in state


# ---------------------------------------------------------------------------
# Encoding: markers -> calls
# ---------------------------------------------------------------------------

class Global:
    """A class or function by name, written as GLOBAL."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name


class Call:
    """``callable(*args)``, written as callable, args tuple, REDUCE.

    The arguments are calls, globals, str, bytes and ints: a call is one
    value, written without walking anything nested.
    """

    __slots__ = ("callable", "args")

    def __init__(self, callable_: Any, args: list) -> None:
        self.callable = callable_
        self.args = args


_DATETIME = re.compile(r"(\d{1,5})-(\d{1,3})-(\d{1,3})T(\d{1,3}):(\d{1,3}):(\d{1,3})(?:\.(\d*))?(.*)\Z", re.S)
_TIME = re.compile(r"(\d{1,3}):(\d{1,3}):(\d{1,3})(?:\.(\d*))?(.*)\Z", re.S)
_DATE = re.compile(r"(\d{1,5})-(\d{1,3})-(\d{1,3})\Z")
_OFFSET = re.compile(r"([+-])(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?\Z")


def _fraction(text: Optional[str]) -> int:
    if not text:
        return 0
    return int((text[:6]).ljust(6, "0"))


def _offset_us(text: str, whole: str) -> Optional[int]:
    if not text:
        return None
    if text == "Z":
        return 0
    m = _OFFSET.match(text)
    if m is None:
        raise CodecError(f"invalid pickle data: bad offset: {whole[:60]!r}")
    sign, hh, mm, ss, frac = m.groups()
    total = ((int(hh) * 60 + int(mm)) * 60 + int(ss or 0)) * 1000000 + _fraction(frac)
    return -total if sign == "-" else total


def _byte(value: int, what: str, whole: str) -> int:
    if not 0 <= value <= 255:
        raise CodecError(f"invalid pickle data: bad {what}: {whole[:60]!r}")
    return value


def _us_bytes(us: int) -> bytes:
    return bytes((us >> 16 & 255, us >> 8 & 255, us & 255))


def timezone_call(total_us: int) -> Call:
    td = _dt.timedelta(microseconds=total_us)
    return Call(Global("datetime", "timezone"),
                [Call(Global("datetime", "timedelta"), [td.days, td.seconds, td.microseconds])])



def tz_call(tz: Any, whole: str) -> Call:
    """The call that recreates an ``@tz`` zone."""
    if type(tz) is dict:
        if set(tz) == {"pytz", "name"} and type(tz["pytz"]) is list and tz["pytz"]:
            args = tz["pytz"]
            for a in args:
                if type(a) is not str and not (type(a) is int):
                    raise CodecError("invalid pickle data: unsupported pytz arg")
            return Call(Global("pytz", "_p"), list(args))
        if set(tz) == {"zoneinfo"} and type(tz["zoneinfo"]) is str:
            return zoneinfo_call(tz["zoneinfo"])
    raise CodecError(f"invalid pickle data: unrecognized @tz format in {whole[:60]!r}")


def zoneinfo_call(key: str) -> Call:
    unpickle = Call(Global("builtins", "getattr"), [Global("zoneinfo", "ZoneInfo"), "_unpickle"])
    return Call(unpickle, [key, 1])


def _with_zone(state: bytes, tz: Any, offset_text: str, whole: str) -> list:
    """Constructor arguments: the state bytes, then the zone (``@tz`` wins over an offset)."""
    if tz is not None:
        return [state, tz_call(tz, whole)]
    offset = _offset_us(offset_text, whole)
    return [state] if offset is None else [state, timezone_call(offset)]


def datetime_call(text: Any, tz: Any = None) -> Call:
    if type(text) is not str:
        raise CodecError("invalid pickle data: @dt must be a string")
    m = _DATETIME.match(text)
    if m is None:
        raise CodecError(f"invalid pickle data: bad datetime: {text[:60]!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    us = _fraction(m.group(7))
    if not 0 <= year <= 65535:
        raise CodecError(f"invalid pickle data: bad year: {text[:60]!r}")
    state = bytes((year >> 8, year & 255, _byte(month, "month", text), _byte(day, "day", text),
                   _byte(hour, "hour", text), _byte(minute, "minute", text),
                   _byte(second, "second", text))) + _us_bytes(us)
    return Call(Global("datetime", "datetime"), _with_zone(state, tz, m.group(8), text))


def time_call(text: Any, tz: Any = None) -> Call:
    if type(text) is not str:
        raise CodecError("invalid pickle data: @time must be a string")
    m = _TIME.match(text)
    if m is None:
        raise CodecError(f"invalid pickle data: bad time: {text[:60]!r}")
    hour, minute, second = (int(g) for g in m.groups()[:3])
    us = _fraction(m.group(4))
    state = bytes((_byte(hour, "hour", text), _byte(minute, "minute", text),
                   _byte(second, "second", text))) + _us_bytes(us)
    return Call(Global("datetime", "time"), _with_zone(state, tz, m.group(5), text))


def date_call(text: Any) -> Call:
    if type(text) is not str:
        raise CodecError("invalid pickle data: @date must be a string")
    m = _DATE.match(text[:10]) if len(text) >= 10 else _DATE.match(text)
    if m is None:
        raise CodecError(f"invalid pickle data: invalid date: {text[:60]!r}")
    year, month, day = (int(g) for g in m.groups())
    if not 0 <= year <= 65535:
        raise CodecError(f"invalid pickle data: invalid year in date: {text[:60]!r}")
    state = bytes((year >> 8, year & 255, _byte(month, "month", text), _byte(day, "day", text)))
    return Call(Global("datetime", "date"), [state])


def timedelta_call(parts: Any) -> Call:
    if type(parts) is not list or len(parts) != 3:
        raise CodecError("invalid pickle data: @td must have 3 elements")
    for i, p in enumerate(parts):
        if type(p) is not int:
            raise CodecError(f"invalid pickle data: @td[{i}] must be int")
    return Call(Global("datetime", "timedelta"), list(parts))


def decimal_call(text: Any) -> Call:
    if type(text) is not str:
        raise CodecError("invalid pickle data: @dec must be a string")
    return Call(Global("decimal", "Decimal"), [text])


def uuid_int(text: Any) -> int:
    if type(text) is not str:
        raise CodecError("invalid pickle data: @uuid must be a string")
    digits = text.replace("-", "")
    if len(digits) != 32:
        raise CodecError(f"invalid pickle data: invalid UUID: {text[:60]!r}")
    try:
        return int(digits, 16)
    except ValueError:
        raise CodecError(f"invalid pickle data: invalid UUID hex: {text[:60]!r}") from None


def native_call(value: Any) -> Optional[Any]:
    """A Call (or ``("uuid", int)``) for a native Python value of a known type, else None."""
    t = type(value)
    if t is _dt.datetime or t is _dt.time:
        state = value.__reduce__()[1][0]
        args: list = [state]
        if value.tzinfo is not None:
            args.append(native_tz_call(value.tzinfo))
        return Call(Global("datetime", "datetime" if t is _dt.datetime else "time"), args)
    if t is _dt.date:
        return Call(Global("datetime", "date"), [value.__reduce__()[1][0]])
    if t is _dt.timedelta:
        return Call(Global("datetime", "timedelta"), [value.days, value.seconds, value.microseconds])
    if t is _dt.timezone:
        return native_tz_call(value)
    module = t.__module__
    if module == "decimal" and t.__name__ == "Decimal":
        return Call(Global("decimal", "Decimal"), [str(value)])
    if module == "uuid" and t.__name__ == "UUID":
        return ("uuid", value.int)
    return None


def native_tz_call(tz: Any) -> Call:
    t = type(tz)
    if t is _dt.timezone:
        args = tz.__getinitargs__()
        offset = args[0]
        call = timezone_call(offset.days * 86400000000 + offset.seconds * 1000000 + offset.microseconds)
        if len(args) > 1:
            call.args.append(str(args[1]))
        return call
    module = t.__module__ or ""
    if module.startswith("pytz"):
        reduced = tz.__reduce__()
        func, args = reduced[0], list(reduced[1])
        if not all(type(a) is str or type(a) is int for a in args):  # pytz's zones: names and offsets
            raise TypeError(f"cannot encode tzinfo of type {t.__module__}.{t.__qualname__} "
                            "(its pickle arguments are not text and integers)")
        return Call(Global(func.__module__, func.__name__), args)
    if module == "zoneinfo" and t.__name__ == "ZoneInfo":
        if tz.key is None:
            raise TypeError("cannot encode a ZoneInfo made from a file (it has no key)")
        return zoneinfo_call(tz.key)
    raise TypeError(f"cannot encode tzinfo of type {t.__module__}.{t.__qualname__}")
