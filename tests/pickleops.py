"""A stack-aware pickle opcode writer: one method per opcode, and a model of what the unpickler will hold.

``Writer`` writes opcodes into a buffer and keeps, beside it, what pickle's
own unpickler will have when it reads them: the stack, the marks and the
memo, each value as a ``Node`` (its kind, whether it can be a dict key,
whether the pickle can still fill it).  Every method checks its opcode
against that model (an ``AssertionError`` for a stream pickle would refuse),
so a generator built on it (tests/picklegen.py) writes only pickles that
pickle's unpickler accepts, however it combines the opcodes.  The memo
carries over from one pickle to the next, as in a ZODB record (class pickle,
then state pickle, one memo).
"""

from __future__ import annotations

import codecs
import struct
from typing import Dict, List, Optional, Sequence

# Kinds of Node.  Containers the pickle can still change: LIST (APPEND), DICT (SETITEM), SET (ADDITEMS),
# OBJECT (an application class's instance: BUILD, SETITEM, APPEND all go to its stand-in).
ATOM, TEXT, BYTES, TUPLE, LIST, DICT, SET, FROZENSET, CLASS, OBJECT, KNOWN, REF = (
    "atom", "text", "bytes", "tuple", "list", "dict", "set", "frozenset", "class", "object", "known", "ref")
FILLABLE = (LIST, DICT, SET, OBJECT)


class Node:
    """A value the unpickler will have made, as much of it as the writer needs to know."""

    __slots__ = ("kind", "hashable", "items", "text", "app_class", "memo")

    def __init__(self, kind: str, hashable: bool, items: Sequence["Node"] = (), text: Optional[str] = None,
                 app_class: bool = False) -> None:
        self.kind = kind
        self.hashable = hashable    # can be a dict key or a set item (fixed once made)
        self.items = list(items)    # a tuple's items; a list's, dict's or set's as they were filled
        self.text = text            # a TEXT's str; a CLASS's module and name, a newline between
        self.app_class = app_class  # a CLASS pickle's loader makes a stand-in for: callable with any arguments
        self.memo: List[int] = []   # where it was put

    def __repr__(self) -> str:
        return f"<{self.kind}{' ' + repr(self.text) if self.text is not None else ''}>"


def atom() -> Node:
    return Node(ATOM, True)


