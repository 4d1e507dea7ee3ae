"""Values that exist: every marker an encoder reads gives an object its type can hold, or a ValueError.

JSON in a database can be edited by anyone with SQL.  ``{"@dt": "2024-02-30T10:00:00"}`` used to become a
datetime of February 30th (its state bytes taken as they were), and ``+25:00``, hour 99 or ``{"@td":
[10**10, 0, 0]}`` records that failed only when ZODB loaded them.  Each encoder of both twins now refuses
them with a ``CodecError`` (a ValueError) naming the marker and the bad part (docs/format.md, "Values that
exist"), and writes the values at the edges of each range as it did before: the same bytes as the native
value's (whose pickle the codec takes from ``__reduce__``, not from the marker's text).
"""

from __future__ import annotations

import datetime
import decimal
import json
import pickle
import random
import uuid

import pytest

from twinloader import load_twin
from zodb_json_codec._common import CodecError

APP = ("app.models", "Thing")

BERLIN = "Europe/Berlin"


def _pytz(*args) -> dict:
    return {"pytz": [BERLIN, *args], "name": BERLIN}


#: (marker, the part the message names): each refused by every encoder of both twins.
BAD = {
    "February 30th": ({"@dt": "2024-02-30T10:00:00"}, "day 30"),
    "February 29th of a common year": ({"@dt": "2023-02-29T10:00:00"}, "day 29"),
    "February 29th of 1900": ({"@dt": "1900-02-29T00:00:00"}, "day 29"),
    "April 31st": ({"@dt": "2024-04-31T00:00:00"}, "day 31"),
    "day 0": ({"@dt": "2024-01-00T00:00:00"}, "day 0"),
    "day 32": ({"@dt": "2024-01-32T00:00:00"}, "day 32"),
    "month 0": ({"@dt": "2024-00-10T00:00:00"}, "month 0"),
    "month 13, day 45, hour 99": ({"@dt": "2024-13-45T99:00:00"}, "month 13"),
    "year 0": ({"@dt": "0000-01-01T00:00:00"}, "year 0"),
    "year 10000": ({"@dt": "10000-01-01T00:00:00"}, "year 10000"),
    "hour 24": ({"@dt": "2024-01-01T24:00:00"}, "hour 24"),
    "minute 60": ({"@dt": "2024-01-01T10:60:00"}, "minute 60"),
    "second 60": ({"@dt": "2024-01-01T10:00:60"}, "second 60"),
    "hour 99 written short": ({"@dt": "2024-1-1T99:0:0"}, "hour 99"),
    "offset +25:00": ({"@dt": "2024-01-01T10:00:00+25:00"}, "offset hours 25"),
    "offset +24:00": ({"@dt": "2024-01-01T10:00:00+24:00"}, "offset hours 24"),
    "offset -24:00:00.5": ({"@dt": "2024-01-01T10:00:00-24:00:00.5"}, "offset hours 24"),
    "offset minutes 60": ({"@dt": "2024-01-01T10:00:00+05:60"}, "offset minutes 60"),
    "offset seconds 60": ({"@dt": "2024-01-01T10:00:00+05:00:60"}, "offset seconds 60"),
    "a bad date with a zoneinfo zone": ({"@dt": "2024-02-30T10:00:00", "@tz": {"zoneinfo": BERLIN}}, "day 30"),
    "a bad hour with a pytz zone": ({"@dt": "2024-01-01T24:00:00", "@tz": _pytz(3600, 0, "CET")}, "hour 24"),
    "a pytz utcoffset of a day": ({"@dt": "2024-01-01T10:00:00", "@tz": _pytz(86400, 0, "CET")}, "utcoffset"),
    "a pytz utcoffset of minus a day": ({"@dt": "2024-01-01T10:00:00", "@tz": _pytz(-86400, 0, "X")}, "utcoffset"),
    "a pytz dstoffset past a day": ({"@dt": "2024-07-01T10:00:00", "@tz": _pytz(7200, 10 ** 30, "CEST")},
                                    "dstoffset"),
    "a date of February 30th": ({"@date": "2024-02-30"}, "day 30"),
    "a date of February 29th, 2100": ({"@date": "2100-02-29"}, "day 29"),
    "a date of year 0": ({"@date": "0000-01-01"}, "year 0"),
    "a date of month 13": ({"@date": "2024-13-01"}, "month 13"),
    "a date of June 31st": ({"@date": "2024-06-31"}, "day 31"),
    "a time of hour 24": ({"@time": "24:00:00"}, "hour 24"),
    "a time of minute 60": ({"@time": "12:60:00"}, "minute 60"),
    "a time of second 60": ({"@time": "12:00:60"}, "second 60"),
    "a time with offset +24:00": ({"@time": "12:00:00+24:00"}, "offset hours 24"),
    "a time of hour 25 with a zone": ({"@time": "25:00:00", "@tz": _pytz(3600, 0, "CET")}, "hour 25"),
    "a time with a pytz offset of a day": ({"@time": "12:00:00", "@tz": _pytz(-86400, 0, "X")}, "utcoffset"),
    "timedelta of 10**9 days": ({"@td": [1000000000, 0, 0]}, "days"),
    "timedelta of -10**9 days": ({"@td": [-1000000000, 0, 0]}, "days"),
    "timedelta past its max by a second": ({"@td": [999999999, 86400, 0]}, "days"),
    "timedelta past its max by a microsecond": ({"@td": [999999999, 86399, 1000000]}, "days"),
    "timedelta past its min by a microsecond": ({"@td": [-999999999, 0, -1]}, "days"),
    "timedelta of 10**9 days in seconds": ({"@td": [0, 86400 * 10 ** 9, 0]}, "days"),
    "timedelta of 10**9 days in microseconds": ({"@td": [0, 0, 86400 * 10 ** 15]}, "days"),
    "timedelta of 2**64 days": ({"@td": [2 ** 64, 0, 0]}, "days"),
    "decimal of letters": ({"@dec": "abc"}, "@dec"),
    "decimal with two points": ({"@dec": "1.2.3"}, "@dec"),
    "empty decimal": ({"@dec": ""}, "@dec"),
    "decimal without exponent digits": ({"@dec": "1e"}, "@dec"),
    "decimal with two signs": ({"@dec": "--1"}, "@dec"),
    "decimal in hex": ({"@dec": "0x10"}, "@dec"),
    "decimal with a space inside": ({"@dec": "1 2"}, "@dec"),
    "decimal infinity and more": ({"@dec": "Infinityx"}, "@dec"),
    "decimal with U+0000": ({"@dec": "1\x00"}, "@dec"),
    "decimal with an exponent past any": ({"@dec": "1e" + "9" * 30}, "@dec"),
    "uuid of three letters": ({"@uuid": "xyz"}, "@uuid"),
    "uuid not hex": ({"@uuid": "g" * 32}, "@uuid"),
    "uuid of 36 characters with a letter not hex": ({"@uuid": "0000000g-0000-0000-0000-000000000000"}, "@uuid"),
    "uuid too long": ({"@uuid": "0" * 33}, "@uuid"),
    "bigint not a number": ({"@bi": "12a"}, "@bi"),
    "bigint empty": ({"@bi": ""}, "@bi"),
    "bigint with a point": ({"@bi": "1.5"}, "@bi"),
    "float not a float": ({"@f": "NaNa"}, "@f"),
    "float past the largest": ({"@f": "1e400"}, "@f"),
    "float empty": ({"@f": ""}, "@f"),
}


