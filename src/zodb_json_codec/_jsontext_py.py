"""JSON text from decoded values, by the reference's two sets of rules (pure twin).

``pg_json_text``: compact, insertion order, the PostgreSQL writer's spelling
(``\\u0008``, ``1e-7``, integral floats positional) and what ``jsonb`` cannot
store rewritten (``@ns``, ``@su``, ``@f``; CONTRACT L4).  ``pretty_json_text``:
2-space indent and sorted keys, as ``pickle_to_json`` writes.  Values whose
decoder flags say nothing needs special spelling go through ``json.dumps``
(C speed); everything else through the writer below, which is normative.
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring  # the C version when available
from typing import Any, List

from ._common import (
    JSON_DEPTH_LIMIT, CodecError, b64encode, float_marker, float_text, has_surrogate, marker_kind,
)

_dumps_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                                  check_circular=False).encode

# In JSON text produced by encode_basestring, an escape is a backslash run of odd length.
_BF_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\([bf])")


def _pg_escapes(text: str) -> str:
    """The PostgreSQL writer spells U+0008 and U+000C as \\u0008 and \\u000c."""
    return _BF_ESCAPE.sub(lambda m: m.group(1) + ("\\u0008" if m.group(2) == "b" else "\\u000c"), text)


def _pg_string(s: str) -> str:
    text = encode_basestring(s)
    if "\x08" in s or "\x0c" in s:
        text = _pg_escapes(text)
    return text


# ---------------------------------------------------------------------------
# What PostgreSQL cannot store
# ---------------------------------------------------------------------------

# A lone surrogate wins over U+0000: @su carries both, @ns is plain UTF-8.

def _escaped_text(s: str) -> Any:
    if not s.isascii() and has_surrogate(s):
        return {"@su": b64encode(s.encode("utf-8", "surrogatepass"))}
    if "\x00" in s:
        return {"@ns": b64encode(s.encode("utf-8"))}
    return s


def _escaped_key(k: str) -> str:
    if not k.isascii() and has_surrogate(k):
        return "@su:" + b64encode(k.encode("utf-8", "surrogatepass"))
    if "\x00" in k:
        return "@ns:" + b64encode(k.encode("utf-8"))
    return k


def check_class_names(v: Any) -> None:
    """Module and class names go into JSON verbatim: PostgreSQL must be able to store them."""
    for part in v:
        if type(part) is str and ("\x00" in part or (not part.isascii() and has_surrogate(part))):
            raise CodecError("a class module or name contains U+0000 or a lone surrogate, "
                             "which PostgreSQL cannot store")


def sanitize_for_pg(v: Any, pg: bool = True, integral_floats: bool = False) -> Any:
    """A copy of v whose strings, keys and floats all survive a jsonb column.

    ``pg=False``: only what no JSON text can hold (NaN, infinities, lone
    surrogates), for ``pickle_to_json``.  ``integral_floats``: also floats
    from 1e16 up, for the ``decode_zodb_record_for_pg`` dict, which callers
    turn into JSON with ``json.dumps`` (``1e+16``: an integer in jsonb).
    A user dict that the rewriting would turn into a marker
    (``{"@reduce": nan}``) is written as ``@d``.
    """
    t = type(v)
    if t is str:
        if pg:
            return _escaped_text(v)
        return {"@su": b64encode(v.encode("utf-8", "surrogatepass"))} if has_surrogate(v) else v
    if t is float:
        marker = float_marker(v)
        if marker is None:
            if integral_floats and (v >= 1e16 or v <= -1e16):
                return {"@f": repr(v)}
            return v
        if marker == "-0.0" and not pg:
            return v
        return {"@f": marker}
    if t is list:
        return [sanitize_for_pg(x, pg, integral_floats) for x in v]
    if t is dict:
        if "@cls" in v and type(v["@cls"]) is list:
            check_class_names(v["@cls"])
        if len(v) == 1 and "@ref" in v and type(v["@ref"]) is list:
            check_class_names(v["@ref"])
        out = {(_escaped_key(k) if type(k) is str and (pg or has_surrogate(k)) else k):
               sanitize_for_pg(x, pg, integral_floats) for k, x in v.items()}
        if len(out) <= 4 and marker_kind(out, True) is not None and marker_kind(v, True) is None:
            return {"@d": [[k, x] for k, x in out.items()]}
        return out
    return v


# ---------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------

def _write_pg(v: Any, out: List[str], depth: int) -> None:
    t = type(v)
    if t is str:
        out.append(_pg_string(v))
    elif t is dict:
        if depth > JSON_DEPTH_LIMIT:
            raise CodecError("invalid pickle data: maximum nesting depth exceeded in JSON conversion")
        if not v:
            out.append("{}")
            return
        out.append("{")
        first = True
        for k, x in v.items():
            if not first:
                out.append(",")
            first = False
            out.append(_pg_string(k))
            out.append(":")
            _write_pg(x, out, depth + 1)
        out.append("}")
    elif t is list:
        if depth > JSON_DEPTH_LIMIT:
            raise CodecError("invalid pickle data: maximum nesting depth exceeded in JSON conversion")
        if not v:
            out.append("[]")
            return
        out.append("[")
        first = True
        for x in v:
            if not first:
                out.append(",")
            first = False
            _write_pg(x, out, depth + 1)
        out.append("]")
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif t is int:
        out.append(str(v))
    elif t is float:
        out.append(float_text(v, False, True))
    else:
        raise CodecError(f"cannot write a {t.__name__} as JSON")


def pg_json_text(state: Any, special: int) -> str:
    """The compact PostgreSQL JSON text of a decoded state.

    ``special``: decoder flags saying the state holds text or floats that
    need rewriting or special spelling; zero allows the json.dumps fast path.
    """
    if not special:
        try:
            text = _dumps_compact(state)
        except RecursionError:
            pass
        else:
            if "\\b" in text or "\\f" in text:
                text = _pg_escapes(text)
            return text
    if special & 7:  # NUL, surrogate or non-finite float somewhere
        state = sanitize_for_pg(state)
    out: List[str] = []
    _write_pg(state, out, 0)
    return "".join(out)


def _write_pretty(v: Any, out: List[str], indent: str) -> None:
    t = type(v)
    if t is str:
        out.append(encode_basestring(v))
    elif t is dict:
        if not v:
            out.append("{}")
            return
        inner = indent + "  "
        out.append("{")
        first = True
        for k in sorted(v):
            out.append("\n" + inner if first else ",\n" + inner)
            first = False
            out.append(encode_basestring(k))
            out.append(": ")
            _write_pretty(v[k], out, inner)
        out.append("\n" + indent + "}")
    elif t is list:
        if not v:
            out.append("[]")
            return
        inner = indent + "  "
        out.append("[")
        first = True
        for x in v:
            out.append("\n" + inner if first else ",\n" + inner)
            first = False
            _write_pretty(x, out, inner)
        out.append("\n" + indent + "]")
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif t is int:
        out.append(str(v))
    elif t is float:
        out.append(float_text(v, True, False))
    else:
        raise CodecError(f"cannot write a {t.__name__} as JSON")


def pretty_json_text(value: Any, special: int) -> str:
    """``pickle_to_json`` text: 2-space indent, keys sorted by code point."""
    if special & 6:  # NaN, infinities or lone surrogates: no JSON text can hold them
        value = sanitize_for_pg(value, pg=False)
    out: List[str] = []
    try:
        _write_pretty(value, out, "")
    except RecursionError:
        raise CodecError("invalid pickle data: maximum nesting depth exceeded in JSON conversion") from None
    return "".join(out)
