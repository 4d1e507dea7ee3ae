"""encode_zodb_record_from_pg_json: a PostgreSQL row's jsonb text straight back to the ZODB record.

Its definition is ``encode_zodb_record({"@cls": [m, n], "@s": json.loads(text)})``
(JSON read strictly, as ``json_to_pickle`` reads it).  Checked here:

- differential: generated texts (markers among plain values, escapes,
  non-ASCII, ``\\u0000``, lone surrogates, huge integers, float edges,
  duplicate keys, whitespace) give byte-identical records in both twins and
  against the definition, for ``str`` and UTF-8 bytes-like input, and the
  same for ``json_to_pickle``;
- nesting to the documented limits and past them;
- bad input: a ValueError naming the offset, the same in both twins;
- the storage's way (docs/api.md): records decoded, stored in a real
  ``jsonb`` column, fetched as text with psycopg and encoded back hold the
  same objects, for the whole corpus and the reference vectors.
"""

from __future__ import annotations

import json
import random
import re
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpus
from deepvalues import json_text
from helpers import (MAX_EXAMPLES, MIXED_BLOCKS, NOT_THREE_BYTE, ODD_CHARACTERS, THREE_BYTE_RUN, UTF8_SEQUENCES,
                     same_records, utf8_texts)
from test_corpus import UNLOADABLE
from test_jsonread import json_texts, strict_loads, whitespace
from test_twins import observe, twins  # noqa: F401 (twins: the fixture of both twins)
from zodb_json_codec._common import JSON_DEPTH_LIMIT, MAX_DEPTH, CodecError

SETTINGS = settings(max_examples=2 * MAX_EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])

#: Classes whose records have rules of their own: an application class, BTree and bucket (their @kv,
#: @children states), and the class-less object record ("", "").
CLASSES = [("app.mod", "Kls"), ("BTrees.OOBTree", "OOBucket"), ("BTrees.OOBTree", "OOBTree"), ("", "")]

#: Every marker, in the spellings the decoders write and some they do not (wrong types, bad payloads,
#: neighbours of the real keys), as JSON text.
MARKERS = [
    '{"@ref": "00000000000000ab"}', '{"@ref": ["0000000000000001", "a.b.C"]}', '{"@ref": ["0001", "C"]}',
    '{"@ref": ["zz", "a.C"]}', '{"@ref": ["000g", "a.C"]}', '{"@ref": "abc"}', '{"@ref": ["00", "a.C"], "x": 1}',
    '{"@ref": ["00", "a\\u00e9.C"]}', '{"@ref": ["00", "a\\nb.C"]}', '{ "@ref" : [ "00" , "a.C" ] }',
    '{"@ref": {"@ref": "0001"}}', '{"@ref": 7}', '{"@ref": ["00", "a.C", 1]}',
    '{"@t": [1, "a", [2]]}', '{"@t": []}', '{"@t": [1]}', '{"@b": "YWJj"}', '{"@b": "YWJ"}', '{"@b": 1}',
    '{"@bi": "123456789012345678901234567890"}', '{"@bi": "x"}', '{"@d": [[1, 2], [[3], {"a": 4}]]}',
    '{"@d": [[1]]}', '{"@set": [1, 2]}', '{"@fset": []}', '{"@dt": "2020-01-02T03:04:05"}',
    '{"@dt": "2020-01-02T03:04:05.123456", "@tz": {"offset": 3600}}', '{"@dt": "nope"}',
    '{"@date": "2020-01-02"}', '{"@time": "03:04:05"}', '{"@td": [1, 2, 3]}', '{"@dec": "1.50"}',
    '{"@uuid": "12345678-1234-5678-1234-567812345678"}', '{"@cls": ["m", "C"]}',
    '{"@cls": ["m", "C"], "@s": {"a": 1}}', '{"@cls": ["m", "C"], "@s": null, "@items": [[1, 2]]}',
    '{"@s": {"a": 1}, "@cls": ["m", "C"]}', '{"@s": {"@args": [1], "@state": 2}, "@cls": ["m", "C"]}',
    '{"@reduce": {"callable": {"@cls": ["m", "f"]}, "args": {"@t": [1]}}}', '{"@reduce": {"args": []}}',
    '{"@newobj": {"callable": {"@cls": ["m", "C"]}, "args": {"@t": []}, "state": {"a": 1}}}',
    '{"@inst": {"@obj": 1, "@state": 2}}', '{"@ns": "YQBi"}', '{"@ns": "/w=="}', '{"@su": "7aCA"}',
    '{"@f": "nan"}', '{"@f": "-0.0"}', '{"@f": "x"}', '{"@pkl": "gAN9cQAu"}', '{"@ns:YQBi": 1, "b": 2}',
    '{"a": 1, "@su:7aCA": 2}', '{"@ns:x": 1}', '{"@args": [1], "@state": {"a": 1}}',
    '{"@obj": {"@cls": ["m", "C"]}, "@state": {"a": 1}}', '{"@kv": [[1, 2], ["a", {"@ref": "0001"}]]}',
    '{"@kv": [[1, 2]], "@next": {"@ref": "0002"}}', '{"@kv": []}', '{"@kv": [[1]]}', '{"@kv": [[1, 2, 3]]}',
    '{"@kv": 1}', '{"@ks": [1, 2]}', '{"@ks": [], "@next": null}',
    '{"@children": [{"@ref": "0001"}, "k", {"@ref": "0002"}], "@first": {"@ref": "0001"}}',
    '{"@first": {"@ref": "0001"}, "@children": [{"@ref": "0001"}]}', '{"@x": 1}', '{"@": 1}', '{"\\u0040t": [1]}',
    '{"@kv": [[1, 2]], "@kv": [[3, 4]]}', '{"@ref": "0001", "@ref": "0002"}',
]

