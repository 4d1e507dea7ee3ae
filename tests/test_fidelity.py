"""The "same objects" comparison behind ``zodb-json-codec verify`` (zodb_json_codec._db.fidelity)."""

from __future__ import annotations

import datetime
import decimal
import functools
import pickle
import sys
import uuid

import pytest

import helpers
from helpers import Ref, same_records
from zodb_json_codec._db.fidelity import Inert, load_record, same

PM = ("persistent.mapping", "PersistentMapping")
record = functools.partial(helpers.record, klass=PM)  # record(state, protocol=3)


def global_(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n."


# Application classes: this test process knows them, the loader must not
# import them.
class App:
    def __init__(self, x=None):
        self.x = x


class Reduced:
    def __init__(self, x):
        self.x = x

    def __reduce__(self):
        return (App, (self.x,), {"x": self.x})


VALUES = [
    {"a": 1, "b": [1, 2.5, None, True], "c": ("t", b"bytes")},
    {"when": datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc), "day": datetime.date(2020, 1, 2)},
    {"d": decimal.Decimal("1.10"), "u": uuid.UUID(int=12345), "s": {1, 2}, "f": frozenset({"x"})},
    {"big": 2**200, "neg": -(2**70), "nul": "a\x00b", "ba": bytearray(b"xy")},
    {"app": App(3)},
    {"ref": Ref((b"\x00" * 7 + b"\x05", None))},
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("protocol", [1, 2, 4, 5])
def test_protocols_spell_the_same_objects(value, protocol):
    assert same_records(record(value, 3), record(value, protocol))


@pytest.mark.parametrize(
    "a, b",
    [
        ({"x": 0.0}, {"x": -0.0}),
        ({"x": 1}, {"x": 1.0}),
        ({"x": True}, {"x": 1}),
        ({"x": "a"}, {"x": b"a"}),
        ({"x": decimal.Decimal("1.0")}, {"x": decimal.Decimal("1")}),
        ({"x": [1, 2]}, {"x": (1, 2)}),
        ({"x": 1}, {"x": 1, "y": 2}),
        ({"x": {1, 2}}, {"x": frozenset({1, 2})}),
        ({"x": App(1)}, {"x": App(2)}),
        ({"x": App(1)}, {"x": Reduced(1)}),  # NEWOBJ is not REDUCE
        ({"x": Ref((b"\x00" * 8, None))}, {"x": Ref((b"\x00" * 7 + b"\x01", None))}),
        (
            {"x": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=1), "CET"))},
            {"x": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))},
        ),
        ({"x": datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone.utc)}, {"x": datetime.datetime(2024, 1, 1, 12)}),
        ({"x": datetime.datetime(2021, 11, 7, 1, 30)}, {"x": datetime.datetime(2021, 11, 7, 1, 30, fold=1)}),
    ],
)
def test_differences_are_found(a, b):
    # Protocol 4: the first that pickles a datetime's fold.
    assert not same_records(record(a, 4), record(b, 4))
    assert not same_records(record(b, 4), record(a, 4))


def test_nan_equals_nan():
    assert same_records(record({"x": float("nan")}), record({"x": float("nan")}, 2))


@pytest.mark.parametrize("value", [
    frozenset([float("nan"), 1.0]),
    {float("nan"), float("nan"), float("nan"), 0.0},
    frozenset([(float("nan"), "a"), (float("nan"), "b")]),
    frozenset([frozenset([float("nan")]), frozenset([2.0])]),
    {(float("nan"), 1): "a", frozenset([float("nan")]): "b", 2.0: "c"},
], ids=["nan", "nans", "tuples-with-nan", "sets-with-nan", "dict-keys-with-nan"])
def test_sets_and_dict_keys_holding_nan_are_the_same_after_a_trip(value):
    # A NaN hashes by identity: pairing set items (dict keys) by hash alone called these different (fuzz_values).
    assert same(value, pickle.loads(pickle.dumps(value, 3)))
    assert same_records(record({"x": value}), record({"x": value}, 2))


