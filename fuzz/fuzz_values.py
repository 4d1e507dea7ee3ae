#!/usr/bin/env python3
"""Harness: values built from the fuzzer's bytes (markers included) -> encode_zodb_record and dict_to_pickle.

The bytes drive a generator (atheris.FuzzedDataProvider) of marker trees as
the decoders write them and as users hand them in: JSON values, every marker
of docs/format.md (well-formed, malformed, and of the wrong types), escaped
keys, BTree states, object records, native Python values (tuples, bytes,
sets, datetimes with fixed, pytz and zoneinfo zones, Decimals, UUIDs, big
ints, str/int/dict/list subclasses), dicts of every layout CPython has (split
tables, deleted entries, non-str keys), shared and (rarely) cyclic
containers, and chains of one shape around the depth limits (C_WALK_DEPTH and
MAX_DEPTH, +-2 levels: where the Cython twin hands a value to the Python twin, and
where the ValueError starts).

The oracle, for a record {"@cls": [module, name], "@s": state} and a dict:

1. encode_zodb_record and dict_to_pickle of both twins: only ValueError
   escapes (TypeError too when the generator put in a value that cannot be
   encoded); the same outcome (pickle bytes identical); the argument unchanged;
2. what encodes decodes back: pickle_to_dict / decode_zodb_record of both
   twins agree; a value without markers (plain JSON values, 64-bit ints, no
   "@" keys) comes back equal; and whatever decodes encodes back to the same
   objects (fidelity);
3. sometimes (a byte of the input decides) a garbage object whose __del__
   changes a container of the value is left for the collector, which runs at
   every allocation during the Cython twin's encode: it may give bytes,
   ValueError or RuntimeError, and must not crash (ASan: no use after free).
"""

from __future__ import annotations

import base64
import collections
import datetime
import decimal
import gc
import math
import uuid

import atheris

import fuzzlib as F
from zodb_json_codec._common import C_WALK_DEPTH, MAX_DEPTH

try:
    import pytz
except ImportError:  # pragma: no cover - a test dependency
    pytz = None
try:
    import zoneinfo
except ImportError:  # pragma: no cover
    zoneinfo = None

I64 = (-(1 << 63), (1 << 63) - 1)
MAX_NODES = 600

CLASSES = [("app.mod", "Kls"), ("persistent.mapping", "PersistentMapping"), ("BTrees.OOBTree", "OOBTree"),
           ("BTrees.OOBTree", "OOBucket"), ("BTrees.OOBTree", "OOSet"), ("BTrees.OOBTree", "OOTreeSet"),
           ("BTrees.IIBTree", "IIBucket"), ("BTrees.IOBTree", "IOBTree"), ("BTrees.Length", "Length"),
           ("", ""), ("a.b.c", "D.E"), ("builtins", "set"), ("datetime", "datetime"), ("decimal", "Decimal"),
           ("copyreg", "_reconstructor"), ("uuid", "UUID"), ("collections", "OrderedDict"), ("m", "")]
TEXTS = ["", "a", "k", "@", "@t", "@b", "@d", "@cls", "@s", "@ref", "@id", "@ns:AA==", "@su:7aCA",
         "@ns:YQBi", "@su:", "\x00", "a\x00b", "\ud800", "x\udfffy", "\u00e9", "\u2014", "\U0001f600",
         "a\"b\\c\n\x01", "0000000000000001", "00000000000000ff", "true", "-0", "1e16", "x" * 40, "y" * 300]
FLOATS = [0.0, -0.0, float("nan"), -float("nan"), float("inf"), -float("inf"), 1e16, 1e15, 9999999999999998.0,
          1e-5, 1e-7, 5e-324, 1.7976931348623157e308, 0.1, 1 / 3, 123456.789, 2.5, -1.5]
INTS = [0, 1, -1, 255, 256, 65535, 65536, (1 << 31) - 1, 1 << 31, -(1 << 31), (1 << 32), I64[0], I64[1],
        I64[0] - 1, I64[1] + 1, 1 << 64, -(1 << 64), (1 << 127) - 1, 1 << 128, 10 ** 40, -(10 ** 100)]