class Writer:
    """Opcodes into a buffer, with the unpickler's stack, marks and memo alongside."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.stack: List[Node] = []
        self.marks: List[int] = []
        self.memo: Dict[int, Node] = {}
        self._frame_at: Optional[int] = None

    # -- the model ---------------------------------------------------------------------------------------------

    def section(self) -> List[Node]:
        """What is above the last MARK: what DUP, SETITEM... may use."""
        return self.stack[self.marks[-1] if self.marks else 0:]

    def top(self) -> Optional[Node]:
        section = self.section()
        return section[-1] if section else None

    def _push(self, node: Node) -> Node:
        self.stack.append(node)
        return node

    def _pop(self, count: int) -> List[Node]:
        section = self.section()
        assert len(section) >= count, f"stack underflow: {count} values wanted, {len(section)} there"
        taken = self.stack[len(self.stack) - count:] if count else []
        del self.stack[len(self.stack) - count:]
        return taken

    def _pop_mark(self) -> List[Node]:
        assert self.marks, "no MARK"
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def _op(self, raw: bytes) -> None:
        self.out += raw

    def data(self) -> bytes:
        assert self._frame_at is None, "a FRAME left open"
        return bytes(self.out)

    # -- framing and the end of a pickle ---------------------------------------------------------------------

    def proto(self, protocol: int) -> None:
        self._op(b"\x80" + bytes([protocol]))

    def frame(self) -> None:
        """FRAME: its length is written by stop(), which ends it (pickle checks that frames hold whole opcodes)."""
        self._op(b"\x95" + bytes(8))
        self._frame_at = len(self.out)

    def stop(self) -> Node:
        """STOP: the top of the stack is the pickle's value; the next pickle starts with an empty stack."""
        value = self.top()
        assert value is not None, "STOP with nothing above the last MARK"
        self._op(b".")
        if self._frame_at is not None:
            self.out[self._frame_at - 8:self._frame_at] = struct.pack("<Q", len(self.out) - self._frame_at)
            self._frame_at = None
        self.stack, self.marks = [], []
        return value

    # -- scalars -----------------------------------------------------------------------------------------------

    def none(self) -> Node:
        self._op(b"N")
        return self._push(atom())

    def boolean(self, value: bool, text: bool = False) -> Node:
        """NEWTRUE/NEWFALSE, or protocol 0's INT 01/00."""
        self._op((b"I01\n" if value else b"I00\n") if text else (b"\x88" if value else b"\x89"))
        return self._push(atom())

    def binint(self, value: int) -> Node:
        """BININT1, BININT2 or BININT: the shortest that holds value (unsigned 8 and 16 bits, signed 32)."""
        if 0 <= value < 256:
            self._op(b"K" + bytes([value]))
        elif 0 <= value < 65536:
            self._op(b"M" + struct.pack("<H", value))
        else:
            self._op(b"J" + struct.pack("<i", value))
        return self._push(atom())

    def binint4(self, value: int) -> Node:
        """BININT, also for values a shorter opcode holds."""
        self._op(b"J" + struct.pack("<i", value))
        return self._push(atom())

    def long(self, value: int, four: bool = False) -> Node:
        """LONG1 or LONG4: two's complement, little-endian, as pickle writes it (no bytes for 0)."""
        raw = _twos_complement(value)
        self._op((b"\x8b" + struct.pack("<i", len(raw))) if four else (b"\x8a" + bytes([len(raw)])))
        self._op(raw)
        return self._push(atom())

    def int_text(self, spelling: str) -> Node:
        """INT with a text int(text, 0) and int(text) read alike, as pickle before and since CPython 3.14 reads
        INT (not 00 or 01: those are booleans)."""
        assert spelling not in ("00", "01") and "\n" not in spelling
        assert int(spelling, 0) == int(spelling)
        self._op(b"I" + spelling.encode("ascii") + b"\n")
        return self._push(atom())

    def long_text(self, value: int) -> Node:
        self._op(b"L" + str(value).encode("ascii") + b"L\n")
        return self._push(atom())

    def binfloat(self, value: float) -> Node:
        self._op(b"G" + struct.pack(">d", value))
        return self._push(atom())

    def float_text(self, value: float) -> Node:
        self._op(b"F" + repr(value).encode("ascii") + b"\n")
        return self._push(atom())

    # -- texts and bytes ---------------------------------------------------------------------------------------

    def text(self, value: str, opcode: str = "BINUNICODE", escaped: Sequence[int] = ()) -> Node:
        """value with one of the opcodes that make a str; for UNICODE the characters at the escaped
        positions are written as \\uXXXX (or \\UXXXXXXXX) escapes, beside those protocol 0 needs."""
        if opcode == "UNICODE":
            self._op(b"V" + unicode_line(value, escaped) + b"\n")
        else:
            raw = value.encode("utf-8", "surrogatepass")
            head = {"SHORT_BINUNICODE": b"\x8c" + bytes([len(raw)]) if len(raw) < 256 else None,
                    "BINUNICODE": b"X" + struct.pack("<I", len(raw)),
                    "BINUNICODE8": b"\x8d" + struct.pack("<Q", len(raw))}[opcode]
            assert head is not None, "SHORT_BINUNICODE of 256 bytes or more"
            self._op(head + raw)
        return self._push(Node(TEXT, True, text=value))

    def byte_string(self, value: bytes, opcode: str = "SHORT_BINBYTES", octal: Sequence[int] = ()) -> Node:
        """value with one of the opcodes that make bytes (with encoding="bytes", as ZODB reads: Python 2 strs
        too); STRING writes the bytes at the octal positions as \\ooo escapes."""
        n = len(value)
        if opcode == "STRING":
            self._op(b"S'" + string_escapes(value, octal) + b"'\n")
        else:
            head = {"SHORT_BINSTRING": b"U" + bytes([n]) if n < 256 else None,
                    "BINSTRING": b"T" + struct.pack("<i", n),
                    "SHORT_BINBYTES": b"C" + bytes([n]) if n < 256 else None,
                    "BINBYTES": b"B" + struct.pack("<I", n),
                    "BINBYTES8": b"\x8e" + struct.pack("<Q", n)}[opcode]
            assert head is not None, f"{opcode} of 256 bytes or more"
            self._op(head + value)
        return self._push(Node(BYTES, True))

    def bytearray8(self, value: bytes) -> Node:
        self._op(b"\x96" + struct.pack("<Q", len(value)) + value)
        return self._push(Node(KNOWN, False))

    # -- the memo ------------------------------------------------------------------------------------------------

    def put(self, index: int, opcode: str = "BINPUT") -> None:
        """The top into the memo at index: BINPUT (index < 256), LONG_BINPUT, or protocol 0's PUT."""
        node = self.top()
        assert node is not None, "PUT with nothing above the last MARK"
        if opcode == "BINPUT":
            assert index < 256
            self._op(b"q" + bytes([index]))
        elif opcode == "LONG_BINPUT":
            self._op(b"r" + struct.pack("<I", index))
        else:
            self._op(b"p" + str(index).encode("ascii") + b"\n")
        self._remember(index, node)

    def memoize(self) -> None:
        """MEMOIZE: the top into the memo at the index that is the memo's size (as pickle numbers it)."""
        node = self.top()
        assert node is not None, "MEMOIZE with nothing above the last MARK"
        self._op(b"\x94")
        self._remember(len(self.memo), node)

    def _remember(self, index: int, node: Node) -> None:
        old = self.memo.get(index)
        if old is not None:
            old.memo.remove(index)
        self.memo[index] = node
        node.memo.append(index)

    def get(self, index: int, opcode: str = "BINGET") -> Node:
        """The memo entry at index pushed again: BINGET (index < 256), LONG_BINGET, or protocol 0's GET."""
        node = self.memo[index]
        if opcode == "BINGET":
            assert index < 256
            self._op(b"h" + bytes([index]))
        elif opcode == "LONG_BINGET":
            self._op(b"j" + struct.pack("<I", index))
        else:
            self._op(b"g" + str(index).encode("ascii") + b"\n")
        return self._push(node)

    def dup(self) -> Node:
        node = self.top()
        assert node is not None, "DUP with nothing above the last MARK"
        self._op(b"2")
        return self._push(node)

    def pop(self) -> None:
        """POP: the top, or (nothing above it) the last MARK, as pickle's POP does."""
        if self.section():
            self._pop(1)
        else:
            self._pop_mark()
        self._op(b"0")

    def pop_mark(self) -> None:
        self._pop_mark()
        self._op(b"1")

    # -- containers ----------------------------------------------------------------------------------------------

    def mark(self) -> None:
        self._op(b"(")
        self.marks.append(len(self.stack))

    def empty_list(self) -> Node:
        self._op(b"]")
        return self._push(Node(LIST, False))

    def empty_dict(self) -> Node:
        self._op(b"}")
        return self._push(Node(DICT, False))

    def empty_tuple(self) -> Node:
        self._op(b")")
        return self._push(Node(TUPLE, True))

    def empty_set(self) -> Node:
        self._op(b"\x8f")
        return self._push(Node(SET, False))

    def list_(self) -> Node:
        """LIST: the values since the MARK."""
        items = self._pop_mark()
        self._op(b"l")
        return self._push(Node(LIST, False, items))

    def dict_(self) -> Node:
        """DICT: the key-value pairs since the MARK (protocol 0)."""
        items = self._pop_mark()
        assert len(items) % 2 == 0 and all(k.hashable for k in items[::2]), "DICT of an odd or unhashable key"
        self._op(b"d")
        return self._push(Node(DICT, False, items))

    def tuple_(self, count: Optional[int] = None) -> Node:
        """TUPLE (the values since the MARK), or TUPLE1/2/3 of the top count values."""
        if count is None:
            items = self._pop_mark()
            self._op(b"t")
        else:
            assert 1 <= count <= 3
            items = self._pop(count)
            self._op(bytes([0x84 + count]))
        return self._push(Node(TUPLE, all(i.hashable for i in items), items))

    def frozenset_(self) -> Node:
        items = self._pop_mark()
        assert all(i.hashable for i in items), "FROZENSET of an unhashable value"
        self._op(b"\x91")
        return self._push(Node(FROZENSET, True, items))

    def append(self) -> Node:
        """APPEND: the top into the list or object below it."""
        item, = self._pop(1)
        target = self.top()
        assert target is not None and target.kind in (LIST, OBJECT), f"APPEND to {target}"
        target.items.append(item)
        self._op(b"a")
        return target

    def appends(self) -> Node:
        items = self._pop_mark()
        target = self.top()
        assert target is not None and target.kind in (LIST, OBJECT), f"APPENDS to {target}"
        target.items += items
        self._op(b"e")
        return target

    def setitem(self) -> Node:
        """SETITEM: the top two (key, value) into the dict or object below them."""
        items = self._pop(2)
        return self._set(items, b"s")

    def setitems(self) -> Node:
        return self._set(self._pop_mark(), b"u")

    def _set(self, items: List[Node], opcode: bytes) -> Node:
        target = self.top()
        assert target is not None and target.kind in (DICT, OBJECT), f"SETITEM(S) on {target}"
        assert all(k.hashable for k in items[::2]), "an unhashable key"
        target.items += items
        self._op(opcode)
        return target

    def additems(self) -> Node:
        items = self._pop_mark()
        target = self.top()
        assert target is not None and target.kind == SET, f"ADDITEMS to {target}"
        assert all(i.hashable for i in items), "ADDITEMS of an unhashable value"
        target.items += items
        self._op(b"\x90")
        return target

    # -- classes, objects, references ----------------------------------------------------------------------------

    def global_(self, module: str, name: str, app_class: bool = True) -> Node:
        """GLOBAL: module and name lines (UTF-8, no newline).  app_class: a class the loader stands in for,
        which takes any arguments; otherwise one of the few real globals, whose arguments the caller makes
        valid.  The node's text is "module\\nname"."""
        assert "\n" not in module + name
        self._op(b"c" + module.encode("utf-8") + b"\n" + name.encode("utf-8") + b"\n")
        return self._push(Node(CLASS, True, text=f"{module}\n{name}", app_class=app_class))

    def stack_global(self, app_class: bool = True) -> Node:
        module, name = self._pop(2)
        assert module.kind == TEXT and name.kind == TEXT, "STACK_GLOBAL of non-texts"
        self._op(b"\x93")
        return self._push(Node(CLASS, True, text=f"{module.text}\n{name.text}", app_class=app_class))

    def reduce(self, result: Optional[Node] = None) -> Node:
        """REDUCE: the callable below the top called with the top (a tuple).  result: what the call makes,
        when the caller knows (a real global's value); else a stand-in's object."""
        callee, args = self._pop(2)
        assert args.kind == TUPLE, "REDUCE arguments not a tuple"
        assert result is not None or callee.app_class or callee.kind == OBJECT, f"REDUCE of {callee}"
        self._op(b"R")
        return self._push(result or Node(OBJECT, True))

    def newobj(self, result: Optional[Node] = None) -> Node:
        """NEWOBJ: cls.__new__(cls, *args); result as for reduce."""
        cls, args = self._pop(2)
        assert cls.kind == CLASS and (cls.app_class or result is not None) and args.kind == TUPLE, \
            "NEWOBJ of a non-class"
        self._op(b"\x81")
        return self._push(result or Node(OBJECT, True))

    def newobj_ex(self) -> Node:
        cls, args, kwargs = self._pop(3)
        assert cls.kind == CLASS and cls.app_class and args.kind == TUPLE and kwargs.kind == DICT
        assert all(k.kind == TEXT for k in kwargs.items[::2]), "NEWOBJ_EX keyword arguments not named by texts"
        self._op(b"\x92")
        return self._push(Node(OBJECT, True))

    def build(self, known: bool = False) -> Node:
        """BUILD: the top is the state of the object below it (a stand-in: any state, any number of times;
        known: a real global's value, given the state its __setstate__ takes by the caller)."""
        state, = self._pop(1)
        target = self.top()
        assert target is not None and (target.kind == OBJECT or known and target.kind == KNOWN), f"BUILD on {target}"
        self._op(b"b")
        return target

    def inst(self, module: str, name: str) -> Node:
        """INST: a stand-in class called with the values since the MARK (protocol 0)."""
        assert "\n" not in module + name
        self._pop_mark()
        self._op(b"i" + module.encode("utf-8") + b"\n" + name.encode("utf-8") + b"\n")
        return self._push(Node(OBJECT, True))

    def obj(self) -> Node:
        """OBJ: the first value since the MARK (a stand-in class) called with the others (protocol 1)."""
        items = self._pop_mark()
        assert items and items[0].kind == CLASS and items[0].app_class, "OBJ of a non-class"
        self._op(b"o")
        return self._push(Node(OBJECT, True))

    def binpersid(self) -> Node:
        """BINPERSID: the top is a persistent id (the loader makes ("REF", pid) of it)."""
        pid, = self._pop(1)
        self._op(b"Q")
        return self._push(Node(REF, pid.hashable))

    def persid(self, pid: str) -> Node:
        """PERSID: a protocol 0 text id (ASCII, no newline)."""
        assert pid.isascii() and "\n" not in pid
        self._op(b"P" + pid.encode("ascii") + b"\n")
        return self._push(Node(REF, True))