markers = st.sampled_from(MARKERS)


def _with_markers(max_leaves: int = 12) -> st.SearchStrategy[str]:
    """JSON texts of plain values and markers at any place, the top included."""

    def extend(children):
        arrays = st.lists(children, max_size=4)
        members = st.lists(st.tuples(st.sampled_from(['"a"', '"b"', '"@x"', '"\\u00e9"', '"k\\u0000"']), children),
                           max_size=4)

        @st.composite
        def container(draw):
            ws = draw(whitespace)
            if draw(st.booleans()):
                return "[" + ws + ",".join(draw(arrays)) + "]"
            return "{" + ws + ",".join(f"{k}{ws}:{ws}{v}" for k, v in draw(members)) + "}"

        return container()

    leaves = st.one_of(markers, st.sampled_from(["1", "-0", "1.5", "1e400", "-1e-400", "18446744073709551616",
                                                 "9223372036854775807", "-9223372036854775809", '"\\ud800"',
                                                 '"x\\u0000y"', '"\\ud83d\\ude00"', '"é中😀"', "true", "null"]))
    return st.recursive(leaves, extend, max_leaves=max_leaves)


def _definition(twin, module: str, name: str, text: str) -> tuple:
    """The outcome of the definition, or None where json.loads itself cannot read the text."""
    try:
        value = strict_loads(text)
    except (ValueError, RecursionError):
        return None
    return observe(twin.encode_zodb_record, {"@cls": [module, name], "@s": value})


