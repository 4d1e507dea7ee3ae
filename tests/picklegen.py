"""ZODB records written opcode by opcode from a driver's choices: pickles whose values share their parts.

Byte-mutating fuzzers rarely write a pickle that fetches a container from the
memo before it is filled, fills it later through the memo, makes it hold
itself, or spells one key by every protocol: such faults need structure.
``generate_record(choices)`` writes a record (a class pickle as ZODB writes
one, then a state pickle, one memo) with tests/pickleops.py's ``Writer``,
which keeps the unpickler's stack, marks and memo, so that every record is
one pickle's own unpickler accepts.  It exercises:

- containers (lists, dicts, objects, sets) fetched by GET/BINGET/LONG_BINGET
  or DUP before they are filled, filled late through the memo (APPEND(S),
  SETITEM(S), ADDITEMS, BUILD), holding themselves, shared between places,
  in chains that double at each level;
- the same text spelled by every opcode (UNICODE with escapes such as
  ``\\u0040``, BINUNICODE, SHORT_BINUNICODE, BINUNICODE8), bytes by STRING,
  BINSTRING, SHORT_BINSTRING, BINBYTES..., ints and floats by binary and text
  opcodes;
- keys and values that look like markers (docs/format.md, "Markers and user
  data", "Escaped keys"), dicts of a marker's shape, lists that become a
  class's names once filled;
- instances (GLOBAL or STACK_GLOBAL, then NEWOBJ, REDUCE, NEWOBJ_EX, INST,
  OBJ or copyreg's _reconstructor, with or without arguments, then BUILD,
  SETITEMS, APPENDS), BTree states, known types (datetimes, Decimal, UUID,
  sets...), class markers fetched again and again, long class names,
  persistent references in each form;
- within a budget of values: records are small (mostly under 2 KB), a few
  long (long names and texts, hundreds of fetches, chains 26 levels deep).

The driver answers one question, an integer in a range (``Choices``):
hypothesis (``hypothesis_choices``, in a ``st.composite``), atheris
(``fuzzed_choices`` of a FuzzedDataProvider), ``random.Random``
(``random_choices``), or a replay of recorded answers (``replayed_choices``,
for shrinking).  The lowest answer is always the simplest, so a driver out of
data, or hypothesis shrinking, ends the record soon with plain values.
"""

from __future__ import annotations

import base64
import datetime
import io
import pickletools
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from pickleops import BYTES, CLASS, DICT, KNOWN, LIST, OBJECT, SET, TEXT, TUPLE, Node, Writer
from zodb_json_codec._known import btree_kind

# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------


class Choices:
    """The generator's one question to its driver: an integer in [lo, hi], lo the simplest answer.

    Every answer is recorded (as its offset from lo) so that it can be replayed.
    """

    def __init__(self, draw: Callable[[int, int], int]) -> None:
        self._draw = draw
        self.answers: List[int] = []

    def integer(self, lo: int, hi: int) -> int:
        value = self._draw(lo, hi)
        if not lo <= value <= hi:
            raise AssertionError(f"the driver answered {value} outside [{lo}, {hi}]")
        self.answers.append(value - lo)
        return value

    def below(self, n: int) -> int:
        return self.integer(0, n - 1)

    def chance(self, one_in: int) -> bool:
        """True once in one_in (False is the simple answer)."""
        return self.integer(0, one_in - 1) == one_in - 1

    def pick(self, options: Sequence):
        return options[self.below(len(options))]

    def weighted(self, options: Sequence[Tuple[int, object]]):
        """One of the options, each as likely as its weight (weights of 0 are left out); the first is the
        simplest."""
        options = [(w, v) for w, v in options if w > 0]
        r = self.below(sum(w for w, _ in options))
        for w, v in options:
            if r < w:
                return v
            r -= w
        raise AssertionError("unreachable")


def hypothesis_choices(draw: Callable) -> Choices:
    """Choices from hypothesis (``draw`` of an ``st.composite``, or ``st.data()``'s ``draw``)."""
    from hypothesis import strategies as st
    return Choices(lambda lo, hi: draw(st.integers(lo, hi)))


def fuzzed_choices(fdp) -> Choices:
    """Choices from an ``atheris.FuzzedDataProvider`` (which answers lo once its data is used up)."""
    return Choices(fdp.ConsumeIntInRange)


def random_choices(rnd) -> Choices:
    """Choices from a ``random.Random``."""
    return Choices(rnd.randint)


def replayed_choices(answers: Sequence[int]) -> Choices:
    """The recorded answers again (offsets from lo, cut to the range asked), then lo once they are used up."""
    it = iter(answers)
    return Choices(lambda lo, hi: lo + min(next(it, 0), hi - lo))


# ---------------------------------------------------------------------------
# What values are made of
# ---------------------------------------------------------------------------

def _marker_keys() -> List[str]:
    """Every key of the marker vocabulary (from the tables that decide what a marker is), escaped keys and
    other "@" keys."""
    from zodb_json_codec import _known
    keys = set(_known._ONE_KEY) | {k for shape in _known._MULTI_KEY for k in shape}
    keys |= {k for shape in _known._BTREE_KEYS for k in shape}
    escaped = ["@ns:" + base64.b64encode(t.encode("utf-8", "surrogatepass")).decode()
               for t in ("\x00", "a\x00", "@ns:a", "@su:7aCA")]
    escaped += ["@su:" + base64.b64encode("\ud800".encode("utf-8", "surrogatepass")).decode()]
    return sorted(keys) + escaped + ["@ns:", "@su:", "@ns:plain", "@su:AA==", "@id", "@type", "@", "@@t"]


def _marker_shapes() -> List[Tuple[str, ...]]:
    """The key sets of multi-key markers (instances, datetimes with zones, wrappers, BTree states)."""
    from zodb_json_codec import _known
    shapes = {tuple(sorted(shape)) for shape in _known._MULTI_KEY} | {tuple(sorted(s)) for s in _known._BTREE_KEYS}
    return sorted(shapes)