def _state(marker) -> dict:
    return {"v": marker, "after": [1, marker]}


def every_encoder(impl, state: dict) -> dict:
    """The four encoders of a twin, each on state (as a record's state or a single pickle's value)."""
    return {
        "encode_zodb_record": lambda: impl.encode_zodb_record({"@cls": list(APP), "@s": state}),
        "encode_zodb_record_from_pg_json": lambda: impl.encode_zodb_record_from_pg_json(*APP, json.dumps(state)),
        "encode_zodb_record_from_pg_json (bytes)":
            lambda: impl.encode_zodb_record_from_pg_json(*APP, json.dumps(state).encode("utf-8")),
        "dict_to_pickle": lambda: impl.dict_to_pickle(state),
        "json_to_pickle": lambda: impl.json_to_pickle(json.dumps(state)),
    }


@pytest.mark.parametrize("case", list(BAD))
def test_a_value_that_does_not_exist_is_refused_naming_the_marker(impl, case):
    marker, part = BAD[case]
    name = "@tz" if part in ("utcoffset", "dstoffset") else next(iter(marker))  # the marker the message names
    for where, call in every_encoder(impl, _state(marker)).items():
        with pytest.raises(CodecError) as caught:
            call()
        message = str(caught.value)
        assert isinstance(caught.value, ValueError)
        assert name in message and part in message, (where, message)


