"""Basics every module may use: the error type, limits, argument checks, base64, number text.

It imports nothing of the package.  What the markers are lives in ``_known``;
which value becomes which marker in ``_decode_known`` and back in
``_encode_known`` (docs/design.md, "Module layout").
"""

from __future__ import annotations

import binascii
import math
import re
from typing import Any, Dict, Optional

#: Values nested deeper than this are a ValueError in every direction.
MAX_DEPTH = 1000

#: The compiled twin's walks recurse in C at most this many levels deep: a
#: value nested deeper is handed to the Python twin's walk, which keeps its
#: stack on the heap, so that every function works in a thread of 128 KiB
#: (musl's default) at any depth up to MAX_DEPTH, with room to spare for the
#: caller's own frames (docs/design.md, "A bounded C stack").
C_WALK_DEPTH = 64

#: json.loads and json.dumps recurse once per level of nesting, counted
#: against the interpreter's limit (from 3.12 a C stack limit of about 1500
#: levels; before, Python's recursion limit of 1000, which the caller's frames
#: share).  The codec hands them only JSON at most this deep.
STDLIB_JSON_DEPTH = 200

#: JSON levels of a value tree that passed the depth check: an @d pair is
#: three JSON levels for one of the tree's ({"@d": [[k, v]]}), plus a few for
#: the record's own wrappers.  JSON text is written and read up to this deep;
#: deeper is the depth error.
JSON_DEPTH_LIMIT = 3 * MAX_DEPTH + 10

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1

#: Integers longer than this are not written as @bi decimal text: converting
#: them takes time that grows faster than their size (a hostile record could
#: stall a decode).  A record holding one is kept verbatim (@pkl) instead.
MAX_BIGINT_BITS = 1 << 17            # about 39 500 decimal digits
MAX_BIGINT_DIGITS = 40000


class CodecError(ValueError):
    """Bad data: a pickle or JSON value the codec cannot read or write."""


def bytes_argument(data: Any, name: str = "data") -> bytes:
    """Accept bytes, bytearray and memoryview; anything else is a TypeError."""
    if type(data) is bytes:
        return data
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    if isinstance(data, memoryview):
        return data.tobytes()
    raise TypeError(f"argument '{name}': expected bytes, bytearray or memoryview, not {type(data).__name__}")


# ---------------------------------------------------------------------------
# base64 (RFC 4648 standard alphabet, canonical padding)
# ---------------------------------------------------------------------------

def b64encode(raw: bytes) -> str:
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


def b64decode(text: Any, what: str = "@b") -> bytes:
    """Strict base64: the canonical spelling of some bytes, nothing else.

    a2b_base64 skips stray characters, so the bytes are encoded again and
    must give back exactly the text: that rejects whitespace, the URL-safe
    alphabet, missing or extra padding and non-zero trailing bits.
    """
    if not isinstance(text, str):
        raise CodecError(f"{what} must be a base64 string, not {type(text).__name__}")
    try:
        raw = binascii.a2b_base64(text)
    except (binascii.Error, ValueError):
        raw = None
    if raw is None or binascii.b2a_base64(raw, newline=False) != text.encode("ascii", "replace"):
        raise CodecError(f"JSON error: base64 decode: invalid base64 in {what}: {text[:40]!r}")
    return raw


# ---------------------------------------------------------------------------
# Text PostgreSQL cannot store
# ---------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


# ---------------------------------------------------------------------------
# Numbers as text
# ---------------------------------------------------------------------------

def int_to_decimal(value: int) -> str:
    """Decimal text of any int (str() refuses very long ones on new Pythons)."""
    if value.bit_length() < 10000:
        return str(value)
    sign = "-" if value < 0 else ""
    value = abs(value)
    # Divide and conquer by powers of ten: fast enough and no digit limit.
    chunk = 10 ** 1000
    parts = []
    while value:
        value, low = divmod(value, chunk)
        parts.append(low)
    head = str(parts.pop())
    return sign + head + "".join(str(p).zfill(1000) for p in reversed(parts))


_DECIMAL_INT = re.compile(r"[+-]?[0-9]+\Z")


def decimal_to_int(text: Any, what: str = "@bi") -> int:
    if not isinstance(text, str) or not _DECIMAL_INT.match(text):
        raise CodecError(f"JSON error: bigint parse: invalid {what} value {str(text)[:40]!r}")
    if len(text) > MAX_BIGINT_DIGITS + 1:
        raise CodecError(f"JSON error: bigint parse: {what} longer than {MAX_BIGINT_DIGITS} digits")
    if len(text) < 4000:
        return int(text)
    sign = -1 if text[0] == "-" else 1
    digits = text.lstrip("+-")
    value = 0
    for i in range(0, len(digits), 1000):
        piece = digits[i:i + 1000]
        value = value * 10 ** len(piece) + int(piece)
    return sign * value


