"""Encoding rules for known types: compact markers become calls the encoder writes.

The markers ``_decode_known`` writes (``@dt``, ``@tz``, ``@dec``, ``@uuid``...)
and native Python values of the same types, parsed into ``Call``
descriptions (a callable and its arguments) that both encoder twins write
as GLOBAL/REDUCE opcodes (docs/format.md, "Markers").
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Optional

from ._common import CodecError
from ._known import OFFSET_MAX_SECONDS, TIMEDELTA_MAX_DAYS, decimal_reads, month_days, timedelta_exists

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

# Values that exist (docs/format.md, "Values that exist"): a marker's fields are checked against the ranges of
# the type it stands for, so that no encoder writes a record that fails (or loads as an impossible value) only
# when ZODB reads it.  The Cython twin writes the values these rules take and hands every other text here.

def _out_of_range(marker: str, part: str, value: int, allowed: str, text: str) -> CodecError:
    return CodecError(f"invalid pickle data: {marker} {part} {value} is out of range ({allowed}): {text[:60]!r}")


def _date_state(marker: str, text: str, year: int, month: int, day: int) -> bytes:
    """The 4 state bytes of a date that exists: year 1-9999, month 1-12, a day of that month."""
    if not 1 <= year <= 9999:
        raise _out_of_range(marker, "year", year, "1-9999", text)
    if not 1 <= month <= 12:
        raise _out_of_range(marker, "month", month, "1-12", text)
    if not 1 <= day <= 28:
        last = month_days(year, month)
        if not 1 <= day <= last:
            raise _out_of_range(marker, "day", day, f"1-{last} in {year:04d}-{month:02d}", text)
    return bytes((year >> 8, year & 255, month, day))


def _clock_state(marker: str, text: str, hour: int, minute: int, second: int, us: int) -> bytes:
    """The 6 state bytes of a time of day: hour 0-23, minute and second 0-59 (us is under 10**6)."""
    if hour > 23:
        raise _out_of_range(marker, "hour", hour, "0-23", text)
    if minute > 59:
        raise _out_of_range(marker, "minute", minute, "0-59", text)
    if second > 59:
        raise _out_of_range(marker, "second", second, "0-59", text)
    return bytes((hour, minute, second, us >> 16 & 255, us >> 8 & 255, us & 255))


def _fraction(text: Optional[str]) -> int:
    if not text:
        return 0
    return int((text[:6]).ljust(6, "0"))


def _offset_us(marker: str, text: str, whole: str) -> Optional[int]:
    """The microseconds of an offset ``[+-]HH:MM[:SS[.ffffff]]`` or ``Z`` (None: no offset): under 24 hours."""
    if not text:
        return None
    if text == "Z":
        return 0
    m = _OFFSET.match(text)
    if m is None:
        raise CodecError(f"invalid pickle data: {marker} offset is not [+-]HH:MM[:SS[.ffffff]] or Z: {whole[:60]!r}")
    sign, hh, mm, ss, frac = m.groups()
    hours, minutes, seconds = int(hh), int(mm), int(ss or 0)
    if hours > 23:
        raise _out_of_range(marker, "offset hours", hours, "0-23: under 24 hours", whole)
    if minutes > 59:
        raise _out_of_range(marker, "offset minutes", minutes, "0-59", whole)
    if seconds > 59:
        raise _out_of_range(marker, "offset seconds", seconds, "0-59", whole)
    total = ((hours * 60 + minutes) * 60 + seconds) * 1000000 + _fraction(frac)
    return -total if sign == "-" else total


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
            for i in (1, 2):  # pytz._p(zone, utcoffset, dstoffset, tzname): offsets in seconds
                if i < len(args) and type(args[i]) is int and not -OFFSET_MAX_SECONDS <= args[i] <= OFFSET_MAX_SECONDS:
                    what = "utcoffset" if i == 1 else "dstoffset"
                    raise CodecError(f"invalid pickle data: @tz pytz {what} is out of range (under 24 hours, "
                                     f"-86399 to 86399 seconds) in {whole[:60]!r}")
            return Call(Global("pytz", "_p"), list(args))
        if set(tz) == {"zoneinfo"} and type(tz["zoneinfo"]) is str:
            return zoneinfo_call(tz["zoneinfo"])
    raise CodecError(f"invalid pickle data: unrecognized @tz format in {whole[:60]!r}")


def zoneinfo_call(key: str) -> Call:
    unpickle = Call(Global("builtins", "getattr"), [Global("zoneinfo", "ZoneInfo"), "_unpickle"])
    return Call(unpickle, [key, 1])


def _with_zone(marker: str, state: bytes, tz: Any, offset_text: str, whole: str) -> list:
    """Constructor arguments: the state bytes, then the zone (``@tz`` wins over an offset)."""
    if tz is not None:
        return [state, tz_call(tz, whole)]
    offset = _offset_us(marker, offset_text, whole)
    return [state] if offset is None else [state, timezone_call(offset)]


def _matched(pattern: Any, text: Any, marker: str, what: str) -> Any:
    """The match of a marker's text, or the CodecError that names the marker."""
    if type(text) is not str:
        raise CodecError(f"invalid pickle data: {marker} must be a string")
    m = pattern.match(text)
    if m is None:
        raise CodecError(f"invalid pickle data: {marker} is not {what}: {text[:60]!r}")
    return m


