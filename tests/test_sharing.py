"""Values the memo shares: what the decoders share, note and weigh alike, and dicts that change after they
were filled (docs/format.md, "Expansion budget", "Markers and user data" and "Escaped keys").

Each shape a review found, in both twins and every record decoder, and variants of it: a one-key dict
whose key is a marker's but whose value is not the marker's (``{"@cls": 5}``) fetched before it holds
itself; class markers fetched after the value was found to hold itself; a key spelled with protocol 0's
escapes; a dict that becomes marker-shaped when a list it holds is filled later through the memo.
"""

from __future__ import annotations

import io
import pickle
import struct

import pytest

from helpers import RECORD_DECODERS, same_records
from strictcompare import outcome, outcome_diff
from twinloader import load_twin

KLASS = pickle.dumps(("app.mod", "Kls"), 3)  # the class pickle: memo 0-2


@pytest.fixture(scope="module")
def twins():
    return load_twin("python"), load_twin("cython")


# Opcodes, by name, so that the shapes below read as the pickle machine runs them.  The shapes keep what
# they build in a list (APPEND), not POP it: the Cython twin hands POP to the Python twin.
def text(s: str) -> bytes:
    raw = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(raw)) + raw


def put(i: int) -> bytes:
    return b"r" + struct.pack("<I", i)


def get(i: int) -> bytes:
    return b"j" + struct.pack("<I", i)


EMPTY_DICT, EMPTY_LIST, MARK, SETITEM, SETITEMS, APPEND, APPENDS = b"}", b"]", b"(", b"s", b"u", b"a", b"e"
INT5 = b"K\x05"


def state(*ops: bytes) -> bytes:
    return b"\x80\x03" + b"".join(ops) + b"."


def outcomes_alike(twins, data: bytes) -> dict:
    """Every record decoder's outcome, the same in both twins: {decoder: the Python twin's outcome}."""
    found = {}
    for fn in RECORD_DECODERS:
        python, cython = (outcome(getattr(twin, fn), data) for twin in twins)
        assert not outcome_diff(python, cython), (fn, outcome_diff(python, cython))
        found[fn] = python
    return found


def verbatim(twins, data: bytes) -> None:
    """data decodes to @pkl in every decoder of both twins, and encodes back byte for byte."""
    for fn, result in outcomes_alike(twins, data).items():
        assert result[0] == "ok", (fn, result)
        value = result[1] if fn == "decode_zodb_record" else result[1][2]
        if fn == "decode_zodb_record_for_pg_json":
            assert '"@pkl"' in value, (fn, value[:200])
        else:
            assert list(value if fn != "decode_zodb_record" else value["@s"]) == ["@pkl"], (fn, value)
    for twin in twins:
        assert twin.encode_zodb_record(twin.decode_zodb_record(data)) == data


# ---------------------------------------------------------------------------
# A dict with a marker's key and another value, fetched, then made to hold itself
# ---------------------------------------------------------------------------

LOOKALIKE_VALUES = {
    "@cls": [INT5, EMPTY_LIST, EMPTY_LIST + text("a") + APPEND, text("x")],
    "@t": [INT5, text("x")],
    "@ref": [],  # any value makes @ref a marker: SETITEM onto it is refused (below)
    "@dt": [INT5, EMPTY_LIST],
    "@s": [INT5],
    "@inst": [],
    "@newobj": [INT5, text("x")],
}


@pytest.mark.parametrize("key, value", [(k, v) for k, values in LOOKALIKE_VALUES.items() for v in values])
def test_a_lookalike_that_holds_itself_is_verbatim(twins, key, value):
    # {key: value}, put in the memo, then given itself under "x" by a GET of the memo.
    data = KLASS + state(EMPTY_DICT, put(10), text(key), value, SETITEM, text("x"), get(10), SETITEM)
    verbatim(twins, data)