def float_marker(value: float) -> Optional[str]:
    """The ``@f`` text of a float JSON in PostgreSQL cannot carry, else None."""
    if value != value:
        return "nan"
    if value == math.inf:
        return "inf"
    if value == -math.inf:
        return "-inf"
    if value == 0.0 and math.copysign(1.0, value) < 0:
        return "-0.0"
    return None


_FLOAT_TEXT = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z")


def float_from_marker(text: Any) -> float:
    """The float of an ``@f`` marker: NaN, an infinity, -0.0, or a finite float's text.

    The last form is what ``decode_zodb_record_for_pg`` writes for integral
    floats from 1e16 up, which ``json.dumps`` spells ``1e+16`` and ``jsonb``
    would then turn into an integer.
    """
    if text == "nan":
        return math.nan
    if text == "inf":
        return math.inf
    if text == "-inf":
        return -math.inf
    if text == "-0.0":
        return -0.0
    if type(text) is str and _FLOAT_TEXT.match(text):
        value = float(text)
        if value - value == 0.0:
            return value
    raise CodecError(f"@f must be 'nan', 'inf', '-inf', '-0.0' or a finite float, not {str(text)[:40]!r}")


def float_text(value: float, plus_exponent: bool, positional_integers: bool) -> str:
    """A finite float spelled by docs/format.md, "Float spelling".

    ``plus_exponent``: ``1e+16`` (pickle_to_json) rather than ``1e16``.
    ``positional_integers``: integral floats that would need an exponent are
    written out with ``.0`` so PostgreSQL keeps them floats.
    """
    r = repr(value)
    if "e" not in r:
        # repr is positional exactly where the reference's layout is (1e-4 <= |x| < 1e16).
        if r in ("inf", "-inf", "nan"):
            raise CodecError(f"float {r} has no JSON spelling")
        return r
    mantissa, _, exp_text = r.partition("e")
    sign = ""
    if mantissa[0] == "-":
        sign, mantissa = "-", mantissa[1:]
    int_part, _, frac_part = mantissa.partition(".")
    all_digits = int_part + frac_part
    digits = all_digits.rstrip("0") or "0"
    # k: decimal exponent of the last significant digit; kk: of the first, plus one.
    k = int(exp_text) - len(frac_part) + (len(all_digits) - len(digits))
    n = len(digits)
    kk = n + k
    if k >= 0 and (kk <= 16 or positional_integers):
        return sign + digits + "0" * k + ".0"
    if 0 < kk <= 16:
        return sign + digits[:kk] + "." + digits[kk:]
    if -5 < kk <= 0:
        return sign + "0." + "0" * (-kk) + digits
    exp = kk - 1
    text = digits[0] + ("." + digits[1:] if n > 1 else "")
    if exp >= 0 and plus_exponent:
        return f"{sign}{text}e+{exp}"
    return f"{sign}{text}e{exp}"


# ---------------------------------------------------------------------------
# Value trees, walked without recursion (any depth within Python's own limit)
# ---------------------------------------------------------------------------

_NO_CHILD = object()


def rebuild_tree(root: Any, leaf: Any, key: Any, finish_dict: Any) -> Any:
    """A copy of a value of lists and dicts, made with an explicit stack.

    ``leaf(x)`` gives the copy of every value that is neither, ``key(k)`` of
    every dict key, and ``finish_dict(original, copy)`` the final form of
    each dict once all its values are copied.  A list or dict reached twice
    (the decoders give one object wherever the pickle's memo gives it again)
    is copied once and its copy put in each place: the work is that of the
    objects, not of the tree they spell, which the expansion budget allows to
    be millions of values from a few kilobytes of pickle.  The value has no
    cycle (the decoders make those ``@pkl`` first).
    """
    if type(root) is not list and type(root) is not dict:
        return leaf(root)
    copies: Dict[int, Any] = {}  # id of a list or dict -> its finished copy (the originals stay alive meanwhile)
    stack: list = []
    node, slot = root, None
    out: Any = [] if type(root) is list else {}
    it: Any = iter(root) if type(root) is list else iter(root.items())
    while True:
        child: Any = _NO_CHILD
        if type(out) is list:
            append = out.append
            for x in it:
                if type(x) is list or type(x) is dict:
                    if id(x) in copies:
                        append(copies[id(x)])
                        continue
                    child, child_slot = x, None
                    break
                append(leaf(x))
        else:
            for k, x in it:
                k = key(k)
                if type(x) is list or type(x) is dict:
                    if id(x) in copies:
                        out[k] = copies[id(x)]
                        continue
                    child, child_slot = x, k
                    break
                out[k] = leaf(x)
        if child is not _NO_CHILD:
            stack.append((node, out, it, slot))
            node, slot = child, child_slot
            if type(child) is list:
                out, it = [], iter(child)
            else:
                out, it = {}, iter(child.items())
            continue
        result = finish_dict(node, out) if type(out) is dict else out
        if not stack:
            return result
        copies[id(node)] = result
        finished_slot = slot
        node, out, it, slot = stack.pop()
        if type(out) is list:
            out.append(result)
        else:
            out[finished_slot] = result