def datetime_call(text: Any, tz: Any = None) -> Call:
    m = _matched(_DATETIME, text, "@dt", "a datetime")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    state = (_date_state("@dt", text, year, month, day)
             + _clock_state("@dt", text, hour, minute, second, _fraction(m.group(7))))
    return Call(Global("datetime", "datetime"), _with_zone("@dt", state, tz, m.group(8), text))


def time_call(text: Any, tz: Any = None) -> Call:
    m = _matched(_TIME, text, "@time", "a time")
    hour, minute, second = (int(g) for g in m.groups()[:3])
    state = _clock_state("@time", text, hour, minute, second, _fraction(m.group(4)))
    return Call(Global("datetime", "time"), _with_zone("@time", state, tz, m.group(5), text))


def date_call(text: Any) -> Call:
    if type(text) is not str:
        raise CodecError("invalid pickle data: @date must be a string")
    m = _DATE.match(text[:10]) if len(text) >= 10 else _DATE.match(text)
    if m is None:
        raise CodecError(f"invalid pickle data: @date is not a date: {text[:60]!r}")
    year, month, day = (int(g) for g in m.groups())
    return Call(Global("datetime", "date"), [_date_state("@date", text, year, month, day)])


def timedelta_call(parts: Any) -> Call:
    if type(parts) is not list or len(parts) != 3:
        raise CodecError("invalid pickle data: @td must have 3 elements")
    for i, p in enumerate(parts):
        if type(p) is not int:
            raise CodecError(f"invalid pickle data: @td[{i}] must be int")
    if not timedelta_exists(parts):
        raise CodecError(f"invalid pickle data: @td days are out of range (at most {TIMEDELTA_MAX_DAYS} "
                         "either way once seconds and microseconds are carried into them)") from None
    return Call(Global("datetime", "timedelta"), list(parts))


def decimal_call(text: Any) -> Call:
    if type(text) is not str:
        raise CodecError("invalid pickle data: @dec must be a string")
    if not decimal_reads(text):
        raise CodecError(f"invalid pickle data: @dec is not a number decimal.Decimal reads: {text[:60]!r}")
    return Call(Global("decimal", "Decimal"), [text])


def uuid_int(text: Any) -> int:
    if type(text) is not str:
        raise CodecError("invalid pickle data: @uuid must be a string")
    digits = text.replace("-", "")
    if len(digits) != 32:
        raise CodecError(f"invalid pickle data: @uuid is not 32 hex digits: {text[:60]!r}")
    try:
        return int(digits, 16)
    except ValueError:
        raise CodecError(f"invalid pickle data: @uuid is not 32 hex digits: {text[:60]!r}") from None


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