@pytest.mark.parametrize("key", ["@cls", "@t", "@s", "@dt"])
def test_lookalikes_filled_after_they_were_fetched_are_weighed(twins, key):
    # N dicts {key: 5}, each filled after it was fetched with two references to the next: 2**N values.
    n = 40
    ops = [EMPTY_LIST]
    for i in range(n):
        ops += [EMPTY_DICT, put(100 + i), text(key), INT5, SETITEM, APPEND]
    for i in range(n - 1):
        ops += [get(100 + i), MARK, text("a"), get(101 + i), text("b"), get(101 + i), SETITEMS, APPEND]
    data = KLASS + state(*ops)
    for fn, result in outcomes_alike(twins, data).items():
        assert result[0] == "raised" and "expansion budget" in result[2], (fn, result)


def test_a_class_marker_cannot_be_filled_and_a_lookalike_stays_a_dict(twins):
    data = KLASS + state(b"cfoo\nBar\n", text("x"), INT5, SETITEM)
    for fn, result in outcomes_alike(twins, data).items():
        assert result[0] == "raised" and "SETITEM on non-dict" in result[2], (fn, result)
    data = KLASS + state(EMPTY_DICT, text("@ref"), INT5, SETITEM, text("x"), INT5, SETITEM)
    outcomes_alike(twins, data)
    for twin in twins:
        assert twin.decode_zodb_record(data)["@s"] == {"@d": [["@ref", 5], ["x", 5]]}


# ---------------------------------------------------------------------------
# Class markers fetched after the value was found to hold itself
# ---------------------------------------------------------------------------

LONG_CLASS = b"\x80\x03cm\n" + b"N" * 2000 + b"\nq\x00."


@pytest.mark.parametrize("cycle", [True, False])
def test_class_markers_after_a_cycle_are_weighed_as_the_python_twin_weighs_them(twins, cycle):
    # A list that holds itself (when cycle), then 700 GETs of a class of a 2,000-character name: each weighs
    # 2,009; the Python twin weighs nothing fetched once a shared value changed, and nor does the Cython twin.
    ops = [EMPTY_LIST, b"q\x01"] + ([b"h\x01", APPEND] if cycle else []) + [MARK] + [b"h\x00"] * 700 + [APPENDS]
    data = LONG_CLASS + state(*ops)
    results = outcomes_alike(twins, data)
    if cycle:
        verbatim(twins, data)
    else:
        for fn, result in results.items():
            assert result[0] == "raised" and "expansion budget" in result[2], (fn, result)


# ---------------------------------------------------------------------------
# Keys spelled with protocol 0's escapes
# ---------------------------------------------------------------------------

def unicode_line(spelling: bytes) -> bytes:
    return b"V" + spelling + b"\n"


# Every reserved prefix, spelled with escapes in every place, with what follows it either an escape itself
# or not (base64 of U+0000, of a lone surrogate, of a key with a prefix, or no base64 at all).
ESCAPED_SPELLINGS = [
    prefix + rest
    for prefix in (b"\\u0040ns:", b"@\\u006es:", b"@n\\u0073:", b"@ns\\u003a", b"\\u0040su:", b"@s\\u0075:",
                   b"\\u0040\\u006e\\u0073\\u003a")
    for rest in (b"AA==", b"7aCA", b"QG5zOnBsYWlu", b"plain")
]


@pytest.mark.parametrize("spelling", ESCAPED_SPELLINGS)
def test_keys_spelled_with_escapes_are_escaped(twins, spelling):
    data = KLASS + b"(dp0\n" + unicode_line(spelling) + b"p1\nI1\ns" + unicode_line(b"v") + b"p2\n" \
        + unicode_line(spelling) + b"p3\ns."
    want = pickle.loads(data[len(KLASS):])
    key = spelling.decode("raw-unicode-escape")
    assert want == {key: 1, "v": key}
    outcomes_alike(twins, data)
    for twin in twins:
        for again in (twin.encode_zodb_record(twin.decode_zodb_record(data)),
                      twin.encode_zodb_record_from_pg_json(*twin.decode_zodb_record_for_pg_json(data)[:3])):
            assert same_records(data, again), (twin.name, spelling)


# ---------------------------------------------------------------------------
# Dicts that become marker-shaped after they were filled
# ---------------------------------------------------------------------------

def late_filled(keys: list, fill: bytes) -> bytes:
    """A state [{"v": D}, L]: D has the given keys, its "@cls" is L, empty when D is filled, then filled (by
    fill) through the memo."""
    ops = [EMPTY_LIST, EMPTY_DICT, text("v"), EMPTY_DICT, MARK]
    for key in keys:
        ops += [text(key), EMPTY_LIST + put(20) if key == "@cls" else INT5]
    ops += [SETITEMS, SETITEM, APPEND, get(20), fill, APPEND]
    return KLASS + state(*ops)