@pytest.fixture(scope="module")
def both():
    return load_twin("python"), load_twin("cython")


def _outcome(call):
    try:
        return "ok", call()
    except ValueError as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("case", list(BAD))
def test_the_twins_refuse_with_the_same_message(both, case):
    python, cython = both
    marker, _ = BAD[case]
    for (where, p), c in zip(every_encoder(python, _state(marker)).items(),
                             every_encoder(cython, _state(marker)).values()):
        assert _outcome(p) == _outcome(c), where


# Values at the edges of each range, each with the native value it stands for: the marker must be written as
# the native value is (which the encoders take from its __reduce__, not from any text), and load as it.
UTC = datetime.timezone.utc


def _tz(**kw) -> datetime.timezone:
    return datetime.timezone(datetime.timedelta(**kw))


GOOD = {
    "February 29th, 2024": ({"@dt": "2024-02-29T10:00:00"}, datetime.datetime(2024, 2, 29, 10)),
    "February 29th, 2000": ({"@date": "2000-02-29"}, datetime.date(2000, 2, 29)),
    "February 28th, 1900": ({"@date": "1900-02-28"}, datetime.date(1900, 2, 28)),
    "the first day": ({"@dt": "0001-01-01T00:00:00"}, datetime.datetime(1, 1, 1)),
    "the last moment": ({"@dt": "9999-12-31T23:59:59.999999"}, datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)),
    "the first date": ({"@date": "0001-01-01"}, datetime.date(1, 1, 1)),
    "the last date": ({"@date": "9999-12-31"}, datetime.date(9999, 12, 31)),
    "the 31st of every long month": (
        [{"@date": f"2023-{m:02d}-31"} for m in (1, 3, 5, 7, 8, 10, 12)],
        [datetime.date(2023, m, 31) for m in (1, 3, 5, 7, 8, 10, 12)]),
    "the 30th of every short month but February": (
        [{"@date": f"2023-{m:02d}-30"} for m in (4, 6, 9, 11)], [datetime.date(2023, m, 30) for m in (4, 6, 9, 11)]),
    "the last time of day": ({"@time": "23:59:59.999999"}, datetime.time(23, 59, 59, 999999)),
    "midnight": ({"@time": "00:00:00"}, datetime.time(0, 0)),
    "offset +23:59": ({"@dt": "2024-01-01T10:00:00+23:59"},
                      datetime.datetime(2024, 1, 1, 10, tzinfo=_tz(hours=23, minutes=59))),
    "offset -23:59": ({"@dt": "2024-01-01T10:00:00-23:59"},
                      datetime.datetime(2024, 1, 1, 10, tzinfo=_tz(hours=-23, minutes=-59))),
    "offset +23:59:59.999999": (
        {"@dt": "2024-01-01T10:00:00+23:59:59.999999"},
        datetime.datetime(2024, 1, 1, 10, tzinfo=_tz(hours=23, minutes=59, seconds=59, microseconds=999999))),
    "offset -23:59:59.999999 on a time": (
        {"@time": "12:00:00-23:59:59.999999"},
        datetime.time(12, tzinfo=_tz(hours=-23, minutes=-59, seconds=-59, microseconds=-999999))),
    "offset +00:00": ({"@dt": "2024-01-01T10:00:00+00:00"}, datetime.datetime(2024, 1, 1, 10, tzinfo=UTC)),
    "the largest timedelta": ({"@td": [999999999, 86399, 999999]}, datetime.timedelta.max),
    "the smallest timedelta": ({"@td": [-999999999, 0, 0]}, datetime.timedelta.min),
    "no time at all": ({"@td": [0, 0, 0]}, datetime.timedelta(0)),
    "a week and an hour": ({"@td": [7, 3600, 0]}, datetime.timedelta(days=7, hours=1)),
    "a decimal": ({"@dec": "99.99"}, decimal.Decimal("99.99")),
    "a negative decimal": ({"@dec": "-6.83"}, decimal.Decimal("-6.83")),
    "a long decimal": ({"@dec": "3.14159265358979323846264338327950288"},
                       decimal.Decimal("3.14159265358979323846264338327950288")),
    "a decimal with an exponent": ({"@dec": "1E+5"}, decimal.Decimal("1E+5")),
    "a small decimal": ({"@dec": "1E-7"}, decimal.Decimal("1E-7")),
    "NaN": ({"@dec": "NaN"}, decimal.Decimal("NaN")),
    "signalling NaN": ({"@dec": "sNaN"}, decimal.Decimal("sNaN")),
    "minus infinity": ({"@dec": "-Infinity"}, decimal.Decimal("-Infinity")),
    "a UUID": ({"@uuid": "00000000-0000-0000-0000-000000003039"}, uuid.UUID(int=12345)),
    "the largest UUID": ({"@uuid": "ffffffff-ffff-ffff-ffff-ffffffffffff"}, uuid.UUID(int=2 ** 128 - 1)),
}