def test_nested_sets_holding_nan_pair_in_linear_steps_per_level():
    # (pairing the unmatched items by `same` instead took exponential time: a fuzz input did not finish).
    # Built twice: equal values whose NaNs are other objects, as after a round trip (a pickle round trip
    # of 200 levels passes PyPy's recursion limit in its Python pickler).
    def nested():
        value = float("nan")
        for i in range(200):
            value = frozenset([value, i, (float("nan"), i)])
        return value

    assert same(nested(), nested())


@pytest.mark.parametrize("a, b", [
    (frozenset([float("nan"), 1.0]), frozenset([float("nan"), 2.0])),
    ({float("nan"), float("nan")}, {float("nan"), 0.0}),
    (frozenset([(float("nan"), "a")]), frozenset([(float("nan"), "b")])),
    (frozenset([frozenset([float("nan")])]), frozenset([frozenset([1.0])])),
    ({(float("nan"), 1): "a", 2.0: "c"}, {(float("nan"), 1): "b", 2.0: "c"}),
    ({(float("nan"), 1): "a", 2.0: "c"}, {(float("nan"), 2): "a", 2.0: "c"}),
])
def test_sets_holding_nan_still_differ_where_they_differ(a, b):
    assert not same(a, b) and not same(b, a)


def test_class_metadata_forms_are_alike():
    state = pickle.dumps({"data": {}}, 3)
    forms = [
        global_(*PM),  # a bare GLOBAL
        pickle.dumps(PM, 3),  # (module, name)
        pickle.dumps((PM, None), 3),  # ((module, name), None): ZODB 3.x and this codec's encoder
        # Python 2 byte-string names, protocol 1
        b"(U\x12persistent.mappingU\x11PersistentMappingt.",
    ]
    loaded = [load_record(form + state) for form in forms]
    assert all(item == (("persistent.mapping.PersistentMapping", None), {"data": {}}) for item in loaded), loaded


def test_class_metadata_keeps_constructor_arguments():
    state = pickle.dumps(None, 3)
    with_args = load_record(pickle.dumps((PM, (1, 2)), 3) + state)
    assert with_args[0] == ("persistent.mapping.PersistentMapping", (1, 2))
    assert not same(with_args, load_record(pickle.dumps((PM, None), 3) + state))


def test_application_classes_are_never_imported():
    data = global_("no_such_package.module", "Klass") + b"(dp0\nVa\nI1\ns."
    (name, args), state = load_record(data)
    assert name == "no_such_package.module.Klass" and args is None
    assert "no_such_package" not in sys.modules
    obj = load_record(global_(*PM) + pickle.dumps(App(1), 2))[1]
    assert isinstance(obj, Inert) and type(obj).__qualname__ == f"{__name__}.App"
    assert obj._state == {"x": 1} and obj._called is False


def test_python2_names_match_python3_names():
    # copy_reg/__builtin__ (protocol 2 from Python 2) and copyreg/builtins name the same globals.
    py2 = b"\x80\x02c__builtin__\nset\nq\x00]q\x01K\x01a\x85q\x02Rq\x03."
    py3 = pickle.dumps({1}, 2)
    assert same(load_record(global_(*PM) + py2), load_record(global_(*PM) + py3))


def test_memo_is_shared_between_the_two_pickles():
    # ZODB pickles class and state with one pickler: the state may refer to
    # the class pickle's memo.  BINGET 0 fetches the class from the first pickle.
    klass = b"\x80\x03cpersistent.mapping\nPersistentMapping\nq\x00."
    state = b"\x80\x03}q\x01X\x01\x00\x00\x00kq\x02h\x00s."
    (name, _), loaded = load_record(klass + state)
    assert name == "persistent.mapping.PersistentMapping"
    assert loaded["k"].__qualname__ == "persistent.mapping.PersistentMapping"


