#!/usr/bin/env python3
"""Harness: JSON text (as str and as bytes) -> json_to_pickle and encode_zodb_record_from_pg_json of both twins.

Input: the JSON text, optionally after a first line ``#module name`` giving
the class for encode_zodb_record_from_pg_json (default ``app.mod Kls``; the
seeds use BTrees classes and ``""``/``""`` too).  The text is given as the
bytes themselves, as a bytearray, and as a str (the bytes' UTF-8, or where
they are not UTF-8, a str with lone surrogates in their place:
``surrogateescape``).

The oracle:

1. every call of both twins: only ValueError escapes; the twins' outcomes
   are the same (pickle bytes identical, the same exception and message);
2. encode_zodb_record_from_pg_json gives the same for the bytes, the
   bytearray and (when the bytes are UTF-8) the str; and it is byte for byte
   ``encode_zodb_record({"@cls": [module, name], "@s": read_json(text)})``
   (docs/api.md), an error where reading or encoding fails;
3. what encodes decodes back: pickle_to_dict of json_to_pickle's pickle
   equals the JSON's value when it has no markers (no "@" keys, integers
   of 64 bits, no -0.0), and whatever decodes encodes back to the same
   objects (dict_to_pickle, and for records the pg_json path:
   decode_zodb_record_for_pg_json -> encode_zodb_record_from_pg_json).
"""

from __future__ import annotations

import math

import fuzzlib as F

DEFAULT_CLASS = ("app.mod", "Kls")
I64 = (-(1 << 63), (1 << 63) - 1)


def split(data: bytes):
    if data[:1] == b"#":
        head, _, rest = data.partition(b"\n")
        names = head[1:].decode("utf-8", "surrogateescape").split(" ", 1)
        if len(names) == 2:
            return names[0], names[1], rest
    return DEFAULT_CLASS[0], DEFAULT_CLASS[1], data


def plain(value, pg: bool = False) -> bool:
    """JSON that no decoder writes as a marker: no "@" keys, 64-bit integers, no -0.0, no U+0000; for the
    PostgreSQL variants (pg) also no lone surrogate (@su) and no NaN or infinity (@f; "1e400" reads as inf)."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict:
            for k, x in v.items():
                if k[:1] == "@" or "\x00" in k or (pg and F.has_surrogate(k)):
                    return False
                stack.append(x)
        elif t is list:
            stack.extend(v)
        elif t is int and not I64[0] <= v <= I64[1]:
            return False
        elif t is float and (str(v)[0] == "-" and v == 0.0 or pg and not math.isfinite(v)):
            return False
        elif t is str and ("\x00" in v or pg and F.has_surrogate(v)):
            return False
    return True


def single(text: str, value_read) -> None:
    py, _ = F.both("json", "json_to_pickle", text)
    if py[0] != "ok":
        return
    p = py[1]
    if F.verbatim(value_read):
        return  # json_to_pickle returns the @pkl's bytes
    decoded, _ = F.both("json_to_pickle, decoded", "pickle_to_dict", p)
    if decoded[0] != "ok":
        if F.tolerated_decode_error(decoded[2]):
            return
        raise F.Finding(f"json_to_pickle wrote a pickle that does not decode: {decoded[2][:300]}\n  pickle {p[:300]!r}")
    if value_read is not None and plain(value_read):
        F.must_equal("pickle_to_dict(json_to_pickle(text)) != the text's value", value_read, decoded[1])
    if type(decoded[1]) is dict:
        again, _ = F.both("json_to_pickle, decoded, encoded again", "dict_to_pickle", decoded[1])
        if again[0] != "ok" and F.refused_by_policy(again, "dict_to_pickle", decoded[1]):
            return  # e.g. a class allowed as a class, written back verbatim (@pkl), whose names count as calls
        if again[0] != "ok":
            raise F.Finding(f"dict_to_pickle refuses what pickle_to_dict gave: {again[2][:300]}")
        F.same_objects("json_to_pickle -> pickle_to_dict -> dict_to_pickle", p, again[1], 1)


def record(module: str, name: str, rest: bytes, text: str, utf8: bool, value_read, read_error) -> None:
    label = f"from_pg_json({module!r}, {name!r})"
    results = [F.both(label + " bytes", "encode_zodb_record_from_pg_json", module, name, rest)[0],
               F.both(label + " bytearray", "encode_zodb_record_from_pg_json", module, name, bytearray(rest))[0],
               F.both(label + " str", "encode_zodb_record_from_pg_json", module, name, text)[0]]
    if not utf8:
        results.pop()  # the str is not the bytes' text
        if results[0][0] == "ok":
            raise F.Finding(f"{label}: bytes that are not UTF-8 encoded: {rest[:200]!r}")
    first = results[0]
    for other in results[1:]:
        if (first[0], other[0]) == ("ok", "ok"):
            F.must_equal(f"{label}: the str, bytes and bytearray give different records", first[1], other[1])
        elif first[0] != other[0]:
            raise F.Finding(f"{label}: str, bytes and bytearray disagree: {[F.describe(r)[:200] for r in results]}")
    if not utf8:
        return
    # docs/api.md: byte for byte encode_zodb_record of the text read as json_to_pickle reads it
    if read_error is not None:
        if first[0] == "ok":
            raise F.Finding(f"{label}: took text the JSON reader refuses ({read_error})")
        return
    via_dict, _ = F.both(label + " as a dict", "encode_zodb_record", {"@cls": [module, name], "@s": value_read})
    if via_dict[0] != first[0] or (first[0] == "ok" and via_dict[1] != first[1]):
        raise F.Finding(f"{label} != encode_zodb_record of the text read:\n  {F.describe(first)[:300]}\n"
                        f"  {F.describe(via_dict)[:300]}")
    if first[0] != "ok":
        return
    r = first[1]
    decoded, _ = F.both(label + ", decoded", "decode_zodb_record_for_pg_json", r)
    if decoded[0] != "ok":
        return  # (a @pkl state, a depth the encoder counts differently: the decode harness judges decoding)
    m2, n2, text2, _ = decoded[1]
    if (module, name) == DEFAULT_CLASS and plain(value_read, pg=True) and (m2, n2) == DEFAULT_CLASS:
        F.must_equal(f"{label}: a plain state does not come back as it was", value_read, F.read_json(text2))
    again, _ = F.both(label + ", decoded, loaded again", "encode_zodb_record_from_pg_json", m2, n2, text2)
    if again[0] != "ok" and F.refused_by_policy(again, "encode_zodb_record_from_pg_json", m2, n2, text2):
        return
    if again[0] != "ok":
        raise F.Finding(f"{label}: encode_zodb_record_from_pg_json refuses what "
                        f"decode_zodb_record_for_pg_json wrote: {again[2][:300]}")
    F.same_objects(label + " -> decode_zodb_record_for_pg_json -> from_pg_json", r, again[1], 2)


def TestOneInput(data: bytes) -> None:
    module, name, rest = split(data)
    try:
        text = rest.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError:
        text = rest.decode("utf-8", "surrogateescape")
        utf8 = False
    value_read = read_error = None
    try:
        value_read = F.read_json(text)
    except ValueError as exc:
        read_error = exc
    single(text, value_read)
    record(module, name, rest, text, utf8, value_read, read_error)


if __name__ == "__main__":
    F.main(TestOneInput)
