"""The marker vocabulary and the known-type tables: what the JSON format's markers look like.

Which dicts are markers (``marker_kind``, for the decoder that escapes user
dicts of a marker's shape and for the encoder that dispatches on them), the
escaped-key prefixes, the BTrees classes, and readers of marker shapes that
both directions share.  Which value becomes which marker is decided in
``_decode_known`` (values to markers) and ``_encode_known`` (markers to
calls); docs/format.md, "Markers", describes every one.
"""

from __future__ import annotations

import binascii
import datetime
import re
from typing import Any, Optional

from ._common import CodecError, b64decode, b64encode, has_surrogate

# ---------------------------------------------------------------------------
# Markers: one function decides what is a marker, for decoder and encoder.
# ---------------------------------------------------------------------------

_ANY = object

# Single-key markers and the type their value must have to be one.
_ONE_KEY: dict = {
    "@t": list, "@b": str, "@bi": str, "@d": list, "@set": list, "@fset": list,
    "@ref": _ANY, "@pkl": str, "@dt": str, "@date": str, "@time": str, "@td": list,
    "@dec": str, "@uuid": str, "@cls": list, "@reduce": dict, "@newobj": dict,
    "@inst": _ANY, "@ns": str, "@su": str, "@f": str,
}

# The keys an instance may have beside "@cls" (docs/format.md, "Markers"): "@s" its state, "@newobj": false
# for one made by calling the class (REDUCE), the contents of dict and list subclasses.
_INSTANCE_EXTRAS = ("@newobj", "@items", "@appends")


def _instance_shapes() -> dict:
    """Every key set of an instance: "@cls" and "@s" with any of _INSTANCE_EXTRAS, and "@cls" with some of
    them but no "@s", which the encoders refuse as the Rust codec does (so the decoder escapes user dicts
    of that shape too)."""
    shapes = {}
    for mask in range(1 << len(_INSTANCE_EXTRAS)):
        extras = {key for bit, key in enumerate(_INSTANCE_EXTRAS) if mask >> bit & 1}
        shapes[frozenset({"@cls", "@s"} | extras)] = "instance"
        if extras:
            shapes[frozenset({"@cls"} | extras)] = "instance"
    return shapes


# Multi-key shapes (as frozensets of keys) -> a name for the encoder.
_MULTI_KEY = {
    **_instance_shapes(),
    frozenset(("@dt", "@tz")): "@dt",
    frozenset(("@time", "@tz")): "@time",
    # Wrappers the reference writes inside states and reduce arguments; user
    # dicts of these shapes are escaped so they can never be misread.
    frozenset(("@args", "@state")): "wrapper",
    frozenset(("@obj", "@state")): "wrapper",
    frozenset(("@callable", "@args", "@state")): "wrapper",
    frozenset(("@args", "@kwargs")): "wrapper",
}

#: The most keys a marker has (an instance with all of _INSTANCE_EXTRAS).
MAX_MARKER_KEYS = 5

# BTree state shapes, markers only as the state of a BTree-family object.
_BTREE_KEYS = {
    frozenset(("@kv",)): "@kv", frozenset(("@ks",)): "@ks",
    frozenset(("@kv", "@next")): "@kv", frozenset(("@ks", "@next")): "@ks",
    frozenset(("@children", "@first")): "@children",
}

# Prefixes of keys that stand for a key text PostgreSQL cannot store.
ESCAPED_KEY_PREFIXES = ("@ns:", "@su:")


def _is_cls_value(v: Any) -> bool:
    return type(v) is list and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], str)


def marker_kind(d: dict, btree: bool = False) -> Optional[str]:
    """The marker a dict stands for, or None for a plain dict.

    Decoder and encoder both call this: the decoder writes any user dict for
    which it returns a kind in the ``@d`` pair form, so that the encoder,
    which dispatches on it, reads every decoded dict back as what it was.
    """
    n = len(d)
    if n == 0 or n > MAX_MARKER_KEYS:
        return None
    if n == 1:
        for key in d:
            break
        if type(key) is not str or key[:1] != "@":
            return None
        want = _ONE_KEY.get(key)
        if want is None:
            if btree and key in ("@kv", "@ks"):
                return key if type(d[key]) is list else None
            return None
        value = d[key]
        if want is _ANY:
            return key
        if key == "@cls":
            return key if _is_cls_value(value) else None
        return key if isinstance(value, want) else None
    for key in d:
        if type(key) is not str or key[:1] != "@":
            return None
    keys = frozenset(d)
    kind = _MULTI_KEY.get(keys)
    if kind == "instance":
        return kind if _is_cls_value(d["@cls"]) else None
    if kind in ("@dt", "@time"):
        return kind if isinstance(d[kind], str) and isinstance(d["@tz"], dict) else None
    if kind is None and btree:
        return _BTREE_KEYS.get(keys)
    return kind