def test_shared_and_recursive_structures():
    shared = [1, 2]
    loop = []
    loop.append(loop)
    a = record({"a": shared, "b": shared, "loop": loop})
    assert same_records(a, record({"a": shared, "b": shared, "loop": loop}, 2))
    assert not same_records(record({"loop": loop}), record({"loop": [1]}))


def test_deep_nesting_needs_no_recursion():
    # Lists nested 5000 deep, written by hand (pickling them would recurse):
    # N EMPTY_LISTs, then N-1 APPENDs each put a list into the one below.
    depth = 5000
    body = b"]" * depth + b"a" * (depth - 1) + b"."
    klass = global_(*PM)
    a, b = klass + b"\x80\x03" + body, klass + b"\x80\x02" + body
    assert same_records(a, b)
    assert not same_records(a, klass + b"\x80\x03" + b"]" * depth + b"a" * (depth - 2) + b"0.")


def test_stand_in_timezones_and_calls():
    # zoneinfo pickles as a call of getattr(ZoneInfo, "_unpickle"): stand-ins
    # must be callable and usable as a datetime's tzinfo.
    zoneinfo = pytest.importorskip("zoneinfo")
    try:
        berlin, paris = zoneinfo.ZoneInfo("Europe/Berlin"), zoneinfo.ZoneInfo("Europe/Paris")
    except zoneinfo.ZoneInfoNotFoundError:
        pytest.skip("no time zone data")
    when = datetime.datetime(2024, 1, 1)
    a = record({"t": when.replace(tzinfo=berlin)})
    assert same_records(a, record({"t": when.replace(tzinfo=berlin)}, 2))
    assert not same_records(a, record({"t": when.replace(tzinfo=paris)}))


def test_pytz_values_compare_for_real():
    pytz = pytest.importorskip("pytz")
    berlin = pytz.timezone("Europe/Berlin")
    a = record({"t": berlin.localize(datetime.datetime(2024, 7, 1))})
    assert same_records(a, record({"t": berlin.localize(datetime.datetime(2024, 7, 1))}, 2))
    assert not same_records(a, record({"t": berlin.localize(datetime.datetime(2024, 1, 1)).replace(month=7)}))


def test_pytz_utc_and_timezone_utc_are_the_same_zone_with_or_without_pytz(monkeypatch):
    """Both are written "+00:00", as the Rust codec does; without pytz its UTC is a stand-in."""
    pytz = pytest.importorskip("pytz")
    when = datetime.datetime(2024, 7, 1, 8)
    a = record({"t": when.replace(tzinfo=pytz.utc)})
    b = record({"t": when.replace(tzinfo=datetime.timezone.utc)})
    fixed = record({"t": when.replace(tzinfo=datetime.timezone(datetime.timedelta(hours=1)))})
    assert same_records(a, b)
    assert not same_records(a, fixed)
    real_find_class = pickle._Unpickler.find_class

    def without_pytz(self, module, name):
        if module == "pytz":
            raise ImportError("pytz is not installed")
        return real_find_class(self, module, name)

    monkeypatch.setattr(pickle._Unpickler, "find_class", without_pytz)
    assert type(load_record(a)[1]["t"].tzinfo).__name__ == "_TzStandIn"
    assert same_records(a, b)
    assert not same_records(a, fixed)


def test_a_bytearray_of_a_size_from_the_data_is_refused():
    # verify loads every record with this unpickler: bytearray(n) would allocate what the data says.
    import pickle

    big = b"\x80\x03cbuiltins\nbytearray\nJ\x00\x00\x00\x40\x85R."  # bytearray(2**30)
    with pytest.raises(ValueError, match="not the bytes a pickle holds"):
        load_record(pickle.dumps(("m", "C"), 3) + big)
    assert load_record(pickle.dumps(("m", "C"), 3) + pickle.dumps(bytearray(b"ok"), 3))[1] == bytearray(b"ok")