@pytest.mark.parametrize("case", list(GOOD))
def test_values_at_the_edges_are_written_as_before(impl, case):
    marker, native = GOOD[case]
    want = impl.dict_to_pickle({"v": native})
    assert impl.dict_to_pickle({"v": marker}) == want
    assert repr(pickle.loads(want)["v"]) == repr(native)  # repr: a NaN is not equal to itself
    record = impl.encode_zodb_record({"@cls": list(APP), "@s": {"v": native}})
    for where, call in every_encoder(impl, {"v": marker}).items():
        assert call() == (record if where.startswith("encode_zodb_record") else want), where


@pytest.mark.parametrize("tz, offsets", [
    ({"pytz": ["Europe/Berlin", 3600, 0, "CET"], "name": "Europe/Berlin"}, (3600, 0)),
    ({"pytz": ["Europe/Berlin", 7200, 3600, "CEST"], "name": "Europe/Berlin"}, (7200, 3600)),
    ({"pytz": ["America/Adak", -36000, 0, "HST"], "name": "America/Adak"}, (-36000, 0)),
    ({"pytz": ["America/St_Johns", -86399, 0, "X"], "name": "America/St_Johns"}, (-86399, 0)),
    ({"pytz": ["Asia/Tokyo", 86399, 86399, "X"], "name": "Asia/Tokyo"}, (86399, 86399)),
    ({"pytz": ["UTC"], "name": "UTC"}, None),
])
def test_pytz_offsets_under_a_day_are_written(impl, tz, offsets):
    marker = {"@dt": "2024-07-01T09:00:00", "@tz": tz}
    written = impl.dict_to_pickle({"v": marker})
    assert written.count(b"cpytz\n_p\n") == 1
    for where, call in every_encoder(impl, {"v": marker}).items():
        call()
    if offsets is not None:
        value = pickle.loads(written)["v"]
        assert (value.utcoffset(), value.dst()) == tuple(datetime.timedelta(seconds=s) for s in offsets)


def test_timedelta_parts_are_kept_as_written(impl):
    """timedelta(days, seconds, microseconds) normalises: parts past a day are the same value, written as given."""
    for parts in ([0, 86400 * 999999999, 0], [1, -86400, 0], [-1000000000, 86400, 0], [0, 0, 86400 * 10 ** 6]):
        written = impl.dict_to_pickle({"v": {"@td": parts}})
        assert pickle.loads(written)["v"] == datetime.timedelta(*parts)
        assert impl.json_to_pickle(json.dumps({"v": {"@td": parts}})) == written


# The texts each rule takes as it took them before (only values that do not exist are refused now).
SPELLINGS = [
    {"@dt": "2024-1-5T1:2:3"}, {"@dt": "02024-001-005T001:002:003.5"}, {"@dt": "2024-01-01T10:00:00Z"},
    {"@dt": "2024-01-01T10:00:00.1234567"}, {"@dt": "2024-01-01T10:00:00."}, {"@date": "2024-01-01T10:00:00"},
    {"@date": "2024-01-01junk"}, {"@dt": "\u0662\u0660\u0662\u0664-01-01T10:00:00"}, {"@time": "1:2:3+05:30"},
    {"@dec": " 1.5 "}, {"@dec": "1_000"}, {"@dec": "\u0661\u0662"}, {"@dec": "inf"}, {"@dec": "nan123"},
    {"@dec": "+.5"}, {"@dec": "5."}, {"@dec": "1e999999999"}, {"@dec": "-0"}, {"@uuid": "0" * 32},
    {"@uuid": "0" * 8 + "-" * 9 + "0" * 24},
    {"@uuid": "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"}, {"@bi": "+18446744073709551616"},
]