def _twos_complement(value: int) -> bytes:
    """pickle's encode_long: the fewest little-endian two's complement bytes (none for 0)."""
    if value == 0:
        return b""
    n = (value.bit_length() >> 3) + 1
    raw = value.to_bytes(n, "little", signed=True)
    if value < 0 and n > 1 and raw[-1] == 0xFF and (raw[-2] & 0x80):
        raw = raw[:-1]
    return raw


# Characters protocol 0's UNICODE cannot hold as they are (pickle escapes the same ones).
_MUST_ESCAPE = frozenset("\\\x00\n\r\x1a")


def unicode_line(value: str, escaped: Sequence[int] = ()) -> bytes:
    """The argument of UNICODE: raw-unicode-escape, with the characters pickle escapes and those at the
    escaped positions written as \\uXXXX (\\UXXXXXXXX past U+FFFF)."""
    wanted = set(escaped)
    parts = []
    for i, ch in enumerate(value):
        if i in wanted or ch in _MUST_ESCAPE:
            parts.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
        else:
            parts.append(ch)
    return "".join(parts).encode("raw-unicode-escape")


def string_escapes(value: bytes, octal: Sequence[int] = ()) -> bytes:
    """The argument of STRING between its quotes: codecs.escape_encode's escapes (the quote too), the bytes at
    the octal positions written as \\ooo."""
    wanted = set(octal)
    parts = []
    for i in range(len(value)):
        byte = value[i:i + 1]
        parts.append(b"\\%03o" % value[i] if i in wanted else codecs.escape_encode(byte)[0])
    return b"".join(parts)
