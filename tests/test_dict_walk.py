"""The Cython encoder's dict walk (src/zodb_json_codec/_dictnext.h): a dict's entries read where CPython keeps
them, on the CPythons whose layout is known, in the order and with the objects PyDict_Next gives.

The walk's behaviour inside a whole encode (a value's own code changing the dict it is read from) is
checked against the Python twin in tests/test_twins.py (test_containers_changed_while_encoded).
"""

from __future__ import annotations

import collections
import platform
import sys
import sysconfig
from typing import Any, Callable, Dict

import pytest

from twinloader import load_twin


@pytest.fixture(scope="module")
def walked() -> Callable[[dict], Any]:
    return load_twin("cython").encode_module._dict_items_walked


def test_the_direct_walk_is_taken_where_the_layout_is_known(walked):
    # CPython 3.11-3.14 with the GIL share one layout (docs/design.md, "The encoder's dict walk"): there the
    # walk must read it (a layout check that failed would silently give the slow walk); elsewhere it must not.
    known = (platform.python_implementation() == "CPython" and (3, 11) <= sys.version_info[:2] <= (3, 14)
             and not sysconfig.get_config_var("Py_GIL_DISABLED"))
    _, direct = walked({"a": 1})
    assert direct == known


class Slots:
    def __init__(self) -> None:
        self.a = 1
        self.b = "two"


def _samples() -> Dict[str, dict]:
    with_holes = {f"k{i}": i for i in range(300)}
    for i in range(0, 300, 3):
        del with_holes[f"k{i}"]
    int_keys = {i: str(i) for i in range(100)}
    for i in range(1, 100, 4):
        del int_keys[i]
    refilled = {"x": 1, "y": 2}
    refilled.clear()
    refilled.update(z=3)
    popped = {f"p{i}": i for i in range(10)}
    popped.popitem()
    del popped["p0"]
    return {
        "empty": {},
        "one": {"a": 1},
        "text keys": {"title": "Hello", "count": 42, "ratio": 0.5, "none": None},
        "deleted entries, 2-byte indices": with_holes,
        "int keys with deleted entries": int_keys,
        "mixed keys": {"a": 1, 2: "b", (3, 4): [5], None: "n", 1.5: "f"},
        "4-byte indices": {f"w{i}": i for i in range(70000)},
        "cleared and refilled": refilled,
        "popped": popped,
        "an instance's __dict__ (split table)": Slots().__dict__,
        "OrderedDict": collections.OrderedDict([("b", 1), ("a", 2)]),
        "defaultdict": collections.defaultdict(list, {"x": [1], "y": [2]}),
    }


@pytest.mark.parametrize("reopen", [0, 1, 2, 7], ids=["zjc_dict_next", "run reopened each item", "run reopened every 2",
                                                      "run reopened every 7"])
@pytest.mark.parametrize("name", list(_samples()))
def test_the_walk_gives_the_items_in_order(walked, name, reopen):
    # reopen > 0: the entries read as a zjc_dict_run (the encoder's dict walk), opened again from the position
    # reached every reopen items, as after a value whose own code ran.
    d = _samples()[name]
    items, _ = walked(d, reopen)
    assert [(id(k), id(v)) for k, v in items] == [(id(k), id(v)) for k, v in d.items()]


@pytest.fixture(scope="module")
def pair_read() -> Callable[[dict], Any]:
    return load_twin("cython").encode_module._dict_pair_read


def _two_item_samples() -> Dict[str, dict]:
    deleted = {"@cls": 1, "x": 2, "@s": 3}
    del deleted["x"]
    refilled = {"a": 1}
    refilled.clear()
    refilled.update({"@cls": 1, "@s": 2})
    class Record:  # an instance's __dict__: a split table
        def __init__(self) -> None:
            setattr(self, "@cls", 1)
            setattr(self, "@s", 2)
    return {"record": {"@cls": ["m", "C"], "@s": {"a": 1}}, "other order": {"@s": 1, "@cls": 2},
            "int keys": {1: "a", 2: "b"}, "mixed keys": {"@cls": 1, 2: "b"}, "a deleted entry among three": deleted,
            "cleared and refilled": refilled, "split table": Record().__dict__,
            "OrderedDict": collections.OrderedDict([("@cls", 1), ("@s", 2)])}


@pytest.mark.parametrize("name", [*_samples(), *_two_item_samples()])
def test_the_pair_read_gives_two_items_or_leaves_the_dict_to_the_walk(walked, pair_read, name):
    # zjc_dict_pair (the usual record's "@cls" and "@s" in one look) reads a table of exactly two entries, none
    # deleted, where the walk reads CPython's entries; everything else goes to the walk, which it must agree with.
    d = {**_samples(), **_two_item_samples()}[name]
    pair = pair_read(d)
    items, direct = walked(d)
    left_to_the_walk = ("a deleted entry among three", "split table", "an instance's __dict__ (split table)")
    assert (pair is not None) == (direct and len(d) == 2 and name not in left_to_the_walk), name
    if pair is not None:
        assert [(id(k), id(v)) for k, v in pair] == [(id(k), id(v)) for k, v in items]
