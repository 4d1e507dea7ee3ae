"""The codec's JSON reader (``_jsonread``): what json.loads returns, at any depth, without recursion.

Differential: texts generated token by token (escapes, non-ASCII, surrogate
pairs and lone surrogates, huge integers, float spellings, duplicate keys,
every kind of JSON whitespace) must read as json.loads reads them, strictly
(types, key order, float bits); damaged texts must be refused when
json.loads refuses them, as a CodecError naming the offset.
"""

from __future__ import annotations

import json
import math
import re
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepvalues import json_text
from helpers import MAX_EXAMPLES
from strictcompare import diff
from zodb_json_codec._common import JSON_DEPTH_LIMIT, MAX_BIGINT_DIGITS, CodecError
from zodb_json_codec._jsonread import _nests_within, parse, read_json

SETTINGS = settings(max_examples=3 * MAX_EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

OFFSET = re.compile(r"^JSON error: .+ at offset (\d+)$")


def _refuse(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def strict_loads(text: str):
    """json.loads as the codec reads JSON: NaN, Infinity and -Infinity refused.

    With a parse_constant hook PyPy reads with json's pure-Python scanner,
    which takes "\\u 123" (int() of the digits); its own scanner, like
    CPython's, is strict: both must accept the text.
    """
    value = json.loads(text)
    json.loads(text, parse_constant=_refuse)
    return value


# ---------------------------------------------------------------------------
# Texts, spelled token by token
# ---------------------------------------------------------------------------

whitespace = st.text(alphabet=" \t\n\r", max_size=3)

SPECIAL_CHARS = ["\x00", "\x1f", "\x7f", "\ud800", "\udbff", "\udc00", "\udfff", "\u2028", "é", "😀", "中",
                 '"', "\\", "/", "\b", "\f", "\n", "\r", "\t"]
SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                 "\t": "\\t"}


@st.composite
def spelled_char(draw, c: str) -> str:
    """One character of a string literal, spelled raw (where JSON allows) or escaped."""
    choices = []
    if c not in '"\\' and ord(c) >= 0x20:
        choices.append(c)
    if c in SHORT_ESCAPES:
        choices.append(SHORT_ESCAPES[c])
    code = ord(c)
    if code > 0xFFFF:  # a surrogate pair
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        choices.append(f"\\u{high:04x}\\u{low:04x}")
        choices.append(f"\\u{high:04X}\\u{low:04X}")
    else:
        choices.append(f"\\u{code:04x}")
        choices.append(f"\\u{code:04X}")
    return draw(st.sampled_from(choices))


@st.composite
def string_literal(draw) -> str:
    text = draw(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(SPECIAL_CHARS)), max_size=8))
    return '"' + "".join(draw(spelled_char(c)) for c in text) + '"'


@st.composite
def integer_literal(draw) -> str:
    value = draw(st.one_of(st.integers(), st.integers(min_value=-(10 ** 60), max_value=10 ** 60),
                           st.sampled_from([0, -0, 2 ** 63, -(2 ** 63) - 1, 10 ** 4000, -(10 ** 4000) + 7])))
    text = str(value)
    return "-0" if text == "0" and draw(st.booleans()) else text


@st.composite
def float_literal(draw) -> str:
    value = draw(st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                           st.sampled_from([0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                                            1e16, 1e-7, 0.1, 123456789.123456789])))
    mantissa, _, exponent = repr(value).partition("e")
    if not exponent and draw(st.booleans()):
        return mantissa  # 1.5, -0.0
    exponent_value = int(exponent or "0")
    e = draw(st.sampled_from(["e", "E"]))
    sign = "+" if exponent_value >= 0 and draw(st.booleans()) else ""
    zeros = "0" * draw(st.integers(0, 2))
    spelled = f"{mantissa}{e}{sign}{'-' if exponent_value < 0 else ''}{zeros}{abs(exponent_value)}"
    return draw(st.sampled_from([spelled, spelled.replace(".0" + e, e) if ".0" + e in spelled else spelled,
                                 "1e400", "-1e400", "1E-400", "0e0", "0.000"]))


scalar_literal = st.one_of(string_literal(), integer_literal(), float_literal(),
                           st.sampled_from(["true", "false", "null"]))


def _joined(draw, items, opening: str, closing: str) -> str:
    if not items:
        return opening + draw(whitespace) + closing
    return opening + ",".join(draw(whitespace) + item + draw(whitespace) for item in items) + closing


def json_texts(max_leaves: int = 20) -> st.SearchStrategy[str]:
    """Valid JSON texts: any nesting of arrays and objects (with duplicate keys) around literals."""

    def extend(children):
        arrays = st.lists(children, max_size=4)
        members = st.lists(st.tuples(st.one_of(string_literal(), st.sampled_from(['"a"', '"b"'])), children),
                           max_size=4)

        @st.composite
        def container(draw):
            if draw(st.booleans()):
                return _joined(draw, draw(arrays), "[", "]")
            items = [k + draw(whitespace) + ":" + draw(whitespace) + v for k, v in draw(members)]
            return _joined(draw, items, "{", "}")

        return container()

    @st.composite
    def text(draw):
        return draw(whitespace) + draw(st.recursive(scalar_literal, extend, max_leaves=max_leaves)) + draw(whitespace)

    return text()