def unescape_key(key: str) -> Optional[str]:
    """The key text an ``@ns:``/``@su:`` key stands for, or None if it is a plain key.

    Only a key a decoder could have written counts (docs/format.md, "Escaped
    keys"): ``@ns:`` and base64 of strict UTF-8 holding U+0000 or starting
    with an escape prefix itself (the Rust codec 1.7.0 writes both),
    ``@su:`` and base64 of UTF-8 holding a lone surrogate.
    """
    prefix = key[:4]
    if prefix not in ESCAPED_KEY_PREFIXES:
        return None
    try:
        raw = b64decode(key[4:], "key")
        if prefix == "@ns:":
            text = raw.decode("utf-8")
            return text if "\x00" in text or text[:4] in ESCAPED_KEY_PREFIXES else None
        text = raw.decode("utf-8", "surrogatepass")
        return text if has_surrogate(text) else None
    except (CodecError, UnicodeDecodeError):
        return None


def escaped_key(key: str, pg: bool) -> str:
    """The key as the decoders write it (docs/format.md, "Escaped keys"): a key that would read back as an
    escape, and in the PostgreSQL variants one with U+0000 or a lone surrogate, as ``@ns:``/``@su:`` and
    base64; any other key itself."""
    if key[:4] in ESCAPED_KEY_PREFIXES:
        if key[:4] == "@su:" and unescape_key(key) is None:
            return key  # reads back as itself (the Rust codec 1.7.0 writes it plain too)
    elif not (pg and ("\x00" in key or has_surrogate(key))):
        return key
    if has_surrogate(key):
        return "@su:" + b64encode(key.encode("utf-8", "surrogatepass"))
    return "@ns:" + b64encode(key.encode("utf-8"))


# ---------------------------------------------------------------------------
# Known classes: the BTrees family (docs/format.md, "BTrees")
# ---------------------------------------------------------------------------

def btree_kind(module: str, name: str) -> Optional[tuple]:
    """(is_tree, is_map) for a BTrees class, or None for any other class."""
    if not module.startswith("BTrees.") or module == "BTrees.Length":
        return None
    if name.endswith("BTree"):
        return (True, True)
    if name.endswith("Bucket"):
        return (False, True)
    if name.endswith("TreeSet"):
        return (True, False)
    if name.endswith("Set"):
        return (False, False)
    return None


# ---------------------------------------------------------------------------
# Readers of marker shapes
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


def is_oid_hex(text: str) -> bool:
    """Is this text the 16 hex digits of an 8-byte oid (the first item of a compact ``@ref``)?"""
    return len(text) == 16 and _HEX.match(text) is not None


def is_object_record_state(state: Any) -> bool:
    """``{"@obj": first pickle, "@state": state}``: with the class ``["", ""]``, the state of a
    record whose first pickle is not class metadata, written back as two pickles."""
    return type(state) is dict and len(state) == 2 and "@obj" in state and "@state" in state


# ---------------------------------------------------------------------------
# Values that exist (docs/format.md, "Values that exist"): what a marker may stand for.  The encoders refuse
# a marker of anything else; the decoders keep a pickle of anything else in the generic form.
# ---------------------------------------------------------------------------

_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

#: timedelta's limit on its days once normalised (datetime.timedelta.max.days).
TIMEDELTA_MAX_DAYS = 999999999

#: The most seconds either way of a UTC offset (datetime.timezone: strictly under 24 hours).
OFFSET_MAX_SECONDS = 86399


def month_days(year: int, month: int) -> int:
    """The days of a month of the proleptic Gregorian calendar (datetime's)."""
    if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        return 29
    return _MONTH_DAYS[month - 1]


def date_exists(year: int, month: int, day: int) -> bool:
    """A date of datetime's calendar: year 1-9999, month 1-12, a day of that month."""
    return 1 <= year <= 9999 and 1 <= month <= 12 and (1 <= day <= 28 or 1 <= day <= month_days(year, month))


def timedelta_exists(parts: Any) -> bool:
    """Does ``datetime.timedelta(*parts)`` take these ints (its days, once normalised, in range)?"""
    try:
        datetime.timedelta(*parts)
    except OverflowError:
        return False
    return True


_decimal_context: Any = None
# The numbers the C twins read themselves (_datetext.decimal_text): a sign, digits, one "." and an exponent
# of up to 9 digits (decimal's own limit is 18), or Inf, Infinity, NaN and sNaN with digits.
_PLAIN_DECIMAL = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,9})?"
                            r"|(?i:inf|infinity|s?nan[0-9]*))\Z")


def decimal_reads(text: str) -> bool:
    """Does ``decimal.Decimal`` read this text (whatever the caller's context traps)?  decimal is imported at
    the first text that is not a plain number."""
    global _decimal_context
    if _PLAIN_DECIMAL.match(text):
        return True
    import decimal

    if _decimal_context is None:
        _decimal_context = decimal.Context(traps=[decimal.InvalidOperation])
    try:
        decimal.Decimal(text, _decimal_context)
    except decimal.InvalidOperation:
        return False
    return True