def _inputs(text: str) -> list:
    """The text as each accepted type: str, and its UTF-8 as bytes, bytearray and memoryview (if it has any)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: no UTF-8
        return [text]
    return [text, data, bytearray(data), memoryview(data)]


def unlocated(outcome: tuple) -> tuple:
    """An outcome, a globals policy refusal's place left out: the one pass alone raises it where it finds the
    global, and the public function (its normative way) says where that stands in the JSON."""
    if outcome[0] == "raised" and outcome[1].__name__ == "GlobalRefused":
        return outcome[:2] + (re.sub(r" at [^:]*:", ":", outcome[2]),) + outcome[3:]
    return outcome


def check_text(twins, text: str, one_pass: bool = False) -> None:
    """Both twins on every class and input type: the same outcome, the definition's where json.loads reads it.

    With one_pass, the Cython twin's one pass must also give the definition's record by itself, for a record
    with a class: for a text it takes (no lone surrogates, duplicate keys or other input it leaves to the
    normative way, which would hide its bugs), as a str or bytes (a bytearray or memoryview goes that way)."""
    python, cython = twins
    one_pass = one_pass and not any("\ud800" <= char <= "\udfff" for char in text)  # left to the normative way
    for module, name in CLASSES:
        expected = _definition(cython, module, name, text)
        for arg in _inputs(text):
            found = observe(python.encode_zodb_record_from_pg_json, module, name, arg)
            assert observe(cython.encode_zodb_record_from_pg_json, module, name, arg) == found, (module, name, arg)
            if expected is not None:
                assert found == expected, (module, name, arg)
            if one_pass and (module or name) and type(arg) in (str, bytes):
                alone = observe(cython.encode_module._one_pass_record, module, name, arg)
                assert unlocated(alone) == unlocated(expected), (module, name, arg)
    assert observe(cython.json_to_pickle, text) == observe(python.json_to_pickle, text), text


@SETTINGS
@given(text=json_texts())
def test_generated_json_gives_the_definitions_record(twins, text):
    check_text(twins, text)


@SETTINGS
@given(value=_with_markers(), before=whitespace, after=whitespace)
def test_generated_markers_give_the_definitions_record(twins, value, before, after):
    check_text(twins, before + value + after)


@pytest.mark.parametrize("text", MARKERS + [
    '{"a": 1, "a": 2}', '{"a": {"x": 1}, "b": 2, "a": [3]}', '[{"a": 1, "a": 1}]', '{"é": 1, "é": 2}',
    '{"k": 1, "\\u006b": 2}', " \t\n\r{ \t\n\r\"a\" \t\n\r: \t\n\r[ \t\n\r1 \t\n\r, \t\n\r2 ] \t\n\r} \t\n\r",
    '"\\u0000"', '"\\ud800\\u0041"', '"\\udc00\\ud800"', '"\\/\\b\\f\\n\\r\\t\\"\\\\"', '"\u2028\u2029\x7f"',
    "-0", "-0.0", "0e0", "1E+2", "5e-324", "1e400", "1.7976931348623157e308", "123456789012345678",
    "1234567890123456789", "-9223372036854775808", "9" * 400, "9" * 4000, "-" + "9" * 5000,
    "0.1" + "0" * 500 + "1", "[]", "{}", "[[]]", "[{}]", "null", "true", "false", '""',
    json.dumps({"k%d" % i: i for i in range(300)}), json.dumps([{"a": i, "b": str(i)} for i in range(200)]),
    json.dumps({"t": "x" * 70000 + "\n" + "é" * 40000 + "\\u00e9"}), json.dumps("中" * 30000, ensure_ascii=False),
])
def test_known_texts(twins, text):
    check_text(twins, text)


@pytest.mark.parametrize("odd", ["g", "G", "A", " ", "\x7f", "é", "\\\\", '\\"', "\\u0041", "/", "😀"])
def test_references_with_an_odd_character_anywhere(twins, odd):
    """The compiled reader writes {"@ref": ...} straight from the text when its oid is an even number of hex digits
    and its class name printable ASCII without escapes (both found 16 bytes at a time): one other character at
    every place of either, and in the text just after them (each text on its own: one reference the rules
    refuse makes the whole text an error)."""
    for n in (2, 15, 16, 18, 40):
        for at in range(n):
            oid = "0" * at + odd + "0" * (n - at - 1)
            name = "m" * at + odd + "m" * (n - at - 1) + ".C"
            for text in (f'{{"@ref": "{oid}"}}', f'{{"@ref": ["{oid}", "a.C"]}}', f'{{"@ref": ["00", "{name}"]}}',
                         f'{{"@ref": ["00", "{"m" * n}.C"]}}, "{odd}"'):
                check_text(twins, f"[{text}]")  # in a list: a marker at the top has rules of its own


#: States and classes around the compiled reader's instances ({"@cls": [module, name], "@s": state} written as
#: it is read, either key first): the ones it takes, and the ones it leaves to the built value.
INSTANCE_STATES = ['{"a": 1}', "null", "1", '"text"', "[1, 2]", "{}", '{"@ref": "0001"}', '{"@t": [1]}',
                   '{"@args": [1], "@state": {"a": 1}}', '{"@state": 1}', '{"@args": 1, "x": 2}',
                   '{"\\u0040args": [1], "@state": 2}', '{"a": {"@s": 1, "@cls": ["m", "D"]}}', '{"@kv": [[1, 2]]}',
                   '{"a": "' + "x" * 5000 + '\\n\u00e9"}', '{"a": 1, "a": 2}', '{"k": 1', "[1,]"]
INSTANCE_CLASSES = ['["m", "C"]', '[ "m.sub" , "Kls" ]', '["BTrees.OOBTree", "OOBucket"]',
                    '["BTrees.Length", "Length"]', '["copy_reg", "_reconstructor"]',
                    '["copyreg", "_reconstructor"]', '["m", "_reconstructor"]',
                    '["", "C"]', '["m", ""]', '["m\\u00e9", "C"]', '["\u00e9", "C"]', '["m", "C\\n"]', '["m", 1]',
                    '["m"]', '["m", "C", "D"]', '"m.C"', '["' + "m" * 600 + '", "C"]', '["m", "C"', "null"]


def _instances():
    """Instance texts, both orders, with extra keys and odd whitespace."""
    texts = []
    for state in INSTANCE_STATES:
        for klass in INSTANCE_CLASSES:
            texts += [f'{{"@cls": {klass}, "@s": {state}}}', f'{{"@s": {state}, "@cls": {klass}}}']
    texts += ['{"@s": 1, "@cls": ["m", "C"], "@items": [[1, 2]]}', '{"@cls": ["m", "C"], "@s": [], "@appends": [1]}',
              '{"@cls": ["m", "C"], "@s": 1, "@cls": ["m", "D"]}', '{"@s": 1, "@s": 2, "@cls": ["m", "C"]}',
              '{ \t"@s"\n:\r1 ,\n "@cls" : [ "m" ,"C" ] \n}', '{"@s" : 1, "@cls": ["m", "C"] , }',
              '{"@cls": ["m", "C"]}', '{"@s": 1}', '{"@s": 1, "@clss": ["m", "C"]}', '{"@S": 1, "@cls": ["m", "C"]}']
    return texts


def test_instances_either_key_first(twins):
    """jsonb puts "@s" before "@cls" (keys in order of length); the one pass reads both orders, and leaves a
    BTree's or _reconstructor's class, an @args/@state state, other keys and every error to the rules.
    One test over the ~700 texts (states x classes x both orders): each failure names its text."""
    texts = _instances()
    assert len(texts) == 2 * len(INSTANCE_STATES) * len(INSTANCE_CLASSES) + 10
    for text in texts:
        whole = _valid_without_duplicates(text)  # else the one pass gives up, as it should
        check_text(twins, f"[{text}, 1]", one_pass=whole)
        check_text(twins, f'{{"x": {text}}}', one_pass=whole)


def _valid_without_duplicates(text: str) -> bool:
    """json.loads reads text and finds no key twice in a dict: a text the one pass takes whole."""
    def pairs(items):
        if len({k for k, _ in items}) != len(items):
            raise ValueError("duplicate keys")
        return dict(items)
    try:
        json.loads(text, object_pairs_hook=pairs)
    except ValueError:
        return False
    return True


def test_an_instances_big_text_is_copied_not_made_a_str(twins):
    """A Plone page's text lives in a RichTextValue instance: the one pass copies it into the pickle, where
    building the value would make a str of it first (peak memory: the record, not the record and a str)."""
    import tracemalloc

    python, cython = twins
    state = {"text": {"@s": {"_raw": "x" * 2_000_000 + "\u00e9" * 10, "_mimeType": "text/html"},
                      "@cls": ["plone.app.textfield.value", "RichTextValue"]}}
    data = json.dumps(state).encode()
    expected = python.encode_zodb_record({"@cls": ["m", "C"], "@s": json.loads(data)})
    tracemalloc.start()
    try:
        record = cython.encode_zodb_record_from_pg_json("m", "C", data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert record == expected
    if cython is not python and cython.name == "cython":
        assert peak < 1.5 * len(data), peak


def _decimal_texts(seed: int) -> list:
    """Decimal numbers of 1-19 significant digits, the point anywhere, leading zeros, and powers of ten on both
    sides of what the compiled reader computes exactly (up to 15 digits, 1e-22..1e22)."""
    rng = random.Random(seed)
    texts = ["0.0", "-0.0", "0e5", "-0E-5", "1e22", "1e23", "1e-22", "1e-23", "9007199254740993.0",
             "123456789012345.6", "999999999999999.0", "0.000000000000000000001", "4.9e-324", "1.7976931348623157e308"]
    for digits in range(1, 20):
        for exponent in range(-26, 27, 2):
            m = str(rng.randrange(10 ** (digits - 1), 10 ** digits))
            point = rng.randrange(len(m) + 1)
            mantissa = (m[:point] or "0") + "." + (m[point:] or "0")
            texts += [mantissa, f"-{mantissa}e{exponent}", f"{m}E+{exponent}" if exponent >= 0 else f"{m}e{exponent}",
                      f"0.{'0' * rng.randrange(12)}{m}"]
    return texts


@pytest.mark.parametrize("seed", range(3))
def test_decimal_floats_give_the_definitions_doubles(twins, seed):
    check_text(twins, "[" + ", ".join(_decimal_texts(seed)) + "]")


# A str of 1-, 2- or 4-byte characters is turned into UTF-8 a block of 16 or 8 characters at a time: one
# other character (or lone surrogate, also in a 4-byte str) at every position around those blocks.
@pytest.mark.parametrize("char", ODD_CHARACTERS)
def test_one_wide_character_anywhere_in_a_str(twins, char):
    for size in (1, 7, 8, 9, 15, 16, 17, 33):
        for at in range(size):
            for width in ("", "中", "😀"):  # the str's kind whatever char is
                text = "x" * at + char + "y" * (size - at - 1) + width
                check_text(twins, '{"k": "%s", "%s": 1}' % (text, text), one_pass=True)


@pytest.mark.parametrize("char", NOT_THREE_BYTE)
def test_one_other_character_anywhere_in_a_run_of_three_byte_ones(twins, char):
    """Runs of characters of three UTF-8 bytes (U+0800-U+FFFF, surrogates aside) go 8 a step."""
    for size in (2, 8, 9, 16, 17, 25):
        for at in range(size):
            text = THREE_BYTE_RUN[:at] + char + THREE_BYTE_RUN[at:size - 1]
            check_text(twins, '{"k": "%s", "%s": 1}' % (text, text), one_pass=True)


@pytest.mark.parametrize("wide", ["", "\U0001f600"])
def test_every_mix_of_utf8_lengths_in_a_block_of_a_str(twins, wide):
    """A 2- or 4-byte str goes 8 characters a step, any mix of one-, two- and three-byte ones: every such block,
    the text's first 8 characters ('[' and the spaces before the string) a block of their own."""
    check_text(twins, '[      "' + "".join(MIXED_BLOCKS) + '", "%s"]' % wide, one_pass=True)


@pytest.mark.parametrize("tail", ["é", "中", "\ud800", "é中", "😀", "😀\udfff"])
def test_long_strs_of_every_width(twins, tail):
    """Long enough that the UTF-8 is made without the GIL; the odd character last, past every block."""
    texts = ["a" * 70001 + tail, "é" * 70001 + tail, "中" * 70001 + tail, "😀" * 70001 + tail]
    check_text(twins, json.dumps(texts, ensure_ascii=False), one_pass=True)


# ---------------------------------------------------------------------------
# Nesting: to the documented limit and past it
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2])
@pytest.mark.parametrize("shape", ["list", "dict", "@t", "@d", "@cls first", "@s first"])
def test_nesting_around_the_depth_limit(twins, shape, depth):
    value: object = 1
    for _ in range(depth):
        value = {"list": lambda v: [v], "dict": lambda v: {"k": v}, "@t": lambda v: {"@t": [v]},
                 "@d": lambda v: {"@d": [[1, v]]}, "@cls first": lambda v: {"@cls": ["m", "C"], "@s": v},
                 "@s first": lambda v: {"@s": v, "@cls": ["m", "C"]}}[shape](value)
    text = json_text(value)
    python, cython = twins
    for module, name in CLASSES:
        for arg in (text, text.encode()):
            found = observe(python.encode_zodb_record_from_pg_json, module, name, arg)
            assert observe(cython.encode_zodb_record_from_pg_json, module, name, arg) == found
            assert found == observe(python.encode_zodb_record, {"@cls": [module, name], "@s": value})
    assert observe(cython.json_to_pickle, text) == observe(python.json_to_pickle, text)