def same_as_json_loads(text: str) -> None:
    expected = strict_loads(text)
    found = diff(expected, parse(text))
    assert found is None, (text, found)
    found = diff(expected, read_json(text))
    assert found is None, (text, found)


# ---------------------------------------------------------------------------
# Valid texts
# ---------------------------------------------------------------------------

@pytest.mark.slow
@SETTINGS
@given(text=json_texts())
def test_reads_what_json_loads_reads(text):
    same_as_json_loads(text)


@pytest.mark.parametrize("text", [
    '{"a": 1, "b": 2, "a": 3}',  # the last value, at the first key's place
    '{"a": {"x": 1}, "a": [2]}',
    '"\\ud83d\\ude00 \\ud800 \\udc00\\ud800 \\ud800\\u0041 \\uDBFF\\uDFFF"',  # pairs, lone and reversed surrogates
    '"\\u0000\\u001f\\u007f\\/\\b\\f\\n\\r\\t\\"\\\\"',
    '"\ud800 raw lone surrogate, \x7f, \u2028, é"',
    "-0", "-0.0", "0e0", "1E+2", "1e-2", "1.5e308", "1e400", "-1e400", "5e-324", "2.5e-324", "1e-400",
    "123456789012345678901234567890", "-9223372036854775809", "0.1", "17976931348623157e292",
    " \t\n\r[ \t\n\r1 \t\n\r, \t\n\r{ \t\n\r\"k\" \t\n\r: \t\n\rnull \t\n\r} \t\n\r] \t\n\r",
    "[]", "{}", "[[]]", '[{}, [], "", 0]', "true", "false", "null",
])
def test_known_texts(text):
    same_as_json_loads(text)


def test_floats_are_correctly_rounded():
    for text in ("0.1", "2.2250738585072011e-308", "9007199254740993", "9007199254740993.0",
                 "1.00000000000000011102230246251565404236316680908203125"):
        assert struct.pack("<d", parse(text)) == struct.pack("<d", strict_loads(text))
    assert math.copysign(1.0, parse("-0.0")) == -1.0 and parse("-0") == 0 and type(parse("-0")) is int


def test_integers_of_any_length_up_to_the_bigint_limit():
    digits = "7" * MAX_BIGINT_DIGITS
    assert parse(digits) == 7 * (10 ** MAX_BIGINT_DIGITS - 1) // 9  # 77...7, without int()'s digit limit
    assert parse("-" + digits) == -parse(digits)
    assert read_json(f"[{digits}]") == [parse(digits)]  # json.loads refuses it (int digit limit): ours reads it
    with pytest.raises(CodecError, match=rf"longer than {MAX_BIGINT_DIGITS} digits at offset 1$"):
        read_json("[" + digits + "1]")


# ---------------------------------------------------------------------------
# Bad texts
# ---------------------------------------------------------------------------

def refused(text: str) -> str:
    """The message of our refusal; it names an offset inside (or just past) the text."""
    with pytest.raises(CodecError) as info:
        read_json(text)
    message = str(info.value)
    with pytest.raises(CodecError) as again:
        parse(text)
    assert str(again.value) == message  # the json.loads fast path changes no message
    m = OFFSET.match(message)
    assert m is not None, message
    assert 0 <= int(m.group(1)) <= len(text), message
    return message