FILLS = {
    "APPENDS": MARK + text("a") + text("b") + APPENDS,
    "APPEND twice": text("a") + APPEND + text("b") + APPEND,
}
SHAPES = [["@cls"], ["@cls", "@s"], ["@cls", "@s", "@newobj"], ["@cls", "@s", "@items"],
          ["@cls", "@s", "@newobj", "@items", "@appends"], ["@cls", "@items"]]


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("keys", SHAPES, ids="+".join)
def test_a_dict_that_becomes_marker_shaped_later_comes_back_as_a_dict(twins, keys, fill):
    data = late_filled(keys, FILLS[fill])
    original = pickle.Unpickler(io.BytesIO(data))
    original.load()
    assert original.load()[0]["v"]["@cls"] == ["a", "b"]
    outcomes_alike(twins, data)
    for twin in twins:
        decoded = twin.decode_zodb_record(data)["@s"][0]["v"]
        assert list(decoded) == ["@d"], (twin.name, decoded)
        for again in (twin.encode_zodb_record(twin.decode_zodb_record(data)),
                      twin.encode_zodb_record_from_pg_json(*twin.decode_zodb_record_for_pg_json(data)[:3])):
            assert same_records(data, again), twin.name


@pytest.mark.parametrize("key", ["k", "@s", "@cls"])
@pytest.mark.parametrize("keys", [["@cls"], ["@cls", "@s"]], ids="+".join)
def test_a_dict_marker_shaped_by_a_late_fill_still_takes_items(twins, keys, key):
    # The structure hunt's shape: D = {"@cls": L} filled, L filled through the memo (D now looks like a
    # class marker), then SETITEM on D again (fetched through the memo).  pickle sets the item; the decoders
    # did too only when D was no marker of their own making, and refused it as one before.
    ops = [EMPTY_LIST, EMPTY_DICT, put(30), MARK]
    for k in keys:
        ops += [text(k), EMPTY_LIST + put(20) if k == "@cls" else INT5]
    ops += [SETITEMS, APPEND, get(20), MARK, text("a"), text("b"), APPENDS, APPEND]
    ops += [get(30), text(key), INT5, SETITEM, APPEND]  # kept in the list, not POPped: POP is the Python twin's
    data = KLASS + state(*ops)
    original = pickle.Unpickler(io.BytesIO(data))
    original.load()
    assert original.load()[0][key] == 5
    for fn, result in outcomes_alike(twins, data).items():
        assert result[0] == "ok", (fn, result)
    for twin in twins:
        assert same_records(data, twin.encode_zodb_record(twin.decode_zodb_record(data))), twin.name


def test_keys_added_after_a_fetch_are_checked_again(twins):
    # {"@s": 5} is plain when filled; a later SETITEM through the memo adds "@cls": ["a", "b"].
    data = KLASS + state(EMPTY_LIST, EMPTY_DICT, text("v"), EMPTY_DICT, put(30), text("@s"), INT5, SETITEM,
                         SETITEM, APPEND, get(30), text("@cls"), EMPTY_LIST, MARK, text("a"), text("b"), APPENDS,
                         SETITEM, APPEND)
    outcomes_alike(twins, data)
    for twin in twins:
        assert list(twin.decode_zodb_record(data)["@s"][0]["v"]) == ["@d"]
        assert same_records(data, twin.encode_zodb_record(twin.decode_zodb_record(data)))