DECIMALS = ["1.5", "-0", "0E-7", "NaN", "-NaN", "sNaN", "Infinity", "-Infinity", "1E+7", "123.4500",
            "9" * 60, "1e999999", "x", ""]
ZONES = ["Europe/Berlin", "US/Eastern", "Asia/Kolkata", "UTC", "Australia/Lord_Howe"]
DT_TEXTS = ["2025-01-02T03:04:05", "2025-01-02T03:04:05.000001+05:30", "2025-01-02T03:04:05+01:02:03.5",
            "0001-01-01T00:00:00", "9999-12-31T23:59:59.999999-23:59", "2025-13-01T00:00:00", "yesterday",
            "2025-01-02", "12:30:00", "12:30:00.5+00:00", "24:00:00", "2025-01-02T03:04:05+24:00", ""]
MARKERS = ["@t", "@b", "@bi", "@d", "@set", "@fset", "@ref", "@pkl", "@dt", "@date", "@time", "@td", "@dec",
           "@uuid", "@cls", "instance", "@reduce", "@newobj", "@inst", "@ns", "@su", "@f", "wrapper", "@kv",
           "@ks", "@children", "escaped keys", "@tz"]
SHAPES = ["list", "dict", "tuple", "@t", "@d", "instance", "@reduce", "@ref", "@set", "@newobj", "@inst", "@kv"]
SMALL_PICKLES = [b"\x80\x03K\x01.", b"\x80\x03}q\x00X\x01\x00\x00\x00aK\x01s.",
                 b"\x80\x03cfoo\nBar\nq\x00.\x80\x03}q\x01.", b"\x80\x02]q\x00(K\x01K\x02e.", b"N.", b"garbage"]


SHARED_BUDGET = 20000


def _weight(value, limit: int) -> int:
    """The size of value as a tree (containers and items, long texts by the 64 characters), up to limit."""
    total, stack = 0, [value]
    while stack and total < limit:
        v = stack.pop()
        total += 1
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(v)
        elif isinstance(v, (str, bytes)):
            total += len(v) // 64
    return total


class Str(str):
    pass


class Int(int):
    pass


class Dict(dict):
    pass


class List(list):
    pass


class Attrs:
    """Instances whose __dict__ is a split table (shared keys)."""


class Unencodable:
    pass


class Meddler:
    """Garbage in a reference cycle whose __del__ changes a container of the value being encoded."""

    def __init__(self, change) -> None:
        self.change = change
        self.cycle = self

    def __del__(self) -> None:
        try:
            self.change()
        except Exception:  # noqa: BLE001 - whatever it did, it did
            pass