@pytest.mark.parametrize("text, message", [
    ("", "expected a value at offset 0"),
    ("  ", "expected a value at offset 2"),
    ("[1,]", "expected a value at offset 3"),
    ("[1 2]", "expected ',' or ']' at offset 3"),
    ('{"a" 1}', "expected ':' at offset 5"),
    ('{"a": 1,}', "expected a key in double quotes at offset 8"),
    ("{1: 2}", "expected a key in double quotes at offset 1"),
    ('{"a": 1 "b": 2}', "expected ',' or '}' at offset 8"),
    ('"abc', "unterminated string at offset 0"),
    ('["a\\', "unterminated string at offset 1"),
    ('"a\nb"', "raw control character U+000A in a string at offset 2"),
    ('"a\x00"', "raw control character U+0000 in a string at offset 2"),
    ('"\\x41"', "invalid escape '\\\\x' at offset 1"),
    ('"\\u12"', "invalid \\u escape at offset 1"),
    ('"\\u 123"', "invalid \\u escape at offset 1"),
    ('"\\u-123"', "invalid \\u escape at offset 1"),
    ('"\\ud800\\u12x4"', "invalid \\u escape at offset 7"),
    ("NaN", "NaN is not valid JSON at offset 0"),
    ("[Infinity]", "Infinity is not valid JSON at offset 1"),
    ('{"a": -Infinity}', "-Infinity is not valid JSON at offset 6"),
    ("1 2", "extra data after the value at offset 2"),
    ("01", "extra data after the value at offset 1"),
    ("1.", "extra data after the value at offset 1"),
    ("1e", "extra data after the value at offset 1"),
    (".5", "expected a value at offset 0"),
    ("+1", "expected a value at offset 0"),
    ("-", "expected a value at offset 0"),
    ("nul", "expected a value at offset 0"),
    ("True", "expected a value at offset 0"),
    ("\ufeff1", "expected a value at offset 0"),  # a BOM is not whitespace
    ("\x0c1", "expected a value at offset 0"),  # nor a form feed
    ("[1,\u00a02]", "expected a value at offset 3"),  # nor a no-break space
    ("[1]\u2028", "extra data after the value at offset 3"),
    ("١", "expected a value at offset 0"),  # a digit, but not an ASCII one
])
def test_bad_texts_name_what_and_where(text, message):
    assert refused(text) == "JSON error: " + message
    with pytest.raises(ValueError):
        strict_loads(text)


@pytest.mark.slow
@SETTINGS
@given(text=json_texts(max_leaves=8), data=st.data())
def test_damaged_texts_are_refused_where_json_loads_refuses_them(text, data):
    pos = data.draw(st.integers(0, len(text)))
    damage = data.draw(st.sampled_from(["delete", "insert", "replace"]))
    char = data.draw(st.sampled_from(list('[]{}",:\\ -+.0123456789eEnulltrufasN\x00\x1f\n\ud800')))
    if damage == "delete":
        text = text[:pos] + text[pos + 1:]
    elif damage == "insert":
        text = text[:pos] + char + text[pos:]
    else:
        text = text[:pos] + char + text[pos + 1:]
    try:
        strict_loads(text)
    except ValueError:
        refused(text)
        return
    same_as_json_loads(text)


# ---------------------------------------------------------------------------
# Depth
# ---------------------------------------------------------------------------

def test_the_deepest_json_the_writers_write_is_read():
    for opening, closing in (("[", "]"), ('{"a":', "}")):
        n = JSON_DEPTH_LIMIT + 1  # containers at depths 0 .. JSON_DEPTH_LIMIT
        inner = "1" if opening == '{"a":' else ""
        value = read_json(opening * n + inner + closing * n)
        for _ in range(n - 1):
            value = value[0] if type(value) is list else value["a"]
        assert value in ([], {"a": 1})


@pytest.mark.parametrize("text", [
    "[" * (JSON_DEPTH_LIMIT + 2) + "]" * (JSON_DEPTH_LIMIT + 2),
    '{"a":' * 100000 + "1" + "}" * 100000,
    "[" * 100000,
    "[" * 100000 + "1,]",
])
def test_deeper_json_is_the_depth_error(text):
    with pytest.raises(CodecError, match="^invalid pickle data: maximum nesting depth exceeded$"):
        read_json(text)


def test_a_1000_level_value_reads_back_without_recursion():
    value: object = "leaf"
    for i in range(1000):
        value = {"@d": [[i, value]]} if i % 2 else [value, {"k": None}]
    text = json_text(value)
    assert not _nests_within(text, 1500)  # past json.loads' limit on every version
    found = diff(value, read_json(text))
    assert found is None, found


@pytest.mark.parametrize("text, levels", [
    ("1", 0), ("[]", 1), ("[[], {}]", 2), ('["[[[[", {"a": "{{{"}]', 2),
    ('"\\"[[[["', 0),  # an escaped quote does not end the string
    ('["\\\\", []]', 2),  # an escaped backslash does not escape the quote after it
    ('["\\\\\\"[", []]', 2), ('["]", "["]', 1), ('["", "]", ""]', 1),
    ("[" * 300 + "]" * 300, 300),
    ("[" * 300 + "1," * 1000 + "2" + "]" * 300, 300),
])
def test_json_loads_gets_only_texts_that_nest_within_its_limit(text, levels):
    # Brackets inside strings do not count; exactly as deep as the brackets outside them nest.
    assert _nests_within(text, levels)
    if levels:
        assert not _nests_within(text, levels - 1)


@pytest.mark.parametrize("text", ["[" * 300, "]" * 300, '["a]', "[" * 150 + '"' + "]" * 150])
def test_unbalanced_texts_are_not_taken_for_shallow(text):
    assert not _nests_within(text, 1000)
    with pytest.raises(CodecError, match="at offset"):
        read_json(text)


def test_wide_texts_go_through_json_loads():
    wide = "[" + ",".join(['[1, {"a": [2]}]'] * 1000) + "]"
    assert _nests_within(wide, 4) and read_json(wide) == [[1, {"a": [2]}]] * 1000