# ---------------------------------------------------------------------------
# A set made of a list the pickle fills later
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["set", "frozenset"])
@pytest.mark.parametrize("fill", FILLS)
def test_a_set_holds_what_its_list_held_at_the_call(twins, name, fill):
    # builtins.set(L) (as protocols 0-3 write a set), L in the memo, then filled through it: pickle's set
    # holds what L held at the call (nothing here); the decoders must not share L with the set marker.
    data = KLASS + state(EMPTY_LIST, b"cbuiltins\n" + name.encode() + b"\n", EMPTY_LIST, put(40), b"\x85R",
                         APPEND, get(40), FILLS[fill], APPEND)
    original = pickle.Unpickler(io.BytesIO(data))
    original.load()
    assert original.load() == [set() if name == "set" else frozenset(), ["a", "b"]]
    outcomes_alike(twins, data)
    for twin in twins:
        assert twin.decode_zodb_record(data)["@s"] == [{"@set" if name == "set" else "@fset": []}, ["a", "b"]]
        for again in (twin.encode_zodb_record(twin.decode_zodb_record(data)),
                      twin.encode_zodb_record_from_pg_json(*twin.decode_zodb_record_for_pg_json(data)[:3])):
            assert same_records(data, again), twin.name


def test_a_dict_filled_twice_before_it_becomes_marker_shaped_is_made_pairs_once(twins):
    # {"@cls": L} filled by two SETITEMs (each of which finds it may become a marker), then L filled: the
    # dict is @d pairs once, not @d pairs of its own @d form.
    data = KLASS + state(EMPTY_LIST, EMPTY_DICT, put(50), text("@cls"), EMPTY_LIST, put(51), SETITEM, APPEND,
                         get(50), text("@s"), INT5, SETITEM, APPEND, get(51), FILLS["APPENDS"], APPEND)
    outcomes_alike(twins, data)
    for twin in twins:
        assert twin.decode_zodb_record(data)["@s"][0] == {"@d": [["@cls", ["a", "b"]], ["@s", 5]]}, twin.name
        for again in (twin.encode_zodb_record(twin.decode_zodb_record(data)),
                      twin.encode_zodb_record_from_pg_json(*twin.decode_zodb_record_for_pg_json(data)[:3])):
            assert same_records(data, again), twin.name


# ---------------------------------------------------------------------------
# A persistent id the pickle changes after the unpickler read it
# ---------------------------------------------------------------------------

BINPERSID = b"Q"
PID_SHAPES = {  # the persistent id, its list at memo 60 (filled later), as BINPERSID takes it
    "a list": EMPTY_LIST + put(60),
    "a list in a tuple": text("w") + EMPTY_LIST + put(60) + b"\x86",
    "a dict's list": EMPTY_DICT + text("k") + EMPTY_LIST + put(60) + SETITEM,
}


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("shape", PID_SHAPES)
def test_a_persistent_id_changed_after_its_binpersid_is_verbatim(twins, shape, fill):
    # ZODB's persistent_load reads the id at BINPERSID; a list in it filled later through the memo is not
    # what the unpickler saw, so a @ref holding the filled list would not load as the record did.
    data = KLASS + state(EMPTY_LIST, PID_SHAPES[shape], BINPERSID, APPEND, get(60), FILLS[fill], APPEND)
    seen = []

    class Reading(pickle.Unpickler):
        def persistent_load(self, pid):
            seen.append(repr(pid))
            return "ref"

    loader = Reading(io.BytesIO(data))
    loader.load()
    assert loader.load() == ["ref", ["a", "b"]] and "'a'" not in seen[0]
    verbatim(twins, data)


def test_a_persistent_id_left_alone_after_its_binpersid_is_a_ref(twins):
    # The same ids without the later change keep their @ref (a weak reference is such a list).
    data = KLASS + state(EMPTY_LIST, text("w") + EMPTY_LIST + put(60) + text("x") + APPEND + b"\x86", BINPERSID,
                         APPEND, get(60), APPEND)
    outcomes_alike(twins, data)
    for twin in twins:
        assert twin.decode_zodb_record(data)["@s"] == [{"@ref": {"@t": ["w", ["x"]]}}, ["x"]], twin.name


# ---------------------------------------------------------------------------
# One part twice in a set, or in the keys of a dict: pickle's one object is one item
# ---------------------------------------------------------------------------

