#!/usr/bin/env python3
"""(Re)makes the seed corpora in fuzz/corpus/<harness>/ from the test data and the tests' hand-made inputs.

    .fuzz-build/venv/bin/python fuzz/make_seeds.py [--clean]

(any interpreter with the test dependencies; it imports the tests' helpers
and the codec's pure-Python twin from src/, nothing compiled).  Files are
named by the SHA-1 of their contents, as libFuzzer names what it adds, so
running it again, or merging what a campaign found (scripts/fuzz --keep),
adds no duplicates; --clean removes the harness's files first (but not the
finding-* inputs).

fuzz_decode: a varied subset of the public and wikipedia corpus records
  (one or two per class, small and large), some of their state pickles
  alone, records pickled here from many kinds of values with protocols 0-5,
  and the hand-made pickles of tests/test_badinput.py, tests/deepvalues.py
  and tests/test_crash_safety.py (damaged, hostile, 999-1001 levels deep,
  memo sharing within the expansion budget).
fuzz_json: the decode_zodb_record_for_pg_json texts of those records after
  a first line "#module name" (the class for encode_zodb_record_from_pg_json),
  some pickle_to_json texts, malformed JSON and malformed markers.
fuzz_values, fuzz_structure: byte strings from a fixed seed (the harnesses
  build their values, their records, from whatever bytes they get).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import decimal
import hashlib
import json
import os
import random
import struct
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))
os.environ["ZODB_JSON_CODEC_PURE_PYTHON"] = "1"  # the pure twin from src/: nothing compiled is needed

from zodb_json_codec import _decode_python as codec  # noqa: E402

import corpus  # noqa: E402
from deepvalues import json_text, nested_pickle  # noqa: E402
from helpers import Ref, record  # noqa: E402

CORPUS = HERE / "corpus"
MAX_FILE = 64 << 10  # fuzz_decode's -max_len


def pickle_end(data: bytes) -> int:
    import io
    import pickletools
    for op, _, pos in pickletools.genops(io.BytesIO(data)):
        if op.name == "STOP":
            return pos + 1
    raise ValueError("no STOP")


def corpus_records():
    """A varied subset of both corpora: per class, the smallest record and one of a few kB; a few large ones."""
    picked = []
    for name, per_class, large in (("public", 2, 2), ("wikipedia", 1, 1)):
        by_class = collections.defaultdict(list)
        for row in corpus.vectors(name):
            data = corpus.row_record(row)
            if len(data) <= MAX_FILE:
                by_class[tuple(row["pg_json"][:2]) if row["pg_json"] else ("?", "?")].append(data)
        rows = []
        for cls in sorted(by_class):
            records = sorted(by_class[cls], key=len)
            rows.append(records[0])
            mid = [r for r in records if 1000 <= len(r) <= 6000]
            if per_class > 1 and mid:
                rows.append(mid[len(mid) // 2])
        everything = sorted((r for rs in by_class.values() for r in rs), key=len)
        rows += everything[-large:]
        picked += rows
    return picked


class Thing:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def generated_records():
    """Records of many kinds of values, with each protocol in turn."""
    try:
        import pytz
        berlin = pytz.timezone("Europe/Berlin").localize(datetime.datetime(2025, 7, 1, 9, 0))
    except ImportError:
        berlin = None
    try:
        import zoneinfo
        ny = datetime.datetime(2025, 3, 9, 1, 30, tzinfo=zoneinfo.ZoneInfo("America/New_York"))
    except Exception:  # noqa: BLE001
        ny = None
    from zodbapp import AttrDict, AttrList, Plain
    values = [
        {"title": "Hello", "count": 42, "ratio": 0.5, "none": None, "yes": True},
        {"when": datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.timezone.utc)},
        {"when": datetime.datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30)))},
        {"when": datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(seconds=3723, microseconds=5), "X"))},
        {"berlin": berlin, "ny": ny, "naive": datetime.datetime(1, 1, 1), "fold": datetime.datetime(2025, 11, 2, 1, 30, fold=1)},
        {"d": datetime.date(2025, 6, 15), "t": datetime.time(12, 30, 0, 5), "td": datetime.timedelta(7, 3600, 5)},
        {"dec": [decimal.Decimal("9.90"), decimal.Decimal("NaN"), decimal.Decimal("-Infinity"), decimal.Decimal("1E+7")]},
        {"uuid": uuid.UUID(int=12345), "u2": uuid.UUID(int=2 ** 128 - 1)},
        {"set": {1, 2, 3}, "fset": frozenset(["a", "b"]), "empty": set()},
        {"bytes": b"\x00\xff" * 10, "ba": bytearray(b"abc"), "big": 2 ** 64, "neg": -(2 ** 100), "huge": 7 ** 400},
        {"floats": [float("nan"), float("inf"), -0.0, 1e16, 1e-7, 5e-324, 0.1]},
        {"text": "a\x00b", "sur": "x\udc80y", "uni": "\u2014\U0001f600", "esc": "a\"b\\c\n\x01"},
        {"@t": [1, 2], "@cls": ["a", "b"], "@id": "json-ld", "@obj": 1},
        {1: "a", (1, 2): "b", None: "n", 1.5: "f", "@ref": "x"},
        {"tuple": (1, (2, (3,))), "list": [[], [[]], {}], "nested": {"a": {"b": {"c": [1]}}}},
        {"ref": Ref((b"\x00" * 7 + b"\x01", None)), "ref2": Ref(b"\x00" * 7 + b"\x02"),
         "weak": Ref(["w", (b"\x00" * 7 + b"\x03",)]), "xdb": Ref(["m", ("db", b"\x00" * 7 + b"\x04", Thing)])},
        {"refs": [Ref((bytes([0, 0, 0, 0, 0, 0, 0, i]), Thing)) for i in range(5)]},
        {"obj": Plain(a=1, b=[2]), "od": collections.OrderedDict(a=1, b=2), "dq": collections.deque([1, 2])},
        {"ad": AttrDict(x=1), "al": AttrList([1, 2])},
        {"long": "x" * 5000, "longb": b"y" * 3000},
        {"shared": [[1, 2]] * 3},
        [1, "two", 3.0, None],
        "just a string",
        None,
    ]
    out = []
    for i, value in enumerate(values):
        for protocol in (3, i % 6):
            try:
                out.append(record(value, protocol))
            except Exception:  # noqa: BLE001 - (a value a protocol cannot carry)
                pass
    shared = [1, 2]
    out.append(record({"a": shared, "b": shared, "c": [shared, shared]}))
    out.append(record(Thing(x=1), 3, klass=Thing))  # an object record
    out.append(record({"y": 5}, 3, klass=Ref((b"\x00" * 7 + b"\x01", None))))
    out.append(record({"@args": 1}, 3, klass=(Thing, (1, 2))))
    return out


def badinput_pickles():
    """Hand-made pickles of tests/test_badinput.py (its dict constants and builders)."""
    import test_badinput as t
    out = []
    for body in t.HUGE_LENGTHS.values():
        out += [t.rec(body), t.single(body)]
    for body, _ in t.OFFSET_CASES.values():
        out += [t.rec(body), t.single(body)]
    for body in t.LOOKALIKE_CASES.values():
        out += [t.rec(body), t.single(body)]
    for body in t.PAYLOADS.values():
        out += [t.rec(body), t.single(b"]" * 40 + body + b"a" * 40)]
    for shape in t.NEST:
        for n in (99, 101, 999, 1001):
            if n in (999, 1001) and shape not in ("list", "dict", "instance", "reduce"):
                continue
            out.append(t.rec(t._nested(shape, n)))
    out += [t.rec(t._objects_nested_through_their_items(333)), t.single(t._objects_nested_above_a_reference(50))]
    out += [t.rec(b"N" + b"Q" * 1000), t.rec(b"(" * 2000 + b"K\x01"), t.rec(b"]q\x01h\x010" + b"]" * 50 + b"a" * 50)]
    out += [t.CLASS_PICKLE + t.single(b"N"), b"\x80\x03cmod\x00\nKls\n." + t.single(b"N")]
    out += t.sample_records()[:4]
    out += list(t.mutants(t.sample_records(), 7, 30))
    return out


def crash_safety_pickles():
    """The inputs of tests/test_crash_safety.py that every twin must take (not its known-bug reproducers:
    the harnesses are to find those themselves; see fuzz/README.md)."""
    try:
        import test_crash_safety as t
    except Exception as exc:  # noqa: BLE001 - it imports the newest src/: skip what it cannot give
        print(f"make_seeds: tests/test_crash_safety.py skipped: {exc}", file=sys.stderr)
        return []
    out = []
    for make in (lambda: t.record_of(t.newobj_chain(20)), lambda: t.record_of(t.newobj_chain(99, True)),
                 lambda: t.record_of(t.nested_sets(20)), lambda: t.doubling_lists(8), lambda: t.doubling_dups(8),
                 lambda: t.repeated_text(1000, 20), lambda: t.doubling_objects(8), lambda: t.changed_after_fetched(5),
                 lambda: t.record_of(t.zoned_datetime(0, 3600)), lambda: t.record_of(t.zoned_datetime(-1, 3600))):
        try:
            out.append(make())
        except Exception as exc:  # noqa: BLE001
            print(f"make_seeds: a tests/test_crash_safety.py input skipped: {exc}", file=sys.stderr)
    return out


def deep_pickles():
    return [b"\x80\x03" + nested_pickle(shape, n) + b"." for shape in ("list", "dict", "tuple") for n in (100, 999)
            if (shape, n) != ("tuple", 999)]


def json_seeds(records):
    out = []
    for data in records:
        try:
            module, name, text, _ = codec.decode_zodb_record_for_pg_json(data)
        except ValueError:
            continue
        if " " in module or "\n" in module + name:
            continue
        out.append(f"#{module} {name}\n{text}".encode("utf-8", "surrogatepass"))
    for data in records[:30]:
        try:
            out.append(codec.pickle_to_json(data[pickle_end(data):]).encode("utf-8", "surrogatepass"))
        except ValueError:
            pass
    bad = ["", "{", "[1,]", "NaN", "[Infinity]", '{"a": 1} x', '"\\ud800', "\x00", '{"a":1,"a":2}',
           "[" + "9" * 500 + "]", '"\\u0000"', "\ufeff{}", "[1e400, -0.0, 1E-7, 0.1]", '{"\\ud83d\\ude00": "\\udc80"}']
    out += [b.encode("utf-8", "surrogatepass") for b in bad]
    markers = [
        {"@b": "not base64!"}, {"@b": "YQ"}, {"@dt": "yesterday"}, {"@date": "20250101"}, {"@uuid": "xyz"},
        {"@bi": "12a"}, {"@td": [1, 2, "3"]}, {"@f": "NaNa"}, {"@dt": "2025-01-01T00:00:00", "@tz": {"x": 1}},
        {"@d": [[1, 2, 3]]}, {"@ns": "////"}, {"@reduce": {"callable": None}},
        {"@dt": "2025-07-01T09:00:00", "@tz": {"pytz": ["Europe/Berlin", 7200, 3600, "CEST"], "name": "Europe/Berlin"}},
        {"@dt": "2025-03-09T01:30:00", "@tz": {"zoneinfo": "America/New_York"}},
        {"@reduce": {"callable": {"@cls": ["collections", "OrderedDict"]}, "args": {"@t": []}, "items": [["a", 1]]}},
        {"@newobj": {"callable": {"@cls": ["myapp", "Empty"]}, "args": {"@t": []}}},
        {"@inst": {"@obj": {"@cls": ["m", "C"]}, "@state": {"a": 1}}},
        {"@set": [1, 2]}, {"@fset": []}, {"@t": [1, {"@t": []}]}, {"@pkl": "gANLAS4="},
        {"@ref": ["0000000000000003", "myapp.Folder"]}, {"@ref": "0000000000000003"},
        {"@ns": "YQBi"}, {"@su": "7aCA"}, {"@ns:YQBi": 1, "@su:7aCA": 2}, {"@f": "-0.0"},
    ]
    for m in markers:
        out.append(("#app.mod Kls\n" + json.dumps({"x": m})).encode())
    out.append(b'#BTrees.OOBTree OOBucket\n{"@kv": [["a", 1], ["b", {"@ref": "0000000000000001"}]]}')
    out.append(b'#BTrees.OOBTree OOBTree\n{"@children": [{"@ref": "0000000000000001"}, "m", {"@ref": "0000000000000002"}], "@first": {"@ref": "0000000000000001"}}')
    out.append(b'#BTrees.OOBTree OOSet\n{"@ks": [1, 2, 3], "@next": {"@ref": "0000000000000004"}}')
    out.append(b'# \n{"@obj": {"@ref": {"@b": "AAAAAAAAAAE="}}, "@state": {"y": 5}}')
    for shape in ("@t", "@d", "instance"):
        wrap = {"@t": lambda v: {"@t": [v]}, "@d": lambda v: {"@d": [[1, v]]},
                "instance": lambda v: {"@cls": ["m", "C"], "@s": v}}[shape]
        for n in (99, 999):
            v = 1
            for _ in range(n):
                v = wrap(v)
            out.append(json_text({"v": v}).encode())
    return out


def write(harness: str, blobs, clean: bool) -> None:
    folder = CORPUS / harness
    folder.mkdir(parents=True, exist_ok=True)
    if clean:
        for f in folder.iterdir():
            if not f.name.startswith("finding-"):  # the inputs of fixed findings stay (fuzz/README.md)
                f.unlink()
    added = 0
    for blob in blobs:
        if not blob or len(blob) > MAX_FILE:
            continue
        path = folder / hashlib.sha1(blob).hexdigest()
        if not path.exists():
            path.write_bytes(blob)
            added += 1
    files = list(folder.iterdir())
    print(f"{harness}: {added} added, {len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.2f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove each harness's seeds first")
    parser.add_argument("--only", action="append", metavar="HARNESS", help="only this harness's seeds (repeatable)")
    args = parser.parse_args()
    wanted = set(args.only or ["fuzz_decode", "fuzz_json", "fuzz_values", "fuzz_structure"])

    rnd = random.Random(20240501)
    if "fuzz_values" in wanted:
        write("fuzz_values", [bytes(rnd.randrange(256) for _ in range(rnd.choice([16, 64, 256, 1024, 4096])))
                              for _ in range(60)], args.clean)
    rnd = random.Random(20250050)
    if "fuzz_structure" in wanted:
        write("fuzz_structure", [bytes(rnd.randrange(256) for _ in range(rnd.choice([64, 256, 1024, 4096])))
                                 for _ in range(40)], args.clean)
    if not wanted & {"fuzz_decode", "fuzz_json"}:
        return
    records = corpus_records() + generated_records()
    states = []
    for data in records[::3]:
        try:
            states.append(data[pickle_end(data):])
        except ValueError:
            pass
    hand_made = badinput_pickles() + crash_safety_pickles() + deep_pickles()
    if "fuzz_decode" in wanted:
        write("fuzz_decode", records + states + hand_made, args.clean)
    if "fuzz_json" in wanted:
        write("fuzz_json", json_seeds(records), args.clean)


if __name__ == "__main__":
    main()