@pytest.mark.parametrize("levels", [JSON_DEPTH_LIMIT, JSON_DEPTH_LIMIT + 2, 100000])
def test_json_deeper_than_the_limit_is_the_depth_error(twins, levels):
    text = "[" * levels + "]" * levels
    for twin in twins:
        with pytest.raises(ValueError, match="maximum nesting depth exceeded"):
            twin.encode_zodb_record_from_pg_json("app.mod", "Kls", text)
        with pytest.raises(ValueError, match="maximum nesting depth exceeded"):
            twin.encode_zodb_record_from_pg_json("app.mod", "Kls", text.encode())


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

OFFSET = re.compile(r"^JSON error: .+ at offset (\d+)$")


@pytest.mark.parametrize("data, offset", [
    (b'{"a": "\xff"}', 7), (b'{"a": "\xc3"}', 7), (b'"\xed\xa0\x80"', 1), (b'"\xc0\x80"', 1),
    (b'"\xf4\x90\x80\x80"', 1), (b'["\xe4\xb8\xad", \xe4]', 8), (b"\xef\xbb\xbf{}", 0),
    (b'["\xc3\xa9", 1,]', 9), (b'{"\xc3\xa9": 1} x', 10), (b'"\xc3\xa9\\x"', 3), (b"[1, 2", 5),
    (b"[NaN]", 1), (b"[1] [2]", 4), (b"", 0), (b'"abc', 0), (b'{"a" 1}', 5), (b'"a\x01"', 2),
])
def test_bad_bytes_name_the_byte_offset(twins, data, offset):
    python, cython = twins
    for arg in (data, bytearray(data), memoryview(data)):
        found = observe(python.encode_zodb_record_from_pg_json, "app.mod", "Kls", arg)
        assert found == observe(cython.encode_zodb_record_from_pg_json, "app.mod", "Kls", arg)
        assert found[:2] == ("raised", CodecError), found
        assert int(OFFSET.match(found[2]).group(1)) == offset, found


