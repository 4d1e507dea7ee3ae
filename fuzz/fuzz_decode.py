#!/usr/bin/env python3
"""Harness: bytes -> every decoder of both twins, the direct lane, and each result back through the encoders.

For the input (a record, or a single pickle: the single-pickle decoders read
the first pickle of whatever they get):

1. each of the five decoders of both twins: only ValueError escapes, and
   the twins' outcomes are the same (values strictly, texts identically,
   exceptions with the same type and message);
2. the Cython twin's direct lane (``_direct_lane_record``): it declines
   (None) or gives exactly the Python twin's decode_zodb_record_for_pg_json;
3. what decoded encodes back, on each path a storage takes (fuzzlib.py):
   - dict: decode_zodb_record -> encode_zodb_record (both twins, and each
     twin on its own decoder's value) -> the same objects as the input
     (fidelity, when pickle can load the input), and that decodes again;
   - pg: decode_zodb_record_for_pg -> its state as JSON text (it must be
     JSON, and storable in jsonb: no NaN, no U+0000, no lone surrogate)
     -> read back -> encode_zodb_record -> the same objects;
   - pg_json: the text must be JSON and storable; encode_zodb_record of it
     read back gives the same objects, and encode_zodb_record_from_pg_json
     of the text (as str and as UTF-8 bytes) gives those very bytes;
   - pickle_to_dict -> dict_to_pickle -> the same objects, and it decodes
     again; pickle_to_json -> json_to_pickle -> the same objects;
   no encoder changes the value it is given.

Run it through scripts/fuzz (or fuzz/run.sh fuzz_decode [libFuzzer args]).
"""

from __future__ import annotations

import fuzzlib as F

RECORD = ("decode_zodb_record", "decode_zodb_record_for_pg", "decode_zodb_record_for_pg_json")


class Refused(Exception):
    """The record names a global the globals policy refuses: its round trip ends (docs/security.md)."""


def encode_back(label: str, encoder: str, py_value, cy_value):
    """Both twins' encoder on the Python twin's decoded value (which must not change), and the Cython
    twin's on its own; it must encode.  The bytes."""
    before = F.snapshot(py_value)
    py, _ = F.both(label, encoder, py_value)
    changed = F.diff(before, py_value)
    if changed:
        raise F.Finding(f"{label} {encoder}: an encoder changed its argument: {changed}")
    if cy_value is not None:
        own = F.call_cy(f"{label} {encoder} (own)", getattr(F.CY, encoder), cy_value)
        F.allowed(f"{label} {encoder} (the Cython twin on its own decoder's value)", "cython", own)
        F.same_outcome(f"{label} {encoder} (each twin on its own decoder's value)", py, own)
    if py[0] != "ok" and F.refused_by_policy(py, encoder, py_value):
        raise Refused()
    if py[0] != "ok":
        raise F.Finding(f"{label}: decoded, but {encoder} refuses what was decoded: {py[2][:300]}\n"
                        f"  decoded: {F.short(py_value)}")
    return py[1]


def decodes_again(label: str, decoder: str, again: bytes) -> None:
    """What an encoder wrote from decoded values must decode (both twins alike).

    Not necessarily to the same values: a dict a pickle builds item by item is
    written as @d if it looked like a marker on the way (docs/format.md,
    "Markers and user data"), and comes back a plain dict from the encoder's
    pickle; what must hold is "the same objects", checked by fidelity.
    """
    redecoded, _ = F.both(label + ", decoded again", decoder, again)
    if redecoded[0] != "ok" and not F.tolerated_decode_error(redecoded[2]):
        raise F.Finding(f"{label}: what the encoder wrote does not decode: {redecoded[2][:300]}\n  {again[:300]!r}")


def dict_path(data: bytes, py: tuple, cy: tuple) -> None:
    again = encode_back("dict path", "encode_zodb_record", py[1], cy[1])
    F.same_objects("dict path (decode_zodb_record -> encode_zodb_record)", data, again, 2)
    decodes_again("dict path", "decode_zodb_record", again)


