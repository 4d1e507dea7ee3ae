"""The differences from the Rust codec that no other module shows, and a check that each difference
docs/format.md lists names a test that exists ("Differences from the Rust codec")."""

from __future__ import annotations

import copyreg
import pickle
import re
from pathlib import Path

import pytest

from helpers import record, same_records

ROOT = Path(__file__).resolve().parent.parent


def _differences() -> list:
    """The bullets of format.md's differences section, each as one line of text."""
    text = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    section = text.split("## Differences from the Rust codec", 1)[1].split("\nKept as the Rust codec does", 1)[0]
    return [" ".join(item.split()) for item in re.split(r"\n- ", section)[1:]]


def test_each_difference_names_the_releases_and_a_test_that_exists():
    differences = _differences()
    assert len(differences) >= 15
    for difference in differences:
        assert re.search(r"\*1\.(7\.0|6\.1)[^*]*\*", difference), difference
        tests = re.findall(r"`(tests/test_\w+\.py)::(test_\w+)`", difference)
        assert tests, difference
        for path, name in tests:
            assert re.search(rf"^def {name}\(", (ROOT / path).read_text(encoding="utf-8"), re.M), (path, name)


def test_an_odd_bucket_keeps_every_item(impl):
    from BTrees.OOBTree import OOBucket

    data = record(((1, 2, 3),), klass=OOBucket)  # a bucket's flat items, one short of pairs
    assert impl.decode_zodb_record(data)["@s"] == {"@t": [{"@t": [1, 2, 3]}]}
    assert same_records(data, impl.encode_zodb_record(impl.decode_zodb_record(data)))


class Registered:
    pass


@pytest.fixture
def extension_code():
    copyreg.add_extension(__name__, "Registered", 0xF00D)
    try:
        yield 0xF00D
    finally:
        copyreg.remove_extension(__name__, "Registered", 0xF00D)


def test_extension_codes_and_buffers_are_verbatim(impl, extension_code):
    with_code = record({"k": Registered}, 2)
    assert b"\x83\x0d\xf0" in with_code  # EXT2
    buffer = pickle.dumps(("app.mod", "Kls"), 3) + b"\x80\x05\x97\x98."  # NEXT_BUFFER, READONLY_BUFFER
    for data in (with_code, buffer):
        state = impl.decode_zodb_record(data)["@s"]
        assert list(state) == ["@pkl"]
    assert impl.encode_zodb_record(impl.decode_zodb_record(buffer)) == buffer
    # An extension code names a global the record does not spell: no globals policy can allow it
    # (docs/security.md), so only an unrestricted one writes it back.
    from zodb_json_codec import GlobalRefused, GlobalsPolicy

    with pytest.raises(GlobalRefused, match="extension code"):
        impl.encode_zodb_record(impl.decode_zodb_record(with_code))
    with pytest.warns(RuntimeWarning):
        anything = GlobalsPolicy("unrestricted")
    assert impl.encode_zodb_record(impl.decode_zodb_record(with_code), policy=anything) == with_code