def check_utf8_string(twins, payload: bytes) -> None:
    """payload as a JSON string's bytes: the definition's record, or the ValueError naming the first bad byte."""
    python, cython = twins
    data = b'["' + payload + b'"]'
    found = observe(cython.encode_zodb_record_from_pg_json, "app.mod", "Kls", data)
    assert found == observe(python.encode_zodb_record_from_pg_json, "app.mod", "Kls", data), data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        assert found[:2] == ("raised", CodecError) and int(OFFSET.match(found[2]).group(1)) == exc.start, data
    else:
        expected = _definition(python, "app.mod", "Kls", text)
        assert found == expected if expected is not None else found[:2] == ("raised", CodecError), data


@pytest.mark.parametrize("filler", ["a", "é", "中"])
@pytest.mark.parametrize("size", [16, 31, 64, 100])
def test_utf8_checked_block_by_block(twins, size, filler):
    """Each sequence strict UTF-8 takes or refuses, at every position around the 32-byte blocks the compiled
    reader checks at once."""
    for payload in utf8_texts(size, filler.encode()):
        check_utf8_string(twins, payload)


#: Two-character and \u escapes: each ends a run the compiled reader copies and checks 32 bytes at a time.
RUN_ENDING_ESCAPES = [b'\\n', b'\\"', b'\\\\', b'\\/', b'\\u00e9', b'\\ud83d\\ude00']