NAN = b"G" + struct.pack(">d", float("nan"))
NONE, TUPLE2, TUPLE1, FROZENSET, EMPTY_SET, ADDITEMS = b"N", b"\x86", b"\x85", b"\x91", b"\x8f", b"\x90"
NAN_TUPLE = NAN + NONE + TUPLE2 + put(70)  # (nan, None) at memo 70
REPEATED = {  # a set or dict whose items or keys reach one part twice, where a copy compares unequal
    "frozenset of a NaN tuple twice": MARK + NAN_TUPLE + get(70) + FROZENSET,
    "set of a NaN tuple twice": EMPTY_SET + MARK + NAN_TUPLE + get(70) + ADDITEMS,
    "set of a NaN twice": EMPTY_SET + MARK + NAN + put(70) + get(70) + ADDITEMS,
    "set() of a list holding a NaN tuple twice": b"cbuiltins\nset\n" + EMPTY_LIST + MARK + NAN_TUPLE + get(70)
    + APPENDS + TUPLE1 + b"R",
    "frozenset of two tuples of one NaN": MARK + NAN + put(70) + TUPLE1 + get(70) + TUPLE1 + FROZENSET,
    "dict with a NaN tuple key twice": EMPTY_DICT + MARK + NAN_TUPLE + INT5 + get(70) + INT5 + SETITEMS,
    # an object built as the direct lane builds them (NEWOBJ, BUILD), in a list twice, the list given to set()
    "frozenset() of one object twice": b"cbuiltins\nfrozenset\n" + EMPTY_LIST + MARK + b"czodbapp\nPlainSlots\n)\x81"
    + EMPTY_DICT + b"b" + put(70) + get(70) + APPENDS + TUPLE1 + b"R",
}


@pytest.mark.parametrize("shape", REPEATED)
def test_one_part_twice_in_a_set_or_its_keys_is_verbatim(twins, shape):
    # pickle's set holds the one (nan, None) tuple once (a tuple equals itself); a copy at each place would
    # be two tuples, unequal (NaN), so two items: the JSON cannot carry it.
    data = KLASS + state(EMPTY_LIST, REPEATED[shape], APPEND)
    original = pickle.Unpickler(io.BytesIO(data))
    original.load()
    assert len(original.load()[0]) == 1
    verbatim(twins, data)


EQUAL_COPIES = {  # parts reached twice whose copies compare equal: the JSON carries them
    "frozenset of a tuple twice": MARK + INT5 + NONE + TUPLE2 + put(70) + get(70) + FROZENSET,
    "frozenset of two NaN-free tuples of one tuple": MARK + INT5 + TUPLE1 + put(70) + TUPLE1 + get(70) + NONE
    + TUPLE2 + FROZENSET,
}


@pytest.mark.parametrize("shape", EQUAL_COPIES)
def test_one_part_twice_in_a_set_that_copies_keep_is_a_set(twins, shape):
    data = KLASS + state(EMPTY_LIST, EQUAL_COPIES[shape], APPEND)
    outcomes_alike(twins, data)
    for twin in twins:
        assert "@fset" in twin.decode_zodb_record(data)["@s"][0], twin.name
        assert same_records(data, twin.encode_zodb_record(twin.decode_zodb_record(data))), twin.name


def test_what_a_copy_would_not_equal():
    # The rule behind the shapes above, on decoded values: an object (its class may compare by identity), a
    # NaN, or a tuple or set holding one, reached twice; texts, numbers, references and classes copy equal.
    from zodb_json_codec._decode_common import collapses_by_identity
    obj = {"@reduce": {"callable": {"@cls": ["app", "K"]}, "args": {"@t": []}}}
    nan = float("nan")
    for twice in (obj, nan, {"@t": [1, {"@t": [nan]}]}, {"@fset": [obj]}, [1]):
        assert collapses_by_identity([(0, [twice, twice])]), twice
        assert collapses_by_identity([(0, {"@d": [[twice, 1], [twice, 2]]})]), twice
        assert not collapses_by_identity([(0, [twice])]), twice
    for twice in ({"@t": [1, "a", None]}, {"@b": "AA=="}, {"@ref": "0000000000000001"}, {"@cls": ["a", "b"]},
                  {"@dt": "2024-01-01T00:00:00"}, 1.5, "text"):
        assert not collapses_by_identity([(0, [twice, twice]), (0, {"@d": [[twice, 1], [twice, 2]]})]), twice


# ---------------------------------------------------------------------------
# A part changed after a set holding it, or a dict keyed by it, was made: CPython hashed it as it was
# ---------------------------------------------------------------------------

