"""JSON text -> Python values, at any depth the format allows, without recursion (used by both twins).

``parse(text)`` returns exactly what ``json.loads(text)`` returns for valid
JSON (duplicate keys: the last value at the first key's place; integers
exact; floats by ``float()``; lone surrogates from ``\\u`` escapes kept),
refuses ``NaN`` and ``Infinity``, raw control characters in strings and
whitespace other than space, tab, LF and CR, as ``json.loads`` in its strict
mode does, and reads integers of up to MAX_BIGINT_DIGITS digits whatever
Python's own digit limit.  It keeps its own stack, so nesting costs no
Python frames: JSON deeper than JSON_DEPTH_LIMIT is the codec's depth error,
any other problem a CodecError naming the character offset.

``read_json_argument(value, name)`` reads a public function's JSON argument
given as ``str`` or as UTF-8 ``bytes``, ``bytearray`` or ``memoryview``
(offsets then count bytes).

``read_json(text)`` is what the codec calls: texts that cannot be deeper
than ``json.loads``'s recursion safely allows go through it (C speed), the
rest, and every text it refuses, through ``parse``.
"""

from __future__ import annotations

import json
import json.scanner
import re
from typing import Any

from ._common import JSON_DEPTH_LIMIT, MAX_BIGINT_DIGITS, STDLIB_JSON_DEPTH, CodecError, decimal_to_int

_WHITESPACE = " \t\n\r"
_skip_whitespace = re.compile(r"[ \t\n\r]*").match
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_plain_run = re.compile(r'[^"\\\x00-\x1f]*').match
_HEX_DIGITS = "0123456789abcdefABCDEF"
_ESCAPED = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_CONSTANTS = ("NaN", "Infinity", "-Infinity")


def _error(what: str, pos: int) -> CodecError:
    error = CodecError(f"JSON error: {what} at offset {pos}")
    error.what, error.offset = what, pos  # read_json_argument tells the offset in bytes
    return error


def _depth_error() -> CodecError:
    # The encoders' wording: JSON too deep and values too deep read alike.
    return CodecError("invalid pickle data: maximum nesting depth exceeded")


def _hex4(s: str, pos: int) -> int:
    """The code unit of the four hex digits at pos (after a backslash and 'u')."""
    digits = s[pos:pos + 4]
    if len(digits) != 4 or digits.strip(_HEX_DIGITS):
        raise _error("invalid \\u escape", pos - 2)
    return int(digits, 16)


def _string(s: str, start: int) -> tuple:
    """(text, offset after it) of the string whose opening quote is at start."""
    pos = start + 1
    run_end = _plain_run(s, pos).end()
    if s[run_end:run_end + 1] == '"':
        return s[pos:run_end], run_end + 1
    chunks = [s[pos:run_end]]
    pos = run_end
    while True:
        c = s[pos:pos + 1]
        if c == '"':
            return "".join(chunks), pos + 1
        if c == "":
            raise _error("unterminated string", start)
        if c != "\\":
            raise _error(f"raw control character U+{ord(c):04X} in a string", pos)
        escape = s[pos + 1:pos + 2]
        if escape == "u":
            unit = _hex4(s, pos + 2)
            pos += 6
            if 0xD800 <= unit <= 0xDBFF and s[pos:pos + 2] == "\\u":
                low = _hex4(s, pos + 2)
                if 0xDC00 <= low <= 0xDFFF:  # a surrogate pair: one character
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    pos += 6
            chunks.append(chr(unit))
        elif escape != "" and escape in _ESCAPED:
            chunks.append(_ESCAPED[escape])
            pos += 2
        elif escape == "":
            raise _error("unterminated string", start)
        else:
            raise _error(f"invalid escape {chr(92) + escape!r}", pos)
        run_end = _plain_run(s, pos).end()
        chunks.append(s[pos:run_end])
        pos = run_end


def _number(s: str, pos: int) -> tuple:
    """(number, offset after it) of the number at pos."""
    m = _NUMBER.match(s, pos)
    if m is None:
        if s.startswith("-Infinity", pos):
            raise _error("-Infinity is not valid JSON", pos)
        raise _error("expected a value", pos)
    text = m.group()
    if m.group(1) or m.group(2):
        return float(text), m.end()
    if len(text) < 4000:
        return int(text), m.end()
    if len(text.lstrip("-")) > MAX_BIGINT_DIGITS:
        raise _error(f"an integer longer than {MAX_BIGINT_DIGITS} digits", pos)
    return decimal_to_int(text), m.end()


def _key(s: str, pos: int, end: int) -> tuple:
    """(key, offset of its value) for the object member whose key is expected at pos."""
    if pos < end and s[pos] in _WHITESPACE:
        pos = _skip_whitespace(s, pos).end()
    if s[pos:pos + 1] != '"':
        raise _error("expected a key in double quotes", pos)
    key, pos = _string(s, pos)
    if pos < end and s[pos] in _WHITESPACE:
        pos = _skip_whitespace(s, pos).end()
    if s[pos:pos + 1] != ":":
        raise _error("expected ':'", pos)
    pos += 1
    if pos < end and s[pos] in _WHITESPACE:
        pos = _skip_whitespace(s, pos).end()
    return key, pos


