"""Short ASCII texts the Cython decoder shares between records, and that sharing changes no value.

The Cython twin's decoder keeps the last str made for each of 1024 slots of short ASCII texts (1-40 bytes,
no U+0000) and hands the same object out again (docs/design.md, "Texts shared between records"): a
record's keys and class names come back in every record.  These tests check where it shares, and that
values stay right where slots collide, at the edges of what it shares, and with U+0000 (which it must leave
to the path that flags it).  Values are compared with the Python twin's, which shares nothing.
"""

from __future__ import annotations

import random
import string
import sys

import pytest

from helpers import record
from twinloader import load_twin

pytestmark = pytest.mark.skipif(sys.implementation.name != "cpython", reason="PyPy runs the Python twin")

#: The longest text the decoder shares.
SHARED_TEXT = 40


def _key(value: dict, text: str) -> str:
    """The key object equal to text in the decoded state."""
    return next(k for k in value["@s"] if k == text)


@pytest.mark.parametrize("text", ["a", "title", "x" * SHARED_TEXT, "\x01ctl\x7f"])
def test_short_ascii_keys_are_one_object_across_records(text):
    cython = load_twin("cython")
    first = cython.decode_zodb_record(record({text: 1}))
    second = cython.decode_zodb_record(record({text: 2, "other": 3}))
    assert _key(first, text) is _key(second, text)


@pytest.mark.parametrize("text", ["x" * (SHARED_TEXT + 1), "café", "nul\x00", ""])
def test_longer_other_and_empty_texts_are_made_each_time(text):
    cython = load_twin("cython")
    first = cython.decode_zodb_record(record({text: 1}))
    second = cython.decode_zodb_record(record({text: 2}))
    assert _key(first, text) == text == _key(second, text)
    if text:  # the empty str is CPython's own singleton
        assert _key(first, text) is not _key(second, text)


def _texts(rng: random.Random, count: int) -> list:
    alphabet = string.ascii_letters + string.digits + "_-. \x01\x7f"
    texts = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, SHARED_TEXT + 2))) for _ in range(count)}
    return sorted(texts | {"nul\x00here", "\x00", "é", "x" * SHARED_TEXT, "y" * (SHARED_TEXT + 1)})


def test_colliding_slots_give_every_text_right():
    """5000 distinct texts for 1024 slots: most share a slot with another, each comes back as itself, as keys
    and as values, on every decoding path, whatever the slot held before."""
    python, cython = load_twin("python"), load_twin("cython")
    rng = random.Random(5)
    texts = _texts(rng, 5000)
    states = [{t: t for t in texts}, {t: [t, t[::-1]] for t in reversed(texts)}]
    for _ in range(2):
        for state in states:
            data = record(state)
            assert cython.decode_zodb_record(data) == python.decode_zodb_record(data)
            assert cython.decode_zodb_record_for_pg(data) == python.decode_zodb_record_for_pg(data)
            assert cython.decode_zodb_record_for_pg_json(data) == python.decode_zodb_record_for_pg_json(data)
    decoded = cython.decode_zodb_record(record(states[0]))["@s"]
    assert all(type(k) is str and k == v for k, v in decoded.items())


@pytest.mark.parametrize("module", ["app.models", "m" * SHARED_TEXT, "m" * (SHARED_TEXT + 1)])
def test_class_names_of_the_usual_class_pickles_are_shared_when_short(module):
    """A class's names come again in every record of the class: the usual class pickles' names ((module, name)
    pickled as a tuple, and the form encode_zodb_record writes) are the shared strs up to SHARED_TEXT bytes, and
    right at any length."""
    cython = load_twin("cython")
    zodb_form = record({"a": 1}, klass=(module, "Page"))
    encoded_form = cython.encode_zodb_record({"@cls": [module, "Page"], "@s": {"a": 2}})
    names = [cython.decode_zodb_record_for_pg_json(data)[:2] for data in (zodb_form, encoded_form, zodb_form)]
    assert names == [(module, "Page")] * 3
    assert names[0][1] is names[1][1] is names[2][1]
    assert (names[0][0] is names[1][0] is names[2][0]) == (len(module) <= SHARED_TEXT)
