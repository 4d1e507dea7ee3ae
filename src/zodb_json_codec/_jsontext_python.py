"""JSON text from decoded values, by the Rust codec's two sets of rules (Python twin).

``pg_json_text``: compact, insertion order, the PostgreSQL writer's spelling
(``\\u0008``, ``1e-7``, integral floats positional) and what ``jsonb`` cannot
store rewritten (``@ns``, ``@su``, ``@f``; docs/format.md, "JSON text").  ``pretty_json_text``:
2-space indent and sorted keys, as ``pickle_to_json`` writes.  Values whose
decoder flags say nothing needs special spelling, and which are shallow
enough for its recursion, go through ``json.dumps`` (C speed); everything
else through the writers below, which are normative.  Nothing here recurses:
values are walked with explicit stacks.
"""

from __future__ import annotations

import gc
import json
import json.encoder
import re
from json.encoder import encode_basestring  # the C version when available
from typing import Any, List, Optional

from ._common import (
    JSON_DEPTH_LIMIT, STDLIB_JSON_DEPTH, CodecError, b64encode, float_marker, float_text, has_surrogate,
    rebuild_tree,
)
from ._decode_common import F_EXP_FLOAT, F_FLOAT, F_NUL, F_SURROGATE  # noqa: F401 (F_EXP_FLOAT: for _jsontext_cython)
from ._decode_known import check_class_names
from ._known import MAX_MARKER_KEYS, marker_kind

_dumps_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                                  check_circular=False).encode

# Where json.dumps is not compiled (PyPy), the writer below is as fast.
_C_DUMPS = getattr(json.encoder, "c_make_encoder", None) is not None
_referents = gc.get_referents

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

def _escaped_text(s: str, surrogates: bool = True) -> Any:
    if surrogates and not s.isascii() and has_surrogate(s):
        return {"@su": b64encode(s.encode("utf-8", "surrogatepass"))}
    if "\x00" in s:
        return {"@ns": b64encode(s.encode("utf-8"))}
    return s


def _escaped_key(k: str, surrogates: bool = True) -> str:
    if surrogates and not k.isascii() and has_surrogate(k):
        return "@su:" + b64encode(k.encode("utf-8", "surrogatepass"))
    if "\x00" in k:
        return "@ns:" + b64encode(k.encode("utf-8"))
    return k


def _sanitized_leaf(v: Any, pg: bool, integral_floats: bool, surrogates: bool) -> Any:
    t = type(v)
    if t is str:
        if pg:
            return _escaped_text(v, surrogates)
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
    return v


def _sanitized_dict(original: dict, out: dict) -> dict:
    if "@cls" in original and type(original["@cls"]) is list:
        check_class_names(original["@cls"])
    if len(original) == 1 and "@ref" in original and type(original["@ref"]) is list:
        check_class_names(original["@ref"])
    if len(out) <= MAX_MARKER_KEYS and marker_kind(out, True) is not None and marker_kind(original, True) is None:
        return {"@d": [[k, x] for k, x in out.items()]}
    return out


def sanitize_for_pg(v: Any, pg: bool = True, integral_floats: bool = False, surrogates: bool = True) -> Any:
    """A copy of v whose strings, keys and floats all survive a jsonb column.

    ``pg=False``: only what no JSON text can hold (NaN, infinities, lone
    surrogates), for ``pickle_to_json``.  ``integral_floats``: also floats
    from 1e16 up, for the ``decode_zodb_record_for_pg`` dict, which callers
    turn into JSON with ``json.dumps`` (``1e+16``: an integer in jsonb).
    A user dict that the rewriting would turn into a marker
    (``{"@reduce": nan}``) is written as ``@d``.  ``surrogates=False``: the
    decoder's flags say no text holds a lone surrogate, so none is looked for.
    """
    if pg:
        key: Any = _escaped_key_or_same if surrogates else _nul_key_or_same
    else:
        key = _surrogate_key_or_same
    return rebuild_tree(v, lambda x: _sanitized_leaf(x, pg, integral_floats, surrogates), key, _sanitized_dict)


def _escaped_key_or_same(k: Any) -> Any:
    return _escaped_key(k) if type(k) is str else k


def _nul_key_or_same(k: Any) -> Any:
    return _escaped_key(k, False) if type(k) is str else k


def _surrogate_key_or_same(k: Any) -> Any:
    return _escaped_key(k) if type(k) is str and has_surrogate(k) else k


# ---------------------------------------------------------------------------
# Writers: an explicit stack of (iterator, is_dict, closing text) frames, so
# that any depth up to JSON_DEPTH_LIMIT is written without recursion.  Each
# item is followed by "," and a container's last "," becomes its closing text.
# ---------------------------------------------------------------------------

def _depth_error() -> CodecError:
    return CodecError("invalid pickle data: maximum nesting depth exceeded in JSON conversion")