MARKER_KEYS = _marker_keys()
MARKER_SHAPES = _marker_shapes()
PLAIN_TEXTS = ["a", "b", "x", "", "k", "title", "value", "é", "中", "😀", "\x00", "a\x00b", "\ud800", "x\udfffy",
               "\u2028", "a\"b\\c\n\x01\r\x1a", "0000000000000001", "AA==", "true", "-0", "1e16", "@", "\\u0040"]
# Texts that fit the markers whose value is a text (what a decoder would write there), and some that do not.
FITTING_TEXTS = {"@b": ["AAAA", "AP8=", "not base64"], "@bi": ["12", "-18446744073709551616", "1x"],
                 "@dt": ["2020-01-01T00:00:00", "2025-01-02T03:04:05+05:30", "yesterday"],
                 "@date": ["2020-01-01", "2020-13-01"], "@time": ["12:30:00", "25:00:00"],
                 "@dec": ["1.5", "NaN", "x"], "@uuid": ["00000000-0000-0000-0000-000000003039", "x"],
                 "@pkl": ["gANLAS4=", "AAAA"], "@ns": ["AA==", "YQBi"], "@su": ["7aCA", "AA=="],
                 "@f": ["nan", "-0.0", "inf", "1e+16", "x"]}
INSTANCE_KEYS = ["@cls", "@s", "@cls"]  # (the keys of the markers a filled list of names completes)
LIST_MARKERS = ("@t", "@set", "@fset", "@d", "@td", "@kv", "@ks", "@children", "@appends", "@items")
DICT_MARKERS = ("@tz", "@reduce", "@newobj")
ATTRIBUTE_NAMES = ["title", "x", "data", "_p_x", "__dict__", "items"]
SPECIAL_INTS = [0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, -(2**31), 2**31, 2**63 - 1, -(2**63), 2**63, 2**64,
                -(2**64) - 1, 10**40]
SPECIAL_FLOATS = [0.0, -0.0, 1.5, 0.1, 1e16, 1e-7, 5e-324, float("inf"), float("-inf"), float("nan"), 12345.678]
BYTE_STRINGS = [b"", b"\x00\xff", b"abc", b"\x00" * 7 + b"\x01", b"'\"\\\n", bytes(range(10)), b"@ns:AA=="]

APP_CLASSES = [("zodbapp", "Item"), ("app.mod", "Kls"), ("persistent.mapping", "PersistentMapping"),
               ("collections", "OrderedDict"), ("a.b", "C.D"), ("modül", "Ça"), ("", ""), ("m", "")]
BTREE_CLASSES = [("BTrees.OOBTree", "OOBucket"), ("BTrees.OOBTree", "OOBTree"), ("BTrees.OOBTree", "OOSet"),
                 ("BTrees.OOBTree", "OOTreeSet"), ("BTrees.IIBTree", "IIBucket"), ("BTrees.Length", "Length")]
ODD_CLASSES = [("m", "\u00e9\u00e9"), ("mod.sub", "Na me"), ("0000000000000001", "x")]