@pytest.mark.parametrize("marker", SPELLINGS, ids=lambda m: json.dumps(m)[:50])
def test_other_spellings_are_still_read(both, marker):
    python, cython = both
    written = python.dict_to_pickle({"v": marker})
    pickle.loads(written)
    for twin in both:
        for where, call in every_encoder(twin, {"v": marker}).items():
            if not where.startswith("encode_zodb_record"):
                assert call() == written, (twin.name, where)


def test_the_twins_agree_on_generated_texts(both):
    """The Cython twin checks the usual spellings in C and hands the rest to the Python rules: texts near and
    off the usual spellings give the same bytes or the same message from both."""
    python, cython = both
    rng = random.Random(7)

    def piece(width: int) -> str:
        r = rng.random()
        if r < 0.7:
            return "".join(rng.choice("0123456789") for _ in range(width))
        if r < 0.9:
            return str(rng.randrange(0, 400))
        return rng.choice(["", "a", "1x", "\u0663", "1234567"])

    texts = []
    for _ in range(2000):
        date = piece(4) + rng.choice("---/") + piece(2) + rng.choice("---") + piece(2)
        clock = piece(2) + rng.choice("::::.") + piece(2) + rng.choice("::::") + piece(2)
        if rng.random() < 0.3:
            clock += "." + piece(rng.randrange(0, 8))
        offset = rng.choice(["", "", "Z", "+" + piece(2) + ":" + piece(2), "-" + piece(2) + ":" + piece(2) + ":"
                             + piece(2), "+" + piece(2) + ":" + piece(2) + ":" + piece(2) + "." + piece(3)])
        tail = rng.choice(["", "", "", "7", "x"])
        texts += [{"@dt": date + "T" + clock + offset + tail}, {"@date": date + tail}, {"@time": clock + offset}]
        texts.append({"@dec": "".join(rng.choice("0123456789+-.eE _nNaIf") for _ in range(rng.randrange(0, 9)))})
        texts.append({"@td": [rng.choice([0, 1, -1, 86399, 86400, 10 ** 6, 2 ** 30, 2 ** 31, 2 ** 63, 999999999,
                                          999900000, -999900000, 10 ** 9]) * rng.choice([1, -1]) for _ in range(3)]})
    accepted = 0
    for marker in texts:
        p = _outcome(lambda: python.dict_to_pickle({"v": marker}))
        c = _outcome(lambda: cython.dict_to_pickle({"v": marker}))
        assert p == c, marker
        text = json.dumps({"v": marker})
        assert _outcome(lambda: cython.json_to_pickle(text)) == p, marker
        if p[0] == "ok":
            accepted += 1
            pickle.loads(p[1])["v"].__reduce__()
    assert 1000 < accepted < len(texts) - 1000


# A pickle of a value that does not exist (pickle loads a datetime state of February 30th: CPython takes the
# state bytes as they are) is kept by the decoders in the generic form, which every encoder writes back as it
# was: the markers stand only for values that exist (docs/format.md, "Values that exist").
def _in_dict(value_opcodes: bytes) -> bytes:
    """A protocol 3 pickle of {"v": the value the opcodes push}."""
    return b"\x80\x03}X\x01\x00\x00\x00v" + value_opcodes + b"s."


IMPOSSIBLE_PICKLES = {
    "a datetime state of February 30th": _in_dict(
        b"cdatetime\ndatetime\nC\n" + bytes((2024 >> 8, 2024 & 255, 2, 30, 10, 0, 0, 0, 0, 0)) + b"\x85R"),
    "a datetime state of year 0": _in_dict(b"cdatetime\ndatetime\nC\n" + bytes((0, 0, 1, 1, 0, 0, 0, 0, 0, 0))
                                           + b"\x85R"),
    "a date state of year 10000": _in_dict(
        b"cdatetime\ndate\nC\x04" + bytes((10000 >> 8, 10000 & 255, 1, 1)) + b"\x85R"),
    "a date state of April 31st": _in_dict(b"cdatetime\ndate\nC\x04" + bytes((7, 232, 4, 31)) + b"\x85R"),
    "Decimal('abc')": _in_dict(b"cdecimal\nDecimal\nX\x03\x00\x00\x00abc\x85R"),
    "timedelta(10**10, 0, 0)": _in_dict(b"cdatetime\ntimedelta\n\x8a\x05" + (10 ** 10).to_bytes(5, "little")
                                        + b"K\x00K\x00\x87R"),
    "timedelta(0, 10**15, 0)": _in_dict(b"cdatetime\ntimedelta\nK\x00\x8a\x07" + (10 ** 15).to_bytes(7, "little")
                                        + b"K\x00\x87R"),
}
MARKERS = ("@dt", "@date", "@dec", "@td", "@tz")