def check_one_pass_utf8(twins, payload: bytes) -> None:
    """check_utf8_string, and where the payload is strict UTF-8 and JSON, the one pass must take it by itself (a
    fallback to the normative way would hide a sequence it wrongly refuses)."""
    check_utf8_string(twins, payload)
    data = b'["' + payload + b'"]'
    try:
        expected = _definition(twins[0], "app.mod", "Kls", data.decode("utf-8"))
    except UnicodeDecodeError:
        return
    if expected is not None:  # else a control character: not JSON
        assert observe(twins[1].encode_module._one_pass_record, "app.mod", "Kls", data) == expected, data


@pytest.mark.parametrize("escape", RUN_ENDING_ESCAPES)
@pytest.mark.parametrize("filler", ["a", "中"])
def test_utf8_beside_escapes_checked_block_by_block(twins, escape, filler):
    """Each sequence strict UTF-8 takes or refuses, just before, just after and between escapes, and before
    a long stretch of ASCII, at every position around the first 16 bytes and around the 64th byte."""
    for sequence in UTF8_SEQUENCES:
        for at in (*range(0, 18), *range(58, 76)):
            whole = at // len(filler.encode())
            head = filler.encode() * whole + b"a" * (at - whole * len(filler.encode()))
            for payload in (head + sequence + escape, head + escape + sequence + b"b" * 20,
                            head + escape + sequence + escape + b"c" * 70, head + sequence + b"d" * 80,
                            escape + head + sequence + b"d" * 80):
                check_one_pass_utf8(twins, payload)