def _scalar_text(v: Any, plus_exponent: bool, positional_integers: bool) -> str:
    """JSON text of None, a bool or a float (floats spelled as ``float_text`` says)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is float:
        return float_text(v, plus_exponent, positional_integers)
    raise CodecError(f"cannot write a {type(v).__name__} as JSON")


def _empty_text(v: Any, t: type, depth: int) -> Optional[str]:
    """The text of an empty dict or list, None for one to open; past the depth limit, the error."""
    if depth > JSON_DEPTH_LIMIT:
        raise _depth_error()
    return None if v else ("{}" if t is dict else "[]")


def _write_pg(root: Any, out: List[str]) -> None:
    ap = out.append
    stack: list = []
    it: Any = iter((root,))
    is_dict = False
    close = ""
    while True:
        for v in it:
            if is_dict:
                k, v = v
                ap(_pg_string(k) + ":")
            t = type(v)
            if t is str:
                ap(_pg_string(v))
            elif t is dict or t is list:
                empty = _empty_text(v, t, len(stack))
                if empty is not None:
                    ap(empty)
                else:
                    stack.append((it, is_dict, close))
                    if t is dict:
                        ap("{")
                        it, is_dict, close = iter(v.items()), True, "}"
                    else:
                        ap("[")
                        it, is_dict, close = iter(v), False, "]"
                    break
            elif t is int:
                ap(str(v))
            elif v is None:  # the scalars inline: a call each costs PyPy 5-10% on the public corpus
                ap("null")
            elif v is True:
                ap("true")
            elif v is False:
                ap("false")
            elif t is float:
                ap(float_text(v, False, True))
            else:
                raise CodecError(f"cannot write a {t.__name__} as JSON")
            ap(",")
        else:
            if not stack:
                out.pop()  # the root's ","
                return
            out[-1] = close
            it, is_dict, close = stack.pop()
            ap(",")


def _has_depth_within(value: Any, levels: int) -> bool:
    """Are lists and dicts nested at most ``levels`` deep in value (one more if the innermost are empty)?

    Measured level by level at C speed: gc.get_referents of a list gives its
    items, of a dict its values (and keys), everything json.dumps descends into.
    """
    level = [value]
    for _ in range(levels + 1):  # round n gives what is n levels down; scalars have no referents
        level = _referents(*level)
        if not level:
            return True
    return False


# Decoder flags of what jsonb cannot store (U+0000, lone surrogates, NaN,
# infinities, -0.0): the state is rewritten with markers before writing.
_PG_REWRITE = F_NUL | F_SURROGATE | F_FLOAT


def pg_json_text(state: Any, special: int, shallow: bool = False) -> str:
    """The compact PostgreSQL JSON text of a decoded state.

    ``special``: decoder flags saying the state holds text or floats that
    need rewriting or special spelling; zero allows the json.dumps fast path,
    taken only where json.dumps is compiled and the state is known to be
    shallow (``shallow``: the decoder counted few enough containers) or is
    measured to be: json.dumps recurses, within the interpreter's limit.
    """
    if not special and _C_DUMPS and (shallow or _has_depth_within(state, STDLIB_JSON_DEPTH)):
        text = _dumps_compact(state)
        if "\\b" in text or "\\f" in text:
            text = _pg_escapes(text)
        return text
    if special & _PG_REWRITE:
        state = sanitize_for_pg(state, surrogates=bool(special & F_SURROGATE))
    out: List[str] = []
    _write_pg(state, out)
    return "".join(out)


def _write_pretty(root: Any, out: List[str]) -> None:
    """Indented text (2 spaces, keys sorted) from a work list of texts to write and
    (value, indentation) pairs to expand: no recursion, whatever the depth."""
    ap = out.append
    work: list = [(root, "\n")]
    while work:
        item = work.pop()
        if type(item) is str:
            ap(item)
            continue
        v, indent = item
        t = type(v)
        if t is str:
            ap(encode_basestring(v))
        elif t is dict or t is list:
            empty = _empty_text(v, t, len(indent) // 2)  # the containers open around v
            if empty is not None:
                ap(empty)
                continue
            inner = indent + "  "
            if t is dict:
                ap("{")
                work.append(indent + "}")
                keys = sorted(v)
                for i in range(len(keys) - 1, -1, -1):  # pushed last to first: written first to last
                    work.append((v[keys[i]], inner))
                    work.append(("," if i else "") + inner + encode_basestring(keys[i]) + ": ")
            else:
                ap("[")
                work.append(indent + "]")
                for i in range(len(v) - 1, -1, -1):
                    work.append((v[i], inner))
                    work.append(("," if i else "") + inner)
        elif t is int:
            ap(str(v))
        else:
            ap(_scalar_text(v, True, False))


# Decoder flags of what no JSON text can hold (lone surrogates, NaN,
# infinities; -0.0 is among F_FLOAT's floats, and kept as it is).
_NO_JSON_TEXT = F_SURROGATE | F_FLOAT


def pretty_json_text(value: Any, special: int) -> str:
    """``pickle_to_json`` text: 2-space indent, keys sorted by code point."""
    if special & _NO_JSON_TEXT:
        value = sanitize_for_pg(value, pg=False)
    out: List[str] = []
    _write_pretty(value, out)
    return "".join(out)