def parse(s: str) -> Any:
    """The value of the JSON text s, read with an explicit stack (see the module's docstring)."""
    end = len(s)
    pos = _skip_whitespace(s, 0).end()
    stack: list = []  # (container, key) of the containers around the one being filled
    container: Any = None  # the container being filled (None: the text's own value)
    key: Any = None  # the key its next value goes under, for an object
    while True:
        # A value starts at pos.
        c = s[pos:pos + 1]
        if c == '"':
            value, pos = _string(s, pos)
        elif c == "{" or c == "[":
            if len(stack) > JSON_DEPTH_LIMIT:
                raise _depth_error()
            pos += 1
            if pos < end and s[pos] in _WHITESPACE:
                pos = _skip_whitespace(s, pos).end()
            if c == "{":
                if s[pos:pos + 1] == "}":
                    value, pos = {}, pos + 1
                else:
                    stack.append((container, key))
                    container = {}
                    key, pos = _key(s, pos, end)
                    continue
            elif s[pos:pos + 1] == "]":
                value, pos = [], pos + 1
            else:
                stack.append((container, key))
                container, key = [], None
                continue
        elif c != "" and c in "-0123456789":
            value, pos = _number(s, pos)
        elif c == "n" and s.startswith("null", pos):
            value, pos = None, pos + 4
        elif c == "t" and s.startswith("true", pos):
            value, pos = True, pos + 4
        elif c == "f" and s.startswith("false", pos):
            value, pos = False, pos + 5
        elif s.startswith(_CONSTANTS, pos):
            raise _error(f"{'NaN' if c == 'N' else 'Infinity'} is not valid JSON", pos)
        else:
            raise _error("expected a value", pos)
        # The value is complete: into its container, and on to what follows it.
        while True:
            if pos < end and s[pos] in _WHITESPACE:
                pos = _skip_whitespace(s, pos).end()
            if container is None:
                if pos != end:
                    raise _error("extra data after the value", pos)
                return value
            c = s[pos:pos + 1]
            if type(container) is list:
                container.append(value)
                if c == ",":
                    pos += 1
                    if pos < end and s[pos] in _WHITESPACE:
                        pos = _skip_whitespace(s, pos).end()
                    break
                if c != "]":
                    raise _error("expected ',' or ']'", pos)
            else:
                container[key] = value
                if c == ",":
                    key, pos = _key(s, pos + 1, end)
                    break
                if c != "}":
                    raise _error("expected ',' or '}'", pos)
            pos += 1
            value = container
            container, key = stack.pop()


# ---------------------------------------------------------------------------
# The json.loads fast path
# ---------------------------------------------------------------------------

_TO_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_BRACKETED_STRING = re.compile(rb'"[^"]*"')


def _nests_within(text: str, levels: int) -> bool:
    """Do brackets outside strings nest at most ``levels`` deep in text?  False when unsure.

    Up to its first error a text is JSON, and json.loads stops at that error.
    Its UTF-8 bytes are cut down to quotes and brackets, escaped backslashes
    and quotes first (what is left of other escapes is neither); a pair of
    adjacent quotes encloses no bracket.  Each round then removes the
    innermost pairs of brackets: the text empties in as many rounds as it is
    deep, or it is not balanced.
    """
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    data = data.translate(_TO_SQUARE, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in data:
        data = _BRACKETED_STRING.sub(b"", data)
    for _ in range(levels):
        if not data:
            return True
        inner_removed = data.replace(b"[]", b"")
        if len(inner_removed) == len(data):
            return False
        data = inner_removed
    return not data


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)  # parse names it, with its offset


if json.scanner.c_make_scanner is not None:
    # CPython's compiled scanner: a hook costs nothing until a constant is met.
    _loads_strict = json.JSONDecoder(parse_constant=_refuse_constant).decode
else:
    # PyPy reads fast only without hooks (its pure-Python scanner recurses
    # otherwise): texts that may hold a constant are left to parse.
    def _loads_strict(text: str) -> Any:
        if "NaN" in text or "Infinity" in text:
            raise ValueError("NaN or Infinity")
        return json.loads(text)


def read_json(text: str) -> Any:
    """The value of a JSON text; CodecError (a ValueError) for anything that is not JSON."""
    if text.count("[") + text.count("{") <= STDLIB_JSON_DEPTH or _nests_within(text, STDLIB_JSON_DEPTH):
        try:
            return _loads_strict(text)
        except ValueError:
            pass  # parse says what and where, or reads what json.loads cannot (long integers)
    return parse(text)


def read_json_argument(value: Any, name: str) -> Any:
    """The value of a JSON argument: a str, or strict UTF-8 bytes-like (no BOM); offsets in its own units.

    Invalid UTF-8 (surrogates encoded in it included) is a CodecError at
    the byte offset of the first bad byte; a JSON error in bytes names the
    byte offset of what it found, as in a str it names the character's.
    """
    if isinstance(value, str):
        return read_json(str(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = value.tobytes() if isinstance(value, memoryview) else bytes(value)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _error("invalid UTF-8", exc.start) from None
        try:
            return read_json(text)
        except CodecError as exc:
            if getattr(exc, "offset", None) is None or text.isascii():
                raise
            byte_offset = len(text[:exc.offset].encode("utf-8"))
            raise _error(exc.what, byte_offset) from None
    raise TypeError(f"argument '{name}': expected str, bytes, bytearray or memoryview, not {type(value).__name__}")