class Gen:
    def __init__(self, fdp: atheris.FuzzedDataProvider) -> None:
        self.fdp = fdp
        self.nodes = 0
        self.unencodable = False
        self.cyclic = False
        self.containers = []  # made so far: for sharing and for the meddler
        self.expanded = 0  # what sharing added to the value as a tree
        self.chains = 0

    # -- the fuzzer's choices
    def n(self, lo: int, hi: int) -> int:
        return self.fdp.ConsumeIntInRange(lo, hi)

    def pick(self, seq):
        return seq[self.n(0, len(seq) - 1)]

    def chance(self, in_256: int) -> bool:
        return self.n(0, 255) < in_256

    def more(self) -> bool:
        return self.fdp.remaining_bytes() > 0 and self.nodes < MAX_NODES

    # -- leaves
    def text(self) -> str:
        k = self.n(0, 4)
        if k == 0:
            return self.pick(TEXTS)
        if k == 1:
            return self.fdp.ConsumeUnicodeNoSurrogates(self.n(0, 24))
        if k == 2:
            return self.fdp.ConsumeUnicode(self.n(0, 24))  # lone surrogates too
        if k == 3:
            return "@" + self.fdp.ConsumeUnicodeNoSurrogates(self.n(0, 8))
        return self.pick(TEXTS) * self.n(1, 200)

    def key(self) -> str:
        k = self.n(0, 5)
        if k == 0:
            return "@" + self.pick(["ns:", "su:", ""]) + base64.b64encode(self.text().encode("utf-8", "surrogatepass")).decode()
        if k == 1:
            return self.pick(TEXTS)
        return self.fdp.ConsumeUnicodeNoSurrogates(self.n(0, 12)) if k < 4 else self.text()

    def integer(self) -> int:
        k = self.n(0, 4)
        if k == 0:
            return self.pick(INTS)
        if k == 1:
            return self.fdp.ConsumeInt(self.n(1, 20))
        if k == 2:
            return (1 << self.n(0, 300)) + self.n(-2, 2)
        return self.n(-1000, 100000)

    def real(self) -> float:
        return self.pick(FLOATS) if self.chance(128) else self.fdp.ConsumeFloat()

    def raw(self) -> bytes:
        return self.fdp.ConsumeBytes(self.n(0, 40))

    def b64(self, raw=None) -> str:
        if self.chance(24):
            return self.pick(["not base64!", "YQ", "====", "", "AP8", "A" * 11])
        return base64.b64encode(self.raw() if raw is None else raw).decode()

    def tzinfo(self):
        k = self.n(0, 5)
        if k == 0:
            return datetime.timezone.utc
        if k == 1:
            return datetime.timezone(datetime.timedelta(seconds=self.n(-86399, 86399),
                                                        microseconds=self.pick([0, 1, 999999])))
        if k == 2:
            return datetime.timezone(datetime.timedelta(minutes=self.n(-1439, 1439)), self.text())
        if k == 3 and pytz is not None:
            return pytz.timezone(self.pick(ZONES)) if self.chance(200) else pytz.utc
        if k == 4 and zoneinfo is not None:
            return zoneinfo.ZoneInfo(self.pick(ZONES))
        return None

    def native(self):
        k = self.n(0, 12)
        if k == 0:
            try:
                dt = datetime.datetime(self.n(1, 9999), self.n(1, 12), self.n(1, 28), self.n(0, 23), self.n(0, 59),
                                       self.n(0, 59), self.pick([0, 1, 999999, self.n(0, 999999)]),
                                       fold=self.n(0, 1))
            except ValueError:
                return None
            tz = self.tzinfo()
            if pytz is not None and isinstance(tz, pytz.BaseTzInfo) and tz is not pytz.utc:
                try:
                    return tz.localize(dt)
                except Exception:  # noqa: BLE001 - (pytz on the years it cannot place)
                    return dt
            return dt.replace(tzinfo=tz)
        if k == 1:
            return datetime.date(self.n(1, 9999), self.n(1, 12), self.n(1, 28))
        if k == 2:
            tz = self.tzinfo()
            if pytz is not None and isinstance(tz, pytz.BaseTzInfo):
                tz = None
            return datetime.time(self.n(0, 23), self.n(0, 59), self.n(0, 59), self.n(0, 999999), tzinfo=tz)
        if k == 3:
            try:
                return datetime.timedelta(days=self.n(-999999999, 999999999), seconds=self.n(0, 86399),
                                          microseconds=self.n(0, 999999))
            except OverflowError:
                return datetime.timedelta(0)
        if k == 4:
            try:
                return decimal.Decimal(self.pick(DECIMALS))
            except decimal.InvalidOperation:
                return decimal.Decimal(self.n(-5, 5))
        if k == 5:
            return uuid.UUID(int=self.pick([0, 1, I64[1], 1 << 63, (1 << 128) - 1, self.fdp.ConsumeInt(16) % (1 << 128)]))
        if k == 6:
            return self.raw()
        if k == 7:
            return bytearray(self.raw())
        if k == 8:
            return Str(self.text()) if self.chance(128) else Int(self.integer())
        if k == 9:
            return datetime.timezone(datetime.timedelta(minutes=self.n(-1439, 1439)))
        if k == 10:
            return memoryview(self.raw())
        if k == 11 and self.chance(16):
            self.unencodable = True
            return self.pick([Unencodable(), complex(1, 2), object(), range(3), datetime.datetime.now])
        return self.integer()

    def hashable(self, depth: int):
        k = self.n(0, 5)
        if k == 0:
            return self.integer()
        if k == 1:
            return self.text()
        if k == 2:
            return tuple(self.hashable(depth + 1) for _ in range(self.n(0, 3)) if self.more())
        if k == 3:
            return frozenset(self.hashable(depth + 1) for _ in range(self.n(0, 3)) if self.more())
        if k == 4:
            return self.pick([None, True, False, 1.5, -0.0, float("nan")])
        v = self.native()
        try:
            hash(v)
            return v
        except TypeError:
            return self.integer()

    def leaf(self):
        k = self.n(0, 9)
        if k == 0:
            return None
        if k == 1:
            return bool(self.n(0, 1))
        if k in (2, 3):
            return self.integer()
        if k == 4:
            return self.real()
        if k in (5, 6):
            return self.text()
        if k == 7:
            return self.native()
        return self.pick([0, "", "v", 1.0, -1])

    # -- containers
    def items(self, depth: int, lo: int = 0, hi: int = 6) -> list:
        out = []
        for _ in range(self.n(lo, hi)):
            if not self.more():
                break
            out.append(self.value(depth + 1))
        self.containers.append(out)
        return out

    def pairs(self, depth: int, hashable_keys: bool = False) -> list:
        """[[k, v], ...] (@d, @kv, @items): the list and each pair can be shared or changed by the meddler."""
        out = [[self.hashable(depth) if hashable_keys or self.chance(96) else self.value(depth + 1),
                self.value(depth + 1)] for _ in range(self.n(0, 5)) if self.more()]
        self.containers.append(out)
        self.containers.extend(out)
        return out

    def plain_dict(self, depth: int) -> dict:
        k = self.n(0, 6)
        keys = [self.key() for _ in range(self.n(0, 8)) if self.more()]
        if k == 0:  # a split table: an instance's __dict__
            obj = Attrs()
            for name in keys:
                setattr(obj, name, self.value(depth + 1))
            d = obj.__dict__
        elif k == 1:  # deleted entries
            d = {key: self.value(depth + 1) for key in keys}
            for key in list(d)[::2]:
                del d[key]
            d.update((self.key(), self.value(depth + 1)) for _ in range(self.n(0, 2)))
        elif k == 2:  # keys of any type
            d = {self.hashable(depth): self.value(depth + 1) for _ in range(self.n(0, 5)) if self.more()}
        elif k == 3:
            d = Dict((key, self.value(depth + 1)) for key in keys) if self.chance(128) else \
                collections.OrderedDict((key, self.value(depth + 1)) for key in keys)
        else:
            d = {key: self.value(depth + 1) for key in keys}
        return d

    def ref(self, depth: int):
        k = self.n(0, 7)
        oid = self.fdp.ConsumeBytes(8) if self.chance(220) else self.raw()
        if k == 0:
            return oid.hex().rjust(16, "0")
        if k == 1:
            return [oid.hex().rjust(16, "0"), self.pick(["mod.Name", "Name", "a.b.C", "", self.text()])]
        if k == 2:
            return {"@b": self.b64(oid)}
        if k == 3:
            return ["w", {"@t": [{"@b": self.b64(oid)}]}]
        if k == 4:
            return ["m", {"@t": [self.text(), {"@b": self.b64(oid)}, {"@cls": [self.text(), self.text()]}]}]
        if k == 5:
            return {"@t": [{"@b": self.b64(oid)}, {"@cls": ["mod", "Name"]}]}
        if k == 6:
            return self.text()
        return self.value(depth + 1)

    def cls(self) -> list:
        return list(self.pick(CLASSES)) if self.chance(200) else [self.text(), self.text()]

    def marker(self, depth: int):
        m = self.pick(MARKERS)
        if m == "@t":
            return {"@t": self.items(depth)}
        if m == "@b":
            return {"@b": self.b64()}
        if m == "@bi":
            return {"@bi": str(self.integer()) if self.chance(220) else self.text()}
        if m == "@d":
            return {"@d": self.pairs(depth)}
        if m in ("@set", "@fset"):
            return {m: [self.hashable(depth) for _ in range(self.n(0, 5)) if self.more()]}
        if m == "@ref":
            return {"@ref": self.ref(depth)}
        if m == "@pkl":
            return {"@pkl": self.b64(self.pick(SMALL_PICKLES)) if self.chance(200) else self.b64()}
        if m in ("@dt", "@date", "@time"):
            v = self.native() if self.chance(128) else None
            if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
                text = v.isoformat()
            else:
                text = self.pick(DT_TEXTS)
            d = {m: text}
            if m != "@date" and self.chance(64):
                d["@tz"] = self.pick([{"pytz": [self.pick(ZONES), self.integer(), self.integer(), self.text()],
                                       "name": self.pick(ZONES)},
                                      {"zoneinfo": self.pick(ZONES + ["Nowhere/Else", ""])},
                                      {"name": self.text()}, {}])
            return d
        if m == "@td":
            return {"@td": [self.integer() if self.chance(230) else self.leaf() for _ in range(self.pick([3, 3, 3, 2, 4]))]}
        if m == "@dec":
            return {"@dec": self.pick(DECIMALS) if self.chance(128) else self.text()}
        if m == "@uuid":
            return {"@uuid": str(uuid.UUID(int=self.fdp.ConsumeInt(16) % (1 << 128))) if self.chance(200) else self.text()}
        if m == "@cls":
            return {"@cls": self.cls()}
        if m == "instance":
            d = {"@cls": self.cls(), "@s": self.value(depth + 1)}
            if self.chance(64):
                d["@items"] = self.pairs(depth)
            if self.chance(64):
                d["@appends"] = self.items(depth)
            return d
        if m in ("@reduce", "@newobj"):
            inner = {"callable": {"@cls": self.cls()} if self.chance(220) else self.value(depth + 1),
                     "args": {"@t": self.items(depth)} if self.chance(230) else self.value(depth + 1)}
            for extra in (("state", "items", "appends") if m == "@reduce" else ("kwargs", "state")):
                if self.chance(60):
                    inner[extra] = self.pairs(depth) if extra == "items" else (
                        self.items(depth) if extra == "appends" else self.value(depth + 1))
            return {m: inner}
        if m == "@inst":
            return {"@inst": {"@obj": self.value(depth + 1), "@state": self.value(depth + 1)}}
        if m == "@ns":
            return {"@ns": self.b64(("a\x00" + self.text()).encode("utf-8", "surrogatepass"))}
        if m == "@su":
            return {"@su": self.b64(("\udc80" + self.text()).encode("utf-8", "surrogatepass"))}
        if m == "@f":
            return {"@f": self.pick(["nan", "inf", "-inf", "-0.0", "1e+16", "1e16", "0.5", "NaN", ""])}
        if m == "wrapper":
            return self.pick([{"@args": self.value(depth + 1), "@state": self.value(depth + 1)},
                              {"@obj": self.value(depth + 1), "@state": self.value(depth + 1)},
                              {"@callable": self.value(depth + 1), "@args": self.value(depth + 1),
                               "@state": self.value(depth + 1)},
                              {"@args": self.value(depth + 1), "@kwargs": self.value(depth + 1)}])
        if m in ("@kv", "@ks", "@children"):
            return self.btree_state(depth)
        if m == "escaped keys":
            return {self.key(): self.value(depth + 1) for _ in range(self.n(1, 5))}
        return {"@tz": self.value(depth + 1)}

    def btree_state(self, depth: int):
        k = self.n(0, 3)
        if k == 0:
            d = {"@kv": self.pairs(depth, hashable_keys=True)}
        elif k == 1:
            d = {"@ks": [self.hashable(depth) for _ in range(self.n(0, 6)) if self.more()]}
        elif k == 2:
            children = []
            for i in range(self.n(0, 4)):
                if i:
                    children.append(self.hashable(depth))
                children.append({"@ref": self.ref(depth)})
            return {"@children": children, "@first": {"@ref": self.ref(depth)}}
        else:
            return self.value(depth + 1)
        if self.chance(64):
            d["@next"] = {"@ref": self.ref(depth)}
        return d

    def chain(self, value):
        """value inside a chain of one shape, around a depth limit."""
        shape = self.pick(SHAPES)
        levels = self.pick([w + d for w in (C_WALK_DEPTH, MAX_DEPTH) for d in (-2, -1, 0, 1, 2)])
        wrap = {
            "list": lambda v: [v], "dict": lambda v: {"k": v}, "tuple": lambda v: (v,), "@t": lambda v: {"@t": [v]},
            "@d": lambda v: {"@d": [[1, v]]}, "instance": lambda v: {"@cls": ["m", "C"], "@s": v},
            "@reduce": lambda v: {"@reduce": {"callable": {"@cls": ["m", "f"]}, "args": {"@t": [v]}}},
            "@ref": lambda v: {"@ref": v}, "@set": lambda v: {"@set": [v]},
            "@newobj": lambda v: {"@newobj": {"callable": {"@cls": ["m", "C"]}, "args": {"@t": []}, "state": v}},
            "@inst": lambda v: {"@inst": {"@obj": {"@cls": ["m", "C"]}, "@state": v}},
            "@kv": lambda v: {"@cls": ["BTrees.OOBTree", "OOBucket"], "@s": {"@kv": [["k", v]]}},
        }[shape]
        for _ in range(levels):
            value = wrap(value)
        return value

    def value(self, depth: int = 0):
        self.nodes += 1
        if not self.more() or depth > 12:
            return self.leaf()
        k = self.n(0, 31)
        if k < 8:
            return self.leaf()
        if k < 12:
            v = self.items(depth)
            if self.chance(16):
                v = List(v)
            self.containers.append(v)
            return v
        if k < 16:
            d = self.plain_dict(depth)
            self.containers.append(d)
            return d
        if k < 18:
            return tuple(self.items(depth))
        if k < 19:
            return self.pick([set, frozenset])(self.hashable(depth) for _ in range(self.n(0, 4)))
        if k < 28:
            d = self.marker(depth)
            self.containers.append(d)
            return d
        if k < 29 and self.containers:  # shared (within a budget: a tree of shared parts grows exponentially)
            c = self.pick(self.containers)
            self.expanded += _weight(c, SHARED_BUDGET)
            return c if self.expanded < SHARED_BUDGET else self.leaf()
        if k < 30 and self.chance(32) and self.chains < 2:  # (chains of chains: 13 000 levels, slow to check)
            self.chains += 1
            return self.chain(self.value(depth + 1))
        if k < 31 and self.chance(8) and self.containers:  # a cycle
            c = self.pick(self.containers)
            self.cyclic = True
            v = [c]
            if type(c) is list:
                c.append(v)
            elif type(c) is dict:
                c["cycle"] = v
            return v
        return self.native()