OBJ = b"czodbapp\nPlainSlots\n)\x81" + put(70)  # an object made as a pickler makes one (NEWOBJ), at memo 70
BUILT_LATER = get(70) + EMPTY_DICT + text("x") + INT5 + SETITEM + b"b" + b"0"  # its state set afterwards (BUILD, POP)
CHANGED_AFTER = {
    # the structure hunt's shape: set() of a list holding two objects equal when the set was made
    "frozenset() of a list": b"cbuiltins\nfrozenset\n" + EMPTY_LIST + MARK + OBJ + APPENDS + TUPLE1 + b"R",
    "FROZENSET": MARK + OBJ + FROZENSET,
    "EMPTY_SET and ADDITEMS": EMPTY_SET + MARK + OBJ + ADDITEMS,
    "a tuple in a FROZENSET": MARK + OBJ + INT5 + TUPLE2 + FROZENSET,
    "a dict's key": EMPTY_DICT + MARK + OBJ + INT5 + SETITEMS,
    "a tuple key": EMPTY_DICT + MARK + OBJ + TUPLE1 + INT5 + SETITEMS,
}


@pytest.mark.parametrize("shape", CHANGED_AFTER)
def test_a_part_changed_after_its_set_or_dict_was_made_is_verbatim(twins, shape):
    # The set or dict was hashed with the object unbuilt; the JSON would hold it built, so a copy made from
    # the JSON could hash, and collapse, otherwise (an instance's hash may come from its state).
    data = KLASS + state(EMPTY_LIST, CHANGED_AFTER[shape], APPEND, BUILT_LATER)
    verbatim(twins, data)


@pytest.mark.parametrize("shape", CHANGED_AFTER)
def test_a_part_changed_before_its_set_or_dict_was_made_is_carried(twins, shape):
    # The same object built first, then fetched into the set or dict: hashed as it is in the JSON.
    built_first = OBJ + EMPTY_DICT + text("x") + INT5 + SETITEM + b"b" + b"0"  # BUILD, POP: only in the memo
    data = KLASS + state(EMPTY_LIST, built_first, CHANGED_AFTER[shape].replace(OBJ, get(70)), APPEND)
    for fn, result in outcomes_alike(twins, data).items():
        assert result[0] == "ok" and "@pkl" not in str(result[1]), (fn, result)
    for twin in twins:
        assert same_records(data, twin.encode_zodb_record(twin.decode_zodb_record(data))), twin.name


# ---------------------------------------------------------------------------
# Copies keep the sharing: the work of the objects, not of the tree they spell
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", ["decode_zodb_record", "decode_zodb_record_for_pg"])
def test_a_value_rewritten_for_its_keys_or_for_postgresql_shares_what_the_decoded_value_shares(twins, fn):
    # A key to escape ("@ns:..." spelled by the user) and a float PostgreSQL cannot hold make the decoders
    # copy the value; one list the memo gives twice is one list in the copy too, as it is without them.
    shared = [1, 2]
    for extra in ({}, {"@ns:x": 1}, {"nan": float("nan")}, {"@ns:x": 1, "nan": float("nan")}):
        data = KLASS + pickle.dumps({"a": [shared, shared], **extra}, 3)
        for twin in twins:
            result = getattr(twin, fn)(data)
            a = (result["@s"] if fn == "decode_zodb_record" else result[2])["a"]
            assert a == [[1, 2], [1, 2]] and a[0] is a[1], (twin.name, fn, extra)


def test_a_copy_does_the_work_of_the_objects_not_of_the_tree():
    # Each level a list holding the level below twice: 2**20 leaves as a tree, 21 lists and one leaf as
    # objects.  The copy visits each object once (a tree copy took seconds a record: fuzz/README.md).
    from zodb_json_codec._common import rebuild_tree
    value: list = ["leaf"]
    for _ in range(20):
        value = [value, value]
    leaves = []
    copy = rebuild_tree(value, lambda x: leaves.append(x) or x, lambda k: k, lambda original, out: out)
    assert leaves == ["leaf"]
    assert copy == value and copy is not value and copy[0] is copy[1]


def _doubling(levels: int, leaf: object) -> list:
    value = [leaf]
    for _ in range(levels):
        value = [value, value]
    return value