@pytest.mark.parametrize("case", list(IMPOSSIBLE_PICKLES))
def test_a_pickle_of_a_value_that_does_not_exist_is_kept_in_the_generic_form(impl, case):
    data = IMPOSSIBLE_PICKLES[case]
    decoded = impl.pickle_to_dict(data)
    assert not any(marker in json.dumps(decoded) for marker in MARKERS), decoded
    assert impl.pickle_to_dict(impl.dict_to_pickle(decoded)) == decoded
    record = pickle.dumps(APP, 3) + data
    for again in (impl.encode_zodb_record(impl.decode_zodb_record(record)),
                  impl.encode_zodb_record_from_pg_json(*impl.decode_zodb_record_for_pg_json(record)[:3])):
        assert impl.decode_zodb_record(again) == impl.decode_zodb_record(record)


def _pytz_datetime(utcoffset: int) -> bytes:
    """{"v": datetime(2024, 1, 5, 10, tzinfo=pytz._p("Europe/Berlin", utcoffset, 0, "CET"))}."""
    return _in_dict(b"cdatetime\ndatetime\nC\n" + bytes((7, 232, 1, 5, 10, 0, 0, 0, 0, 0))
                    + b"cpytz\n_p\n(X\x0d\x00\x00\x00Europe/BerlinJ" + utcoffset.to_bytes(4, "little", signed=True)
                    + b"K\x00X\x03\x00\x00\x00CETtR\x86R")


@pytest.mark.parametrize("utcoffset, kept", [(3600, True), (86399, True), (-86399, True), (86400, False),
                                             (-86400, False), (10 ** 6, False)])
def test_a_pytz_zone_past_a_day_is_kept_in_the_generic_form(both, utcoffset, kept):
    # The encoders refuse a @tz offset of a day or more; the decoders write one only under a day, and the
    # direct lane of the store path agrees.
    record = pickle.dumps(APP, 3) + _pytz_datetime(utcoffset)
    for twin in both:
        decoded = twin.decode_zodb_record(record)
        assert ("@tz" in json.dumps(decoded)) is kept, (twin.name, decoded)
        assert twin.decode_zodb_record(twin.encode_zodb_record(decoded)) == decoded
    lane = both[1].decode_module._direct_lane_record(record)
    assert lane is None or lane == both[0].decode_zodb_record_for_pg_json(record)


def test_the_decoders_agree_on_generated_decimal_texts(both):
    # The Cython decoder and the direct lane read the usual Decimal texts in C (_datetext.decimal_text) and
    # hand the rest to _known.decimal_reads: a @dec for exactly the texts decimal.Decimal reads, in both twins.
    rng = random.Random(7)
    alphabet = "0123456789+-.eEinfatyINFATYsS _"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9))) for _ in range(4000)]
    texts += ["Inf", "-infinity", "NaN", "sNaN12", "+.5e-3", "1.e5", "1e", ".", "-", "e5", "nan.", "Infinit",
              "1e999999999", "1e9999999999", "1e" + "9" * 30, "1e000000000001"]
    context = decimal.Context(traps=[decimal.InvalidOperation])
    lane = both[1].decode_module._direct_lane_record
    kept = 0
    for text in texts:
        raw = text.encode()
        record = pickle.dumps(APP, 3) + _in_dict(b"cdecimal\nDecimal\nX" + len(raw).to_bytes(4, "little") + raw
                                                 + b"\x85R")
        try:
            decimal.Decimal(text, context)
            reads = True
        except decimal.InvalidOperation:
            reads = False
        python, cython = (twin.decode_zodb_record_for_pg_json(record) for twin in both)
        assert python == cython, text
        assert ('"@dec"' in python[2]) is reads, (text, python[2])
        assert lane(record) in (None, python), text
        kept += reads
    assert 200 < kept < len(texts) - 200