def pg_path(data: bytes, py: tuple) -> None:
    module, name, state, refs = py[1]
    F.storable("decode_zodb_record_for_pg class", [module, name])
    F.storable("decode_zodb_record_for_pg state", state)
    text = F.pg_state_text("pg path", state)
    kept = {"@cls": [module, name], "@s": F.read_json(text)}
    again = encode_back("pg path", "encode_zodb_record", kept, None)
    F.same_objects("pg path (decode_zodb_record_for_pg -> json -> encode_zodb_record)", data, again, 2)


def pg_json_path(data: bytes, py: tuple) -> None:
    module, name, text, refs = py[1]
    F.storable("decode_zodb_record_for_pg_json class", [module, name])
    try:
        state = F.read_json(text)
    except ValueError as exc:
        raise F.Finding(f"decode_zodb_record_for_pg_json wrote text that is not JSON: {exc}: {text[:300]!r}")
    F.storable("decode_zodb_record_for_pg_json state", state)
    again = encode_back("pg_json path", "encode_zodb_record", {"@cls": [module, name], "@s": state}, None)
    F.same_objects("pg_json path (decode_zodb_record_for_pg_json -> encode_zodb_record)", data, again, 2)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise F.Finding(f"decode_zodb_record_for_pg_json wrote text that is not UTF-8: {exc}")
    for arg in (text, raw):
        loaded, _ = F.both("pg_json path", "encode_zodb_record_from_pg_json", module, name, arg)
        if loaded[0] != "ok" or loaded[1] != again:
            raise F.Finding(f"pg_json path: encode_zodb_record_from_pg_json({type(arg).__name__}) is not "
                            f"encode_zodb_record of the text read: {F.describe(loaded)[:300]} != {again[:300]!r}")


def single_dict_path(data: bytes, py: tuple, cy: tuple) -> None:
    value = py[1]
    if type(value) is dict:
        again = encode_back("pickle_to_dict path", "dict_to_pickle", value, cy[1])
        F.same_objects("pickle_to_dict -> dict_to_pickle", data, again, 1)
    else:  # dict_to_pickle takes a dict: the value goes in one
        again = encode_back("pickle_to_dict path", "dict_to_pickle", {"v": value}, {"v": cy[1]})
        F.same_objects("pickle_to_dict -> dict_to_pickle({'v': value})", data, again, 1,
                       unwrap=lambda d: d["v"])
    decodes_again("pickle_to_dict path", "pickle_to_dict", again)


def single_json_path(data: bytes, py: tuple) -> None:
    text = py[1]
    again, _ = F.both("pickle_to_json path", "json_to_pickle", text)
    if again[0] != "ok" and F.refused_by_policy(again, "json_to_pickle", text):
        return
    if again[0] != "ok":
        raise F.Finding(f"pickle_to_json path: json_to_pickle refuses what pickle_to_json wrote: {again[2][:300]}")
    F.same_objects("pickle_to_json -> json_to_pickle", data, again[1], 1)


def lane(data: bytes, py: tuple) -> None:
    if F.LANE is None:
        return
    got = F.call_cy("direct lane", F.LANE, data)
    if got[0] == "raised":
        raise F.Finding(f"the direct lane raised {got[1].__qualname__}: {got[2][:300]} (it may only decline)")
    if got[1] is not None:
        if py[0] != "ok":
            raise F.Finding(f"the direct lane gave {F.short(got[1])}, the Python twin raised {py[2][:300]}")
        F.must_equal("the direct lane's text != the Python twin's decode_zodb_record_for_pg_json", py[1], got[1])


def TestOneInput(data: bytes) -> None:
    out = {name: F.both("decode", name, data) for name in F.DECODERS}
    lane(data, out["decode_zodb_record_for_pg_json"][0])
    paths = [("decode_zodb_record", lambda py, cy: dict_path(data, py, cy)),
             ("decode_zodb_record_for_pg", lambda py, cy: pg_path(data, py)),
             ("decode_zodb_record_for_pg_json", lambda py, cy: pg_json_path(data, py)),
             ("pickle_to_dict", lambda py, cy: single_dict_path(data, py, cy)),
             ("pickle_to_json", lambda py, cy: single_json_path(data, py))]
    for decoder, path in paths:
        py, cy = out[decoder]
        if py[0] == "ok":
            try:
                path(py, cy)
            except Refused:
                pass


if __name__ == "__main__":
    F.main(TestOneInput)