def _tree_depth_error(root) -> bool:
    """The depth rule walked as a tree (what _check_depth did before it kept heights): the oracle."""
    from zodb_json_codec._common import MAX_DEPTH
    from zodb_json_codec._decode_common import _levels_below
    stack = [(root, 0)]
    while stack:
        value, depth = stack.pop()
        if type(value) is not list and type(value) is not dict:
            continue
        children = _levels_below(value)
        if children is None:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((c, depth + 1) for c in children)
    return False


def test_the_depth_walk_does_the_work_of_the_objects_not_of_the_tree(monkeypatch):
    # 2**60 paths through 61 lists: each list's levels are asked for once (a tree walk never ended).
    from zodb_json_codec import _decode_common
    asked = []
    levels_below = _decode_common._levels_below

    def counted(v):
        asked.append(v)
        assert len(asked) < 1000, "walked as a tree"
        return levels_below(v)
    monkeypatch.setattr(_decode_common, "_levels_below", counted)
    _decode_common._check_depth(_doubling(60, {"@t": [1]}))
    assert len(asked) == 62  # 61 lists and the tuple at the bottom


@pytest.mark.parametrize("below", [0, 1, 2, 3])
@pytest.mark.parametrize("shared_at", [1, 500, 995])
def test_the_depth_walk_with_kept_heights_decides_as_the_tree_walk(below, shared_at):
    # A chain MAX_DEPTH - 2 + below levels deep whose part from shared_at down is reached twice, once
    # by a short path and once by the long one: the kept height counts from where it is reached again.
    from zodb_json_codec._common import CodecError, MAX_DEPTH
    from zodb_json_codec._decode_common import _check_depth
    chain: list = [{"@t": [1]}]
    parts = []
    for _ in range(MAX_DEPTH - 2 + below):
        chain = [chain]
        parts.append(chain)
    shared = parts[-shared_at]
    root = [shared, chain]  # the short path first: its height is kept before the long path reaches it
    expected = _tree_depth_error(root)
    try:
        _check_depth(root)
        got = False
    except CodecError:
        got = True
    assert got == expected


def test_weights_kept_for_values_fetched_make_the_weighing_the_graphs_work(twins, monkeypatch):
    # Each level a dict holding the level below twice through the memo: the fetches' weights double level
    # by level, so the value is refused past the budget.  The Python twin walks each dict once, not its tree.
    from zodb_json_codec import _decode_common
    walked = []
    keys_and_values = _decode_common._keys_and_values

    def counted(d):
        walked.append(d)
        if len(walked) > 100_000:
            raise RuntimeError("weighed as a tree")  # not a ValueError: the outcomes below tell it
        return keys_and_values(d)
    monkeypatch.setattr(_decode_common, "_keys_and_values", counted)
    ops = [EMPTY_LIST, EMPTY_DICT, put(3)]
    for level in range(1, 40):
        ops += [EMPTY_DICT, MARK, text("a"), get(level + 2), text("b"), get(level + 2), SETITEMS, put(level + 3)]
    data = KLASS + state(*ops, APPEND)
    outcomes = [outcome(lambda: twin.decode_zodb_record(data)) for twin in twins]
    assert outcomes[0] == outcomes[1]
    assert "expansion budget" in str(outcomes[0]), outcomes[0]
    python_walked = len(walked)
    assert python_walked <= 2 * 40, python_walked


@pytest.mark.parametrize("odd", ["\ud800", "\x00"])
def test_a_text_written_longer_and_fetched_again_is_weighed_as_written(twins, odd):
    # A text the memo gives again and again, within the budget as read (1 + its length each time) but not
    # as written (base64 of its UTF-8: "é" is 2 bytes, 2.7 characters): refused in every function alike,
    # and carried when fetched fewer times.  The structure hunt found it as a key.
    long_text = odd + "é" * 2999
    for times, refused in ((300, True), (40, False)):
        data = KLASS + state(EMPTY_LIST, text(long_text), put(40), APPEND, *[get(40) + APPEND] * times)
        for fn, result in outcomes_alike(twins, data).items():
            if refused:
                assert result[0] == "raised" and "expansion budget" in result[2], (fn, result[:1])
            else:
                assert result[0] == "ok", (fn, result[:1])