def plain(value) -> bool:
    """Values that pickle_to_dict gives back as they are: JSON types, str keys without "@", 64-bit ints."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict:
            for k, x in v.items():
                if type(k) is not str or k[:1] == "@":
                    return False
                stack.append(x)
        elif t is list:
            stack.extend(v)
        elif t is int:
            if not I64[0] <= v <= I64[1]:
                return False
        elif t not in (str, float, bool, type(None)):
            return False
    return True


def encode(label: str, name: str, arg, gen: Gen) -> tuple:
    errors = (ValueError, TypeError) if gen.unencodable else (ValueError,)
    before = None if gen.cyclic else F.snapshot(arg)
    py, _ = F.both(label, name, arg, errors=errors)
    if before is not None:
        changed = F.diff(before, arg)
        if changed:
            raise F.Finding(f"{label} {name}: an encoder changed its argument: {changed}")
    return py


def decoded_back(label: str, data: bytes, decoder: str, encoder: str, pickles: int, expected=None) -> None:
    py, _ = F.both(label, decoder, data)
    if py[0] != "ok":
        if F.tolerated_decode_error(py[2]):
            return
        raise F.Finding(f"{label}: {decoder} refuses what the encoder wrote: {py[2][:300]}\n  {data[:300]!r}")
    value = py[1]
    if expected is not None:
        F.must_equal(f"{label}: {decoder}(encoded) != the plain value encoded", expected, value)
    if encoder == "dict_to_pickle" and type(value) is not dict:
        return
    again, _ = F.both(label + ", encoded again", encoder, value)
    if again[0] != "ok" and F.refused_by_policy(again, encoder, value):
        return
    if again[0] != "ok":
        raise F.Finding(f"{label}: {encoder} refuses what {decoder} gave: {again[2][:300]}")
    F.same_objects(f"{label} -> {decoder} -> {encoder}", data, again[1], pickles)


def meddled(gen: Gen, record: dict, as_dict: dict) -> None:
    """A collection during the Cython twin's encode changes a container of the value."""
    target = gen.pick(gen.containers)
    how = gen.n(0, 3)

    def change():
        if type(target) is list or isinstance(target, list):
            (target.clear, lambda: target.__delitem__(slice(1, None)), lambda: target.append([1]),
             lambda: target.insert(0, {"x": 1}))[how]()
        elif isinstance(target, dict):
            (target.clear, lambda: target.popitem(), lambda: target.update({"new": [1]}),
             lambda: [target.pop(k) for k in list(target)[1:]])[how]()

    name, arg = ("encode_zodb_record", record) if gen.chance(128) else ("dict_to_pickle", as_dict)
    threshold = gc.get_threshold()
    gc.collect()
    Meddler(change)
    gc.set_threshold(1)
    try:
        result = F.call_cy("meddled " + name, getattr(F.CY, name), arg)
    finally:
        gc.set_threshold(*threshold)
        gc.collect()
    F.allowed(f"{name} while a collection changes its value", "cython", result,
              (ValueError, RuntimeError, TypeError) if gen.unencodable else (ValueError, RuntimeError))


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    gen = Gen(fdp)
    module, name = gen.cls() if gen.chance(230) else (gen.leaf(), gen.leaf())
    k = gen.n(0, 7)
    if k == 0 and [module, name] == ["", ""]:
        state = {"@obj": gen.value(1), "@state": gen.value(1)}
    elif k == 1:
        state = {"@args": {"@t": gen.items(1)}, "@state": gen.value(1)}
    elif k == 2:
        state = gen.btree_state(1)
    else:
        state = gen.value(0)
    record = {"@cls": [module, name], "@s": state}
    if gen.chance(8):
        record[gen.pick(["@items", "@appends", "@x"])] = gen.value(1)
    top = gen.value(0)
    as_dict = top if isinstance(top, dict) else {"v": top}
    if gen.chance(6) and gen.containers:
        meddled(gen, record, as_dict)
        return

    py = encode("values", "encode_zodb_record", record, gen)
    if py[0] == "ok" and not F.verbatim(state):
        expected = None
        if [module, name] == ["app.mod", "Kls"] and plain(state) and not gen.cyclic:
            expected = {"@cls": ["app.mod", "Kls"], "@s": state}
        decoded_back("encode_zodb_record", py[1], "decode_zodb_record", "encode_zodb_record", 2, expected)
    py = encode("values", "dict_to_pickle", as_dict, gen)
    if py[0] == "ok" and not F.verbatim(as_dict):
        expected = as_dict if plain(as_dict) and not gen.cyclic and type(as_dict) is dict else None
        decoded_back("dict_to_pickle", py[1], "pickle_to_dict", "dict_to_pickle", 1, expected)


if __name__ == "__main__":
    F.main(TestOneInput)