@pytest.mark.parametrize("every", [1, 7, 16, 61])
def test_long_strs_with_escapes_past_the_gil_limit(twins, every):
    """Strings longer than the part the compiled reader reads with the GIL held (64 KB), an escape every so
    many characters of each UTF-8 width: the runs after that point are read without the GIL."""
    rng = random.Random(every)
    pieces = ["\n", '"', "\\", "/", "\t", "\x01", "é", "\u2028"]
    text = "".join(rng.choice("aé中😀") * every + rng.choice(pieces) for _ in range(150000 // every))
    check_text(twins, json.dumps([text], ensure_ascii=False), one_pass=True)


_UTF8_PIECES = st.one_of(st.sampled_from(UTF8_SEQUENCES), st.binary(max_size=4),
                         st.text(max_size=24).map(lambda t: t.encode("utf-8", "surrogatepass")))


@SETTINGS
@given(pieces=st.lists(_UTF8_PIECES, max_size=40))
def test_generated_bytes_checked_as_strict_utf8(twins, pieces):
    """Any bytes between the quotes, valid or not in several places."""
    check_utf8_string(twins, b"".join(pieces).replace(b'"', b"'").replace(b"\\", b"/"))


@pytest.mark.parametrize("text", ['{"a": "\x01"}', "[1,]", "[1] x", '{"a": NaN}', "-Infinity", "01", "1.", ".5",
                                  '"\\u12"', '"\\x"', "[", "{", '{"a":', "tru", "nul", '"é', "\ufeff1", "[1\x0b]"])
def test_bad_text_names_the_character_offset(twins, text):
    python, cython = twins
    found = observe(python.encode_zodb_record_from_pg_json, "app.mod", "Kls", text)
    assert found == observe(cython.encode_zodb_record_from_pg_json, "app.mod", "Kls", text)
    assert found[:2] == ("raised", CodecError) and OFFSET.match(found[2]), found
    assert observe(cython.json_to_pickle, text) == observe(python.json_to_pickle, text)


@pytest.mark.parametrize("args", [(1, "C", "{}"), ("m", None, "{}"), ("m", "C", 1), ("m", "C", None),
                                  ("m", "C", ["{}"]), (b"m", "C", "{}")])
def test_arguments_of_the_wrong_type_are_type_errors(twins, args):
    python, cython = twins
    found = observe(python.encode_zodb_record_from_pg_json, *args)
    assert found == observe(cython.encode_zodb_record_from_pg_json, *args)
    assert found[:2] == ("raised", TypeError), found


# ---------------------------------------------------------------------------
# The storage's way, against a real PostgreSQL
# ---------------------------------------------------------------------------

def _corpus_records() -> list:
    """(label, record) of every record of the corpus but the two that nothing can load (test_corpus.UNLOADABLE:
    their bytes are checked against the dict way below)."""
    return [(f"{name} {oid}", data) for name in corpus.NAMES for oid, data in corpus.records(name)
            if (name, oid) not in UNLOADABLE]


def test_records_back_from_jsonb_text_hold_the_same_objects(impl, pg_dsn):
    """decode -> jsonb -> text (PostgreSQL's own output) -> encode_zodb_record_from_pg_json, whole corpus."""
    from pgjsonb import jsonb_texts

    records = _corpus_records()
    rows = [impl.decode_zodb_record_for_pg_json(data) for _, data in records]
    texts = jsonb_texts(pg_dsn, [text for _, _, text, _ in rows])
    lost = [label for (label, data), (module, name, _, _), text in zip(records, rows, texts)
            if not same_records(data, impl.encode_zodb_record_from_pg_json(module, name, text))]
    assert not lost, lost[:20]
    unloadable = [corpus.row_record(row) for name in corpus.NAMES for row in corpus.vectors(name)
                  if (name, row["oid"]) in UNLOADABLE]
    assert len(unloadable) == len(UNLOADABLE)
    rows += [impl.decode_zodb_record_for_pg_json(data) for data in unloadable]
    texts += jsonb_texts(pg_dsn, [text for _, _, text, _ in rows[len(texts):]])
    dict_way = [impl.encode_zodb_record({"@cls": [module, name], "@s": json.loads(text)})
                for (module, name, _, _), text in zip(rows, texts)]
    assert dict_way == [impl.encode_zodb_record_from_pg_json(module, name, text.encode())
                        for (module, name, _, _), text in zip(rows, texts)]


@pytest.mark.slow
@pytest.mark.skipif(sys.implementation.name == "pypy",
                    reason="psycopg 3 does not run on PyPy 7.3 (see tests/pgjsonb.py); the jsonb test above covers it")
def test_the_documented_psycopg_usage(impl, pg_dsn):
    """docs/api.md: a table of the corpus, fetched with a ::text cast and with an identity json loader."""
    import psycopg
    from psycopg.types.json import set_json_loads

    records = [data for _, data in _corpus_records()]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TEMPORARY TABLE object_state"
                     " (zoid BIGINT PRIMARY KEY, class_mod TEXT, class_name TEXT, state JSONB)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO object_state VALUES (%s, %s, %s, %s::jsonb)",
                            [(zoid, *impl.decode_zodb_record_for_pg_json(data)[:3])
                             for zoid, data in enumerate(records)])
        lost = []
        for zoid, data in enumerate(records):
            cur = conn.execute("SELECT class_mod, class_name, state::text FROM object_state WHERE zoid = %s", (zoid,))
            if not same_records(data, impl.encode_zodb_record_from_pg_json(*cur.fetchone())):
                lost.append(("::text", zoid))
        set_json_loads(lambda text: text, conn)
        for zoid, data in enumerate(records):
            cur = conn.execute("SELECT class_mod, class_name, state FROM object_state WHERE zoid = %s", (zoid,))
            row = cur.fetchone()
            assert type(row[2]) is bytes  # what docs/api.md says the loader gets (the report times it so)
            if not same_records(data, impl.encode_zodb_record_from_pg_json(*row)):
                lost.append(("loader", zoid))
    assert not lost, lost[:20]