def long_name(length: int) -> str:
    return ("LongName" * (length // 8 + 1))[:length]


# ---------------------------------------------------------------------------
# Protocols: which opcodes a record may use
# ---------------------------------------------------------------------------

class Profile:
    """The opcodes one record is written with: what a pickler of that protocol writes, or everything."""

    def __init__(self, name: str, protocol: Optional[int], texts: Sequence[str], byte_strings: Sequence[str],
                 ints: Sequence[str], puts: Sequence[str], gets: Sequence[str], containers: str,
                 extras: Sequence[str]) -> None:
        self.name = name
        self.protocol = protocol      # the PROTO header (None: protocols 0 and 1 have none)
        self.texts = tuple(texts)
        self.byte_strings = tuple(byte_strings)
        self.ints = tuple(ints)
        self.puts = tuple(puts)
        self.gets = tuple(gets)
        self.containers = containers  # "empty": EMPTY_LIST... then filled; "mark": MARK ... LIST; "both"
        self.extras = frozenset(extras)

    def has(self, extra: str) -> bool:
        return extra in self.extras


_BINARY = ["SHORT_BINSTRING", "BINSTRING"]
_P2 = ["newobj", "tuple_n", "newbool", "binfloat", "fill_many", "binpersid", "long"]
PROFILES = [
    # What ZODB writes (protocol 3): the opcodes the Cython twin reads itself.
    (6, Profile("zodb", 3, ["BINUNICODE"], ["SHORT_BINBYTES", "BINBYTES"] + _BINARY, ["bin", "bin4", "long"],
                ["BINPUT", "LONG_BINPUT"], ["BINGET", "LONG_BINGET"], "empty", _P2 + ["reconstructor"])),
    (1, Profile("protocol 2", 2, ["BINUNICODE"], _BINARY, ["bin", "long"], ["BINPUT", "LONG_BINPUT"],
                ["BINGET", "LONG_BINGET"], "both", _P2 + ["dup", "obj", "reconstructor"])),
    (2, Profile("protocol 4", 4, ["SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"],
                ["SHORT_BINBYTES", "BINBYTES", "BINBYTES8"], ["bin", "long"], ["MEMOIZE", "BINPUT"],
                ["BINGET", "LONG_BINGET"], "empty",
                _P2 + ["frame", "stack_global", "sets", "newobj_ex", "bytearray8"])),
    (2, Profile("protocol 0", None, ["UNICODE"], ["STRING"], ["text", "long_text"], ["PUT"], ["GET"], "mark",
                ["dup", "pop", "inst", "persid", "text_float", "text_bool", "reconstructor"])),
    (1, Profile("protocol 1", None, ["BINUNICODE"], _BINARY, ["bin", "bin4"], ["BINPUT", "LONG_BINPUT"],
                ["BINGET", "LONG_BINGET"], "both", ["binfloat", "fill_many", "binpersid", "obj", "pop", "dup"])),
    (2, Profile("every opcode", 2, ["BINUNICODE", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE8"],
                ["SHORT_BINBYTES", "BINBYTES", "STRING", "BINBYTES8"] + _BINARY,
                ["bin", "bin4", "long", "text", "long_text"], ["BINPUT", "LONG_BINPUT", "PUT", "MEMOIZE"],
                ["BINGET", "LONG_BINGET", "GET"], "both",
                _P2 + ["dup", "pop", "inst", "obj", "persid", "text_float", "text_bool", "stack_global", "sets",
                       "newobj_ex", "reconstructor", "bytearray8"])),
]


# ---------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------

Maker = Callable[[], object]


class RecordGenerator:
    """Writes one record from the choices; ``record()`` gives its bytes."""

    def __init__(self, choices: Choices) -> None:
        self.c = choices
        self.w = Writer()
        self.profile: Profile = choices.weighted(PROFILES)
        self.long = choices.chance(10)  # long names, long texts, hundreds of fetches, long chains
        self.left = choices.weighted([(3, 12), (4, 30), (2, 70), (1, 160)])  # values still to make
        self.max_depth = choices.weighted([(4, 5), (1, 9)])
        self.long_names = [long_name(choices.integer(300, 3000)) for _ in range(2)] if self.long else []
        self.open: List[Node] = []      # containers being filled: fetching one makes it hold itself
        self.pending: List[Node] = []   # containers made empty and put in the memo, to be filled later
        self.hints: Dict[int, str] = {}  # id(node) -> what its filling should look like ("names": a class's)
        self.kept: List[Node] = []      # (the hinted nodes, kept alive so that their ids stay theirs)
        self.class_memo: List[int] = []  # the class pickle's memo entries
        self.guarded: List[Node] = []   # lists a call is to read, whose items must stay hashable until then
        self.btree: Optional[Tuple[bool, bool]] = None  # the record's class is a BTree's: (is_tree, is_map)
        self.features = {self.profile.name} | ({"long"} if self.long else set())  # what the record holds

    # -- the record ------------------------------------------------------------------------------------------

    def record(self) -> bytes:
        self.class_pickle()
        self.class_memo = sorted(self.w.memo)
        self.state_pickle()
        return self.w.data()

    def header(self) -> None:
        if self.profile.protocol is not None:
            self.w.proto(self.profile.protocol)

    def class_pickle(self) -> None:
        """The class as ZODB has written it (docs/format.md, "Class metadata"), or now and then another value:
        an object record."""
        self.header()
        module, name = self.class_names()
        form = self.c.weighted([(6, "global"), (2, "pair+None"), (1, "class+args"), (1, "pair+args"),
                                (1, "pair"), (1, "object record")])

        def pair() -> None:
            self.tuple_of([lambda: self.put_after(self.text_of(module)), lambda: self.put_after(self.text_of(name))])

        def klass() -> None:
            self.put_after(self.w.global_(module, name))

        if form == "global":
            self.w.global_(module, name)
            self.maybe_put(certain=self.c.chance(8) is False)
        elif form == "object record":
            self.value(1)
        elif form == "pair":
            pair()
        else:
            args = self.w.none if form == "pair+None" else lambda: self.tuple_value(1, hashable=False)
            self.tuple_of([klass if form == "class+args" else pair, args])
        self.w.stop()
        self.btree = btree_kind(module, name) if form != "object record" else None

    def class_names(self) -> Tuple[str, str]:
        pool = [(6, APP_CLASSES), (4, BTREE_CLASSES), (1, ODD_CLASSES)]
        if self.long:
            pool.append((4, [("app.mod", n) for n in self.long_names] + [(n, "C") for n in self.long_names]))
        return self.c.pick(self.c.weighted(pool))

    def state_pickle(self) -> None:
        self.header()
        if self.profile.has("frame") and self.c.chance(2):
            self.w.frame()
        if self.btree is not None and self.c.chance(4) is False:
            self.features.add("BTree state")
            self.btree_state(0, *self.btree)
        else:
            self.c.weighted([(1, self.atom), (6, lambda: self.dict_value(0, attributes=True)),
                             (3, lambda: self.value(0))])()
        self.fill_what_is_pending()
        self.w.stop()

    def fill_what_is_pending(self) -> None:
        """Containers still waiting to be filled get their batch now: as values put into the state's own
        container, or one by one after a POP where the profile has one."""
        for _ in range(4):
            top = self.w.top()
            if not self.pending or top is None:
                return
            if top.kind in (LIST, DICT, OBJECT):
                self.fill(top, 1, late_only=True)
            elif self.profile.has("pop"):
                self.late_fill(1)
                self.w.pop()
            else:
                return

    # -- values ------------------------------------------------------------------------------------------------

    def value(self, depth: int, hashable: bool = False, hint: Optional[str] = None) -> Node:
        """Writes the opcodes of one value (anything from an int to a chain of shared containers); its node."""
        self.left -= 1
        if hint is not None and not hashable and self.c.chance(2) is False:
            return self.fitting(depth, hint)
        grow = 0 if self.left <= 0 or depth >= self.max_depth else 1
        mutable = 0 if hashable else grow
        fetchable = self.fetchable(hashable)
        fillable = self.fillable(hashable)
        top = self.w.top()
        options = [
            (4, self.atom),
            (5, lambda: self.text(key=hashable)),
            (1, self.byte_string),
            (4 if fetchable else 0, lambda: self.fetch(fetchable)),
            (1 if self.profile.has("dup") and top is not None and (top.hashable or not hashable) else 0,
             self.dup),
            ((6 if self.pending else 2) * grow if fillable else 0, lambda: self.late_fill(depth, hashable)),
            (3 * mutable, lambda: self.list_value(depth)),
            (4 * mutable, lambda: self.dict_value(depth)),
            (2 * grow, lambda: self.tuple_value(depth, hashable=hashable)),
            (3 * grow, lambda: self.instance(depth)),
            (2 * mutable, lambda: self.reference(depth)),
            (1, self.class_value),
            (2 * grow, lambda: self.known(depth, hashable)),
            (mutable, lambda: self.set_value(depth)),
            ((4 if self.long else 1) * mutable, lambda: self.repeats()),
            (mutable, lambda: self.chain()),
            (mutable, lambda: self.btree_object(depth)),
        ]
        return self.c.weighted(options)()

    def dup(self) -> Node:
        self.features.add("DUP" if self.w.top() not in self.open else "holds itself")
        return self.w.dup()

    def fitting(self, depth: int, hint: str) -> Node:
        """A value a marker key wants (docs/format.md, "Markers"), made now or made empty and filled later."""
        if hint == "names":
            return self.names()
        if hint in FITTING_TEXTS:
            return self.text_of(self.c.pick(FITTING_TEXTS[hint]))
        if hint in LIST_MARKERS:
            return self.list_value(depth)
        return self.dict_value(depth)

    def names(self) -> Node:
        """A list of two texts, a class's names in a "@cls" marker: written at once, or made empty and put in
        the memo to be filled later (the dict holding it looks like no marker until then)."""
        if self.c.chance(3) is False:
            node = self.empty(LIST)
            self.defer(node, "names")
            self.features.add("names filled late")
            return node
        return self.list_of([lambda: self.text(), lambda: self.text()])

    # -- scalars ----------------------------------------------------------------------------------------------

    def atom(self) -> Node:
        return self.c.weighted([(1, self.w.none), (5, self.integer), (2, self.floating), (1, self.boolean)])()

    def integer(self) -> Node:
        value = self.c.weighted([(3, lambda: self.c.integer(0, 300)), (2, lambda: self.c.pick(SPECIAL_INTS)),
                                 (1, lambda: self.c.integer(-(2**70), 2**70))])()
        spelling = self.c.pick(self.profile.ints)
        if spelling == "text":
            return self.w.int_text(self.int_text(value))
        if spelling == "long_text":
            return self.w.long_text(value)
        if spelling in ("bin", "bin4") and -(2**31) <= value < 2**31:
            return self.w.binint(value) if spelling == "bin" else self.w.binint4(value)
        if self.profile.has("long"):
            return self.w.long(value, four=self.c.chance(4))
        return self.w.binint(value % 2**31)

    def int_text(self, value: int) -> str:
        """value as INT's text: decimal, or now and then another spelling every supported pickle reads alike
        (CPython up to 3.13 reads INT with int(text, 0), 3.14 with int(text): not 0x.., 0b.. or 010)."""
        if value in (0, 1):
            return self.c.pick(["0", "+0"] if value == 0 else ["1", "+1"])
        digits = str(value)
        return self.c.weighted([(8, digits), (1, ("+" if value >= 0 else "") + digits),
                                (1, digits[:-1] + "_" + digits[-1] if abs(value) > 9 else digits)])

    def floating(self) -> Node:
        value = self.c.pick(SPECIAL_FLOATS) if self.c.chance(2) else self.c.integer(-10**6, 10**6) / 64
        if self.profile.has("text_float") and (not self.profile.has("binfloat") or self.c.chance(2)):
            return self.w.float_text(value)
        return self.w.binfloat(value)

    def boolean(self) -> Node:
        value = self.c.chance(2)
        if self.profile.has("text_bool") and (not self.profile.has("newbool") or self.c.chance(2)):
            return self.w.boolean(value, text=True)
        if self.profile.has("newbool"):
            return self.w.boolean(value)
        return self.w.binint(int(value))

    # -- texts and bytes ----------------------------------------------------------------------------------------

    def text(self, key: bool = False) -> Node:
        """A text: plain, special, a marker key (often when it is a dict key), long now and then."""
        pools = [(3, PLAIN_TEXTS), (3 if key else 1, MARKER_KEYS), (1 if key else 0, INSTANCE_KEYS)]
        if self.long:
            pools.append((1, ["x" * 5000, "\u00e9" * 2100, "@ns:" + "x" * 600]))
        value = self.c.pick(self.c.weighted(pools))
        if self.c.chance(8):
            value = value + self.c.pick(PLAIN_TEXTS)
        return self.put_after(self.text_of(value))

    def text_of(self, value: str) -> Node:
        """value with one of the profile's text opcodes; UNICODE escapes some characters (``\\u0040``...)."""
        opcode = self.c.pick(self.profile.texts)
        if opcode == "SHORT_BINUNICODE" and len(value.encode("utf-8", "surrogatepass")) > 255:
            opcode = "BINUNICODE"
        escaped: List[int] = []
        if opcode == "UNICODE" and value[:1] == "@":
            self.features.add("@ key in UNICODE")
        if opcode == "UNICODE" and value:
            how = self.c.weighted([(2, "none"), (2, "first"), (1, "some"), (1, "all")])
            if how == "first":
                escaped = [0]
            elif how == "all":
                escaped = list(range(len(value)))
            elif how == "some":
                escaped = [i for i in range(min(len(value), 12)) if self.c.chance(2)]
        return self.w.text(value, opcode, escaped)

    def byte_string(self, value: Optional[bytes] = None) -> Node:
        if value is None:
            value = self.c.pick(BYTE_STRINGS + ([b"y" * 3000] if self.long else []))
        opcode = self.c.pick(self.profile.byte_strings)
        if opcode in ("SHORT_BINSTRING", "SHORT_BINBYTES") and len(value) > 255:
            opcode = opcode.replace("SHORT_", "")
        octal = [i for i in range(min(len(value), 8)) if self.c.chance(3)] if opcode == "STRING" else []
        return self.put_after(self.w.byte_string(value, opcode, octal))

    # -- the memo -------------------------------------------------------------------------------------------------

    def put_after(self, node: Node) -> Node:
        self.maybe_put()
        return node

    def maybe_put(self, certain: bool = False, fresh: bool = False) -> Optional[int]:
        """The top into the memo, as picklers do for most values: at the next index, now and then over an
        entry already there or far past the others (LONG_BINPUT).  fresh: at an index no entry has."""
        node = self.w.top()
        likely = {LIST: 4, DICT: 4, OBJECT: 4, SET: 4, TUPLE: 3, CLASS: 4, TEXT: 2, BYTES: 2}.get(node.kind, 1)
        if not certain and self.c.integer(0, 4) >= likely:
            return None
        taken = self.w.memo
        opcode = self.c.pick(self.profile.puts)
        if opcode == "MEMOIZE" and len(taken) not in taken:  # (MEMOIZE numbers by the memo's size)
            self.w.memoize()
            return len(taken) - 1
        if opcode == "MEMOIZE":
            opcode = "BINPUT"
        where = self.c.weighted([(80, "next"), (0 if fresh or not taken else 2, "again"), (1, "far")])
        if where == "again":
            index = self.c.pick(sorted(taken))
        elif where == "far" and not fresh:
            index = 300 + self.c.below(5000)
        else:
            index = len(taken)
        self.features.add({"again": "memo entry replaced", "far": "far memo index"}.get(where, "memo"))
        if index in taken and where != "again":
            index = max(taken) + 1
        if opcode == "BINPUT" and index > 255:
            opcode = "LONG_BINPUT"
        self.w.put(index, opcode)
        return index

    def get(self, index: int) -> Node:
        opcode = self.c.pick(self.profile.gets)
        if opcode == "BINGET" and index > 255:
            opcode = "LONG_BINGET"
        return self.w.get(index, opcode)

    def fetchable(self, hashable: bool) -> List[int]:
        return [i for i, node in self.w.memo.items() if node.hashable or not hashable]

    def fetch(self, indices: List[int]) -> Node:
        """A memo entry again: an open container (it then holds itself), one waiting to be filled, the class
        pickle's, or any."""
        groups = [(3, indices)]
        for weight, nodes in ((3, self.open), (3, self.pending)):
            near = [i for i in indices if self.w.memo[i] in nodes]
            groups.append((weight if near else 0, near))
        ours = [i for i in indices if i in self.class_memo]
        groups.append((2 if ours else 0, ours))
        index = self.c.pick(self.c.weighted(groups))
        if self.w.memo[index] in self.open:
            self.features.add("holds itself")
        return self.get(index)

    def defer(self, node: Node, hint: Optional[str] = None) -> None:
        """node (empty, on top) goes into the memo, to be filled later through it."""
        if not node.memo:
            self.maybe_put(certain=True, fresh=True)
        self.pending.append(node)
        self.features.add("filled late")
        if hint is not None:
            self.hints[id(node)] = hint
            self.kept.append(node)

    # -- containers ---------------------------------------------------------------------------------------------

    def marked(self) -> bool:
        """Whether this container is written protocol 0's way, MARK ... LIST (or DICT), not EMPTY_LIST then
        its items."""
        return self.profile.containers == "mark" or (self.profile.containers == "both" and self.c.chance(3))

    def empty(self, kind: str) -> Node:
        """An empty list or dict, written the profile's way."""
        if self.marked():
            self.w.mark()
            return self.w.list_() if kind == LIST else self.w.dict_()
        return self.w.empty_list() if kind == LIST else self.w.empty_dict()

    def list_of(self, makers: Sequence[Maker]) -> Node:
        """A list of what the makers write (one value each), maybe put in the memo."""
        if self.marked():
            self.w.mark()
            for make in makers:
                make()
            return self.put_after(self.w.list_())
        node = self.put_after(self.w.empty_list())
        if makers:
            self.into(node, makers)
        return node

    def into(self, node: Node, makers: Sequence[Maker], keyed: bool = False) -> None:
        """What the makers write into node (on top): MARK and APPENDS, SETITEMS or ADDITEMS, or one APPEND
        (SETITEM) each.  For a dict (or an object given items: keyed) each maker writes a key and its value."""
        many = node.kind == SET or (self.profile.has("fill_many") and (len(makers) > 1 or self.c.chance(3)))
        kind = DICT if node.kind == DICT or keyed else node.kind
        if many:
            self.w.mark()
        for make in makers:
            make()
            if not many:
                self.w.setitem() if kind == DICT else self.w.append()
        if many:
            {DICT: self.w.setitems, SET: self.w.additems}.get(kind, self.w.appends)()

    def list_value(self, depth: int) -> Node:
        if self.marked():
            return self.list_of([lambda: self.value(depth + 1)] * self.c.below(4))
        return self.filled(self.w.empty_list(), depth)

    def dict_value(self, depth: int, attributes: bool = False) -> Node:
        """A dict: of random keys, or of a marker's keys (which its values may fit only once filled)."""
        shape: Optional[Sequence[str]] = None
        if self.c.chance(3):
            shape = self.c.pick(MARKER_SHAPES + [(k,) for k in MARKER_KEYS])
        if self.marked():
            self.w.mark()
            for key in shape or [None] * self.c.below(4):
                self.pair(depth, key, attributes)
            return self.put_after(self.w.dict_())
        return self.filled(self.w.empty_dict(), depth, shape, attributes)

    def filled(self, node: Node, depth: int, shape: Optional[Sequence[str]] = None, attributes: bool = False) -> Node:
        """node (empty, on top), maybe put in the memo, then filled now in batches or left to be filled later."""
        self.maybe_put()
        if node.memo and self.c.chance(4):
            self.defer(node)
            return node
        if shape:
            self.fill(node, depth, keys=list(shape), attributes=attributes)
        for _ in range(self.c.below(3)):
            self.fill(node, depth, attributes=attributes)
        return node

    def fill(self, node: Node, depth: int, late_only: bool = False, keys: Optional[List[str]] = None,
             attributes: bool = False) -> None:
        """One batch into node (on top): items, key-value pairs, set members, or an object's state; with
        late_only, the values are other containers filled late."""
        def make(hashable: bool = False, hint: Optional[str] = None) -> Node:
            if late_only:
                return self.late_fill(depth + 1, hashable)
            return self.value(depth + 1, hashable, hint)

        self.open.append(node)
        try:
            count = len(keys) if keys else self.c.weighted([(2, 1), (1, self.c.integer(2, 4))])
            if node.kind == OBJECT:
                self.fill_object(node, depth, make)
            elif node.kind == SET:
                self.into(node, [lambda: make(hashable=True)] * count)
            elif node.kind == LIST and self.hints.get(id(node)) == "names" and self.c.chance(4) is False:
                self.into(node, [lambda: self.text(), lambda: self.text()])
            elif node.kind == LIST:
                self.into(node, [make] * count)
            else:
                keys = list(keys or [None] * count)
                self.into(node, [lambda key=key: self.pair(depth, key, attributes, make) for key in keys])
        finally:
            self.open.remove(node)

    def pair(self, depth: int, key: Optional[str], attributes: bool, make: Optional[Callable] = None) -> None:
        """A key (the one given, an attribute name, a text (often a marker key), another hashable value),
        then its value, fitting the key when it is a marker's."""
        if key is not None:
            self.put_after(self.text_of(key))
        elif attributes and self.c.chance(2) is False:
            self.put_after(self.text_of(self.c.pick(ATTRIBUTE_NAMES + MARKER_KEYS)))
        elif self.c.chance(6):
            self.value(depth + 1, hashable=True)
        else:
            self.text(key=True)
        name = self.w.top().text
        hint = "names" if name == "@cls" else name if name in FITTING_TEXTS or name in LIST_MARKERS \
            or name in DICT_MARKERS else None
        if make is None:
            self.value(depth + 1, hint=hint)
        else:
            make(hint=hint)

    def fill_object(self, node: Node, depth: int, make: Callable) -> None:
        """An object's BUILD (its state; a (dict, slots) pair now and then), or its SETITEMS or APPENDS (dict
        and list subclasses)."""
        how = self.c.weighted([(6, "build"), (1, "setitems"), (1, "appends")])
        if how == "build":
            if self.c.chance(4):
                self.tuple_of([self.w.none if self.c.chance(2) else make, make])
            else:
                make()
            self.w.build()
        elif how == "setitems":
            self.into(node, [lambda: self.pair(depth, None, True, make)], keyed=True)
        else:
            self.into(node, [make])

    def fillable(self, hashable: bool) -> List[int]:
        return [i for i, node in self.w.memo.items()
                if (node.kind in (LIST, DICT, OBJECT) or node.kind == SET and self.profile.has("sets"))
                and (node.hashable or not hashable) and node not in self.guarded]

    def late_fill(self, depth: int, hashable: bool = False) -> Node:
        """A container from the memo, one more batch put into it: the value is the container itself."""
        indices = self.fillable(hashable)
        if not indices:
            return self.atom()
        waiting = [i for i in indices if self.w.memo[i] in self.pending]
        index = self.c.pick(waiting) if waiting and self.c.chance(4) is False else self.c.pick(indices)
        node = self.get(index)
        if node in self.pending and self.c.chance(3) is False:
            self.pending.remove(node)
        self.fill(node, depth)
        return node

    def tuple_of(self, makers: Sequence[Maker]) -> Node:
        """A tuple of what the makers write: TUPLE1-3 where the profile has them, else MARK ... TUPLE."""
        if 1 <= len(makers) <= 3 and self.profile.has("tuple_n") and self.c.chance(4) is False:
            for make in makers:
                make()
            node = self.w.tuple_(len(makers))
        else:
            self.w.mark()
            for make in makers:
                make()
            node = self.w.tuple_()
        return self.put_after(node)

    def empty_tuple(self) -> Node:
        """EMPTY_TUPLE, or MARK and TUPLE where the profile writes containers protocol 0's way."""
        if self.profile.containers == "mark":
            self.w.mark()
            return self.w.tuple_()
        return self.w.empty_tuple()

    def tuple_value(self, depth: int, count: Optional[int] = None, hashable: bool = False) -> Node:
        """A tuple of count (or a few) values; EMPTY_TUPLE for none, now and then."""
        if count is None:
            count = self.c.below(4)
        if count == 0 and self.c.chance(2) is False:
            return self.put_after(self.empty_tuple())
        return self.tuple_of([lambda: self.value(depth + 1, hashable)] * count)

    def set_value(self, depth: int) -> Node:
        """A set or frozenset: EMPTY_SET and ADDITEMS or FROZENSET (protocol 4), or builtins.set of a list."""
        if self.profile.has("sets") and self.c.chance(3) is False:
            if self.c.chance(2):
                self.w.mark()
                for _ in range(self.c.below(3)):
                    self.value(depth + 1, hashable=True)
                return self.put_after(self.w.frozenset_())
            return self.filled(self.w.empty_set(), depth)
        return self.known_set(depth)

    def repeats(self) -> Node:
        """A list of one memo entry fetched many times (hundreds in long records: a class with a long name)."""
        node = self.put_after(self.empty(LIST))
        if not self.w.memo or self.c.chance(4):
            self.into(node, [self.class_value])
        if not self.w.memo:
            return node
        classes = [i for i, n in self.w.memo.items() if n.kind == CLASS]
        index = self.c.pick(classes if classes and self.c.chance(2) is False else sorted(self.w.memo))
        count = self.c.integer(100, 1000) if self.long and self.c.chance(2) else self.c.integer(2, 8)
        self.features.add("fetched 100 times" if count >= 100 else "fetched again")
        self.into(node, [lambda: self.get(index)] * count)
        return node

    def chain(self) -> Node:
        """Containers each holding the next (or the one before) twice: 2**n values from a few bytes.  Each
        made empty (a first item in it now and then: a marker's key), then filled at once with two fetches of
        the one before, or later, after it was fetched, with two fetches of the next."""
        self.features.add("chain")
        kind = self.c.pick([LIST, DICT])
        count = self.c.integer(12, 26) if self.long and self.c.chance(2) else self.c.integer(2, 6)
        keys = [self.c.pick(PLAIN_TEXTS[:5] + MARKER_KEYS) for _ in range(3)]
        if keys[1] == keys[2]:
            keys[2] += "2"
        outer = self.put_after(self.empty(LIST))
        indices: List[int] = []
        now = self.c.chance(2)

        def link(i: int) -> None:
            node = self.empty(kind)
            indices.append(self.maybe_put(certain=True, fresh=True))
            if self.c.chance(2) is False:
                first: List[Maker] = [self.atom]
                if kind == DICT:
                    first = [lambda: (self.text_of(keys[0]), self.atom())]
                self.into(node, first)
            if now and i:
                self.double(node, indices[i - 1], keys)

        self.into(outer, [lambda i=i: link(i) for i in range(count)])
        if not now:
            order = range(count - 1) if self.c.chance(2) is False else range(count - 2, -1, -1)
            self.into(outer, [lambda i=i: self.double(self.get(indices[i]), indices[i + 1], keys) for i in order])
        return outer

    def double(self, node: Node, index: int, keys: List[str]) -> Node:
        """Two fetches of the memo entry at index into node (on top)."""
        if node.kind == LIST:
            self.into(node, [lambda: self.get(index)] * 2)
        else:
            self.into(node, [lambda key=key: (self.text_of(key), self.get(index)) for key in keys[1:]])
        return node

    # -- classes and objects ---------------------------------------------------------------------------------

    def class_value(self, app: bool = True, names: Optional[Tuple[str, str]] = None) -> Node:
        """A class: a memo entry of one again (often), or GLOBAL (STACK_GLOBAL in protocol 4), then put."""
        same = [i for i, n in self.w.memo.items() if n.kind == CLASS and (n.app_class or not app)
                and (names is None or n.text == "\n".join(names))]
        if same and self.c.chance(3) is False:
            return self.get(self.c.pick(same))
        module, name = names or self.class_names()
        if self.profile.has("stack_global") and self.c.chance(3):
            self.put_after(self.text_of(module))
            self.put_after(self.text_of(name))
            node = self.w.stack_global(app_class=app)
        else:
            node = self.w.global_(module, name, app_class=app)
        return self.put_after(node)

    def instance(self, depth: int) -> Node:
        """An object of an application class, made by one of the opcodes that make objects, then given its
        state (or its items) now, or left in the memo to be given them later."""
        forms = [(6, "newobj" if self.profile.has("newobj") else "reduce"), (3, "reduce")]
        forms += [(1, form) for form in ("inst", "obj", "newobj_ex", "reconstructor") if self.profile.has(form)]
        form = self.c.weighted(forms)
        arguments = [lambda: self.value(depth + 1)] * self.c.weighted([(3, 0), (1, self.c.integer(1, 3))])
        if form == "inst":
            module, name = self.class_names()
            if not (module + name).isascii():  # (pickle reads INST's lines as ASCII)
                module, name = APP_CLASSES[0]
            self.w.mark()
            for make in arguments:
                make()
            node = self.w.inst(module, name)
        elif form == "obj":
            self.w.mark()
            self.class_value()
            for make in arguments:
                make()
            node = self.w.obj()
        elif form == "reconstructor":
            self.class_value(app=False, names=("copy_reg", "_reconstructor"))
            self.tuple_of([self.class_value, lambda: self.class_value(app=False, names=("__builtin__", "object")),
                           self.w.none])
            node = self.w.reduce(Node(OBJECT, True))
        else:
            self.class_value()
            self.tuple_value(depth, len(arguments))
            if form == "newobj_ex":
                self.kwargs(depth)
                node = self.w.newobj_ex()
            else:
                node = self.w.newobj() if form == "newobj" else self.w.reduce()
        self.maybe_put()
        if node.memo and self.c.chance(4):
            self.defer(node)
        elif self.c.chance(4) is False:
            for _ in range(2 if self.c.chance(8) else 1):
                self.fill(node, depth)
        return node

    def kwargs(self, depth: int) -> Node:
        node = self.w.empty_dict()
        for _ in range(self.c.below(2)):
            self.into(node, [lambda: (self.text(key=True), self.value(depth + 1))])
        return node

    def btree_object(self, depth: int) -> Node:
        """A BTree, bucket or set inside the state: its class, NEWOBJ, then BUILD of a BTree state."""
        module, name = self.c.pick(BTREE_CLASSES[:5])
        self.class_value(names=(module, name))
        self.empty_tuple()
        node = self.w.newobj() if self.profile.has("newobj") else self.w.reduce()
        self.maybe_put()
        self.btree_state(depth + 1, *btree_kind(module, name))
        self.w.build()
        return node

    def btree_state(self, depth: int, is_tree: bool, is_map: bool) -> Node:
        """A BTree-family state (docs/format.md, "BTrees"): a bucket's or set's items (and next), a small tree's
        one bucket, a big tree's children and first bucket, None, now and then any value."""
        form = self.c.weighted([(1, "none"), (4, "items"), (2, "items+next"), (2 if is_tree else 0, "small tree"),
                                (2 if is_tree else 0, "children"), (1, "odd")])
        items: Maker = lambda: self.items_tuple(depth, is_map)  # noqa: E731
        if form == "none":
            return self.w.none()
        if form == "odd":
            return self.value(depth)
        if form == "children":
            count = self.c.integer(1, 2) * 2 + 1
            children = [(lambda i=i: self.reference(depth + 1) if i % 2 == 0 else self.value(depth + 1, True))
                        for i in range(count)]
            return self.tuple_of([lambda: self.tuple_of(children), lambda: self.reference(depth + 1)])
        if form == "items+next":
            return self.tuple_of([items, lambda: self.reference(depth + 1) if self.c.chance(4) is False
                                  else self.value(depth + 1)])
        if form == "small tree":
            return self.tuple_of([lambda: self.tuple_of([lambda: self.tuple_of([items])])])
        return self.tuple_of([items])

    def items_tuple(self, depth: int, is_map: bool) -> Node:
        count = self.c.below(4) * (2 if is_map else 1) + (1 if self.c.chance(8) else 0)
        self.w.mark()
        for _ in range(count):
            self.value(depth + 1)
        return self.put_after(self.w.tuple_())

    def reference(self, depth: int) -> Node:
        """A persistent reference: ZODB's (oid, class) (TUPLE2, BINPUT, BINPERSID), (oid, None), a bare oid,
        a weak or cross-database one, a protocol 0 text id, or any value as the id."""
        if self.profile.has("persid") and (not self.profile.has("binpersid") or self.c.chance(2)):
            return self.w.persid(self.c.pick(["0000000000000001", "00000001", "abc", "", "ff"]))
        form = self.c.weighted([(6, "zodb"), (2, "none"), (2, "oid"), (1, "weak"), (1, "cross"), (1, "value")])
        if form == "value":
            self.value(depth + 1)
        elif form == "oid":
            self.oid()
        elif form in ("weak", "cross"):
            inner = [self.oid] if form == "weak" else [lambda: self.text_of("db"), self.oid, self.class_value]
            self.list_of([lambda: self.text_of("w" if form == "weak" else "m"), lambda: self.tuple_of(inner)])
        else:
            self.tuple_of([self.oid, self.class_value if form == "zodb" else self.w.none])
        return self.w.binpersid()

    def oid(self) -> Node:
        return self.byte_string(self.c.pick([bytes(7) + b"\x01", bytes(7) + b"\x02", b"\xff" * 8, bytes(8),
                                             bytes(6) + b"\x01"]))

    # -- known types ------------------------------------------------------------------------------------------

    def known(self, depth: int, hashable: bool) -> Node:
        """A value of one of the few real globals (datetimes, Decimal, UUID, sets...), made by the call pickle
        writes, with arguments it takes (shared ones too)."""
        options = [(3, self.known_datetime), (1, self.known_date), (1, self.known_timedelta),
                   (1, self.known_decimal), (1, self.known_uuid), (0 if hashable else 1, self.known_bytes),
                   (0 if hashable else 2, lambda: self.known_set(depth))]
        return self.c.weighted(options)()

    def call(self, module: str, name: str, arguments: Sequence[Maker], hashable: bool = True) -> Node:
        """REDUCE of the real global module.name on the tuple of what the arguments write."""
        self.class_value(app=False, names=(module, name))
        self.tuple_of(arguments)
        return self.put_after(self.w.reduce(Node(KNOWN, hashable)))

    def known_datetime(self) -> Node:
        moment = datetime.datetime(self.c.integer(1, 9999), self.c.integer(1, 12), self.c.integer(1, 28),
                                   self.c.integer(0, 23), self.c.integer(0, 59), self.c.integer(0, 59),
                                   self.c.pick([0, 1, 999999, 500000]), fold=int(self.c.chance(8)))
        state = moment.__reduce_ex__(4)[1][0]
        zone = [self.known_timezone] if self.c.chance(2) else []
        return self.call("datetime", "datetime", [lambda: self.byte_string(state)] + zone)

    def known_timezone(self) -> Node:
        minutes = self.c.pick([0, 60, -480, 330, 1439, -1439])
        days, seconds = divmod(minutes * 60, 86400)
        offset = lambda: self.call("datetime", "timedelta", [  # noqa: E731
            lambda: self.small_int(days), lambda: self.small_int(seconds), lambda: self.small_int(0)])
        name = [lambda: self.text_of("CET")] if self.c.chance(4) else []
        return self.call("datetime", "timezone", [offset] + name)

    def small_int(self, value: int) -> Node:
        """An int of 32 bits in a spelling the profile has."""
        binary = "bin" in self.profile.ints or "bin4" in self.profile.ints
        if "text" in self.profile.ints and (not binary or self.c.chance(2)):
            return self.w.int_text(str(value))
        return self.w.binint(value)

    def known_date(self) -> Node:
        state = datetime.date(self.c.integer(1, 9999), self.c.integer(1, 12), self.c.integer(1, 28)).__reduce__()[1][0]
        return self.call("datetime", "date", [lambda: self.byte_string(state)])

    def known_timedelta(self) -> Node:
        parts = (self.c.integer(-999, 999), self.c.integer(0, 86399), self.c.integer(0, 999999))
        return self.call("datetime", "timedelta", [lambda p=p: self.small_int(p) for p in parts])

    def known_decimal(self) -> Node:
        text = self.c.pick(["1.5", "-0", "NaN", "1E+7", "123.4500", "Infinity", "-1E-7"])
        return self.call("decimal", "Decimal", [lambda: self.text_of(text)])

    def known_bytes(self) -> Node:
        if self.profile.has("bytearray8") and self.c.chance(2):
            return self.put_after(self.w.bytearray8(self.c.pick(BYTE_STRINGS)))
        return self.call("builtins", "bytearray", [self.byte_string], hashable=False)

    def known_uuid(self) -> Node:
        """uuid.UUID as pickle writes it: NEWOBJ, then BUILD of {"int": n}."""
        if not self.profile.has("newobj"):
            return self.known_decimal()
        self.class_value(app=False, names=("uuid", "UUID"))
        self.w.empty_tuple()
        node = self.w.newobj(Node(KNOWN, True))
        number = self.c.pick([0, 12345, 2**127, 2**128 - 1])
        state = self.w.empty_dict()
        self.into(state, [lambda: (self.text_of("int"), self.w.long(number) if self.profile.has("long")
                                   else self.small_int(number % 2**31))])
        self.w.build(known=True)
        return self.put_after(node)

    def known_set(self, depth: int) -> Node:
        """builtins.set (or frozenset) of a list: a new one, or one from the memo whose items can be hashed
        now (it may be filled later: the set has what the list held at the call)."""
        name = self.c.pick(["set", "frozenset"])
        self.features.add("set of a list")
        later: List[Node] = []

        def argument() -> Node:
            lists = [i for i, n in self.w.memo.items() if n.kind == LIST and all(x.hashable for x in n.items)]
            if lists and self.c.chance(2) is False:
                node = self.get(self.c.pick(lists))
            else:
                node = self.put_after(self.empty(LIST))
                if node.memo and self.c.chance(3) is False:
                    later.append(node)
            self.guarded.append(node)
            if not later and self.c.chance(2) is False:
                self.into(node, [lambda: self.value(depth + 1, hashable=True)] * self.c.integer(1, 3))
            return node
        try:
            return self.call("builtins", name, [argument], hashable=name == "frozenset")
        finally:
            del self.guarded[-1:]
            for node in later:
                self.pending.append(node)


def generate_record(choices: Choices) -> bytes:
    """A record written from the choices."""
    return RecordGenerator(choices).record()


def generate_described(choices: Choices) -> Tuple[bytes, frozenset]:
    """A record written from the choices, and the names of what it holds (its profile, "filled late",
    "holds itself", "chain"...)."""
    generator = RecordGenerator(choices)
    return generator.record(), frozenset(generator.features)


def disassembly(data: bytes) -> str:
    """A listing of the opcodes of a record's pickles (pickletools' genops, one line each), for reading."""
    lines = []
    pos = 0
    try:
        while pos < len(data):
            for op, arg, at in pickletools.genops(data[pos:]):
                shown = repr(arg) if arg is not None else ""
                lines.append(f"{pos + at:6}: {op.name} {shown[:120]}")
                if op.name == "STOP":
                    pos += at + 1
                    break
    except Exception as exc:  # noqa: BLE001 - a listing, for reading: say where it stopped
        lines.append(f"(pickletools stopped after offset {pos}: {exc})")
    return "\n".join(lines)
