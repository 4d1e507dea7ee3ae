"""Decoding rules shared by both decoder twins (``_decode_python``, ``_decode_cython.pyx``).

What is not a hot loop lives here once: the flags the decoders set, objects
under construction and the markers they render to, the checks after the
walk (cycles, depth, escaped keys) and error wording for whole records.
"""

from __future__ import annotations

import binascii
from typing import Any, Optional, Tuple

from . import _decode_known, _known
from ._common import (
    I64_MAX, I64_MIN, MAX_BIGINT_BITS, MAX_DEPTH, STDLIB_JSON_DEPTH, CodecError, b64encode, decimal_to_int,
    float_marker, has_surrogate, int_to_decimal, rebuild_tree,
)
from ._decode_known import NEWOBJ, REDUCE, check_class_names
from ._known import ESCAPED_KEY_PREFIXES, btree_kind, escaped_key

# Flags describing what a decoded value holds, so the PostgreSQL paths only
# walk the tree again when something in it needs rewriting.
F_NUL = 1          # a string with U+0000
F_SURROGATE = 2    # a string with a lone surrogate
F_FLOAT = 4        # NaN, +-inf or -0.0
F_EXP_FLOAT = 8    # a float whose repr uses an exponent
# A text that may be a key looking like "@ns:..." / "@su:..." (docs/format.md, "Escaped keys").  The
# decoders scan the pickle's bytes for them: every text opcode but protocol 0's UNICODE holds the text's own
# UTF-8, so the scan finds every such text; UNICODE's escapes are looked at once decoded (unicode_line).
F_ESCAPED_KEY = 16
F_SHALLOW = 32     # few enough containers for json.dumps's recursion (the Python twin's fast path)

# Both decoders count the opcodes they run that make a container (lists,
# dicts, tuples, sets, objects, references).  Each adds at most three levels
# to a path through the value -- an object, the list of its dict items, one
# item pair -- and at most four levels of JSON ({"@reduce": {"items": [[k,
# v]]}}), plus a few for the record's wrappers.  Values from fewer container
# opcodes than DEEP_CONTAINERS cannot be too deep, so their depth is not
# walked; the Python twin sends values from at most SHALLOW_CONTAINERS through
# json.dumps without measuring them.
DEEP_CONTAINERS = (MAX_DEPTH - 4) // 3
SHALLOW_CONTAINERS = (STDLIB_JSON_DEPTH - 10) // 4


# The expansion budget (docs/format.md, "Expansion budget").  A value the memo
# gives again (GET, DUP) stands once more wherever it is put: a few bytes can
# stand for a tree too big to write or walk (each of k levels holding the one
# below twice is 2**k values).  Each value fetched adds its weight as it is when
# fetched; a pickle whose fetched values weigh more than its budget is refused
# at the fetch that goes past it.  A fetched container that is changed later
# (the decoders note it: ``cyclic``) may have grown since, so such a value is
# weighed once more at the end: what sharing adds to it as a tree, within the
# same budget.
EXPANSION_FLOOR = 1 << 20
EXPANSION_PER_BYTE = 64


def expansion_budget(size: int) -> int:
    """The weight values fetched from the memo may add to the value of size bytes of pickle."""
    return EXPANSION_FLOOR + EXPANSION_PER_BYTE * size


def weight(value: Any, limit: int, kept: Optional[dict] = None) -> int:
    """value's weight as a tree: 1 a value, plus a string's length; a shared part counted each time it
    is reached.  Past limit the walk stops: any number above limit.  An explicit stack: any depth.

    ``kept`` (id -> (container, weight)), when given, holds the weights of containers weighed before and
    unchanged since: each adds its kept weight instead of being walked again, and value's weight is kept
    there once known.  The Python decoder keeps the weights of the values it fetched while none has
    changed since it was fetched (a container reaches another only by being put in it from the stack,
    or by a fetch); a value the memo gives again and again is then walked once, not once a place."""
    if type(value) is str:
        return 1 + len(value)
    if type(value) is not list and type(value) is not dict:
        return 1
    total = 0
    stack = [value]
    while stack:
        node = stack.pop()
        known = kept.get(id(node)) if kept else None
        if known is not None and known[0] is node:
            total += known[1]
            continue
        total += 1
        for x in (node if type(node) is list else _keys_and_values(node)):
            if type(x) is str:
                total += 1 + len(x)
            elif type(x) is list or type(x) is dict:
                stack.append(x)
            else:
                total += 1
        if total > limit:
            return total
    if kept is not None:
        kept[id(value)] = (value, total)
    return total


def _keys_and_values(d: dict) -> Any:
    for k, v in d.items():
        yield k
        yield v


def expansion_error(budget: int, start: int) -> CodecError:
    return CodecError(f"invalid pickle data: values repeated from the memo weigh more than the pickle's "
                      f"expansion budget ({budget}) at offset {start}")


# Values some output writes in a longer form (finish weighs them as written): a float as {"@f": text}, a
# text with U+0000 or a lone surrogate as base64, a key that looks like an escape escaped.  A value's written
# form weighs at most WRITTEN_RATIO times its weight (a float: 1, and {"@f": "-1.7976931348623157e+308"}).
F_WRITTEN_LONGER = F_NUL | F_SURROGATE | F_FLOAT | F_EXP_FLOAT | F_ESCAPED_KEY
WRITTEN_RATIO = 29


def written_weight(x: Any) -> int:
    """The weight of a leaf in its longest written form (pg's float and text markers, an escaped key)."""
    if type(x) is str:
        if "\x00" in x or x.startswith(ESCAPED_KEY_PREFIXES) or (not x.isascii() and has_surrogate(x)):
            size = len(x.encode("utf-8", "surrogatepass"))
            return 6 + 4 * ((size + 2) // 3)  # {"@su": base64} as a value; "@ns:" + base64 as a key
        return 1 + len(x)
    if type(x) is float:
        text = float_marker(x) or (repr(x) if x >= 1e16 or x <= -1e16 else None)
        return 1 if text is None else 5 + len(text)
    return 1


def _added_by_sharing(root: Any, leaf_weight: Any = None) -> int:
    """What shared containers add to root's weight as a tree: its tree weight less its weight with each
    container counted once (leaves weighed by leaf_weight if given; a leaf it weighs heavier than read, a
    text the memo gave again, counted once too).  Each container is weighed once (its tree weight kept by
    id), so the work is that of the graph, not of the tree.  No cycles (finish looked for them first)."""
    if type(root) is not list and type(root) is not dict:
        return 0
    tree: dict = {}  # id -> tree weight of a container weighed
    longer: dict = {}  # id -> a leaf written longer than read, counted once
    once = 0         # the weight with each container counted once
    stack: list = [(root, iter(root if type(root) is list else _keys_and_values(root)), 1)]
    while stack:
        node, parts, total = stack.pop()
        for x in parts:
            if type(x) is list or type(x) is dict:
                done = tree.get(id(x))
                if done is None:
                    stack.append((node, parts, total))
                    stack.append((x, iter(x if type(x) is list else _keys_and_values(x)), 1))
                    break
                total += done
            else:
                plain = 1 + len(x) if type(x) is str else 1
                leaf = leaf_weight(x) if leaf_weight is not None else plain
                total += leaf
                if leaf == plain or id(x) not in longer:
                    once += leaf
                    if leaf != plain:
                        longer[id(x)] = x
        else:
            once += 1
            tree[id(node)] = total
            if stack:
                parent, parts, parent_total = stack.pop()
                stack.append((parent, parts, parent_total + total))
    return tree[id(root)] - once


class Unrepresentable(Exception):
    """The record is valid but JSON cannot carry it: fall back to @pkl."""


class Obj:
    """An object under construction: what CPython would call and set state on."""

    __slots__ = ("value", "kind", "callable", "args", "state", "built", "items", "appends")

    def __init__(self, value: dict, kind: int, callable_: Any, args: Any) -> None:
        self.value = value
        self.kind = kind
        self.callable = callable_
        self.args = args
        self.state = None
        self.built = False
        self.items: Optional[list] = None
        self.appends: Optional[list] = None


def may_become_a_marker(d: dict) -> bool:
    """A plain dict that no marker is yet but may become one without another key: its "@cls" list, which
    the memo can fill later, is what keeps it plain (the only marker test that looks into a container)."""
    return type(d.get("@cls")) is list


def is_watched(watched: Optional[list], d: dict) -> bool:
    """Whether d is a user's dict that may_become_a_marker found (a marker-shaped dict among them is a dict
    filled through the memo after it was filled, not one of the decoder's markers: it still takes items)."""
    return watched is not None and any(w is d for w in watched)


def became_markers(watched: list, dforms: Optional[dict]) -> list:
    """The dicts of watched (may_become_a_marker's) that are marker-shaped now and still plain, each once
    (a dict filled twice is watched twice: made @d pairs twice, it would be pairs of its own @d form)."""
    found: list = []
    seen: set = set()
    for d in watched:
        if id(d) in seen:
            continue
        seen.add(id(d))
        if not (dforms and dforms.get(id(d)) is d) and _known.marker_kind(d, True) is not None:
            found.append(d)
    return found


def is_global(v: Any) -> bool:
    return _known.global_name(v) is not None


# ---------------------------------------------------------------------------
# Objects under construction
# ---------------------------------------------------------------------------

def rebuilt_target(target: Any, obj: Optional[Obj]) -> bool:
    """Whether BUILD on target, which gives an @inst around it, rebuilds an object (a built one, or an @inst
    already): pickle gives that one object the new state wherever else it is too."""
    return obj is not None or (type(target) is dict and len(target) == 1 and "@inst" in target)


def shares_a_rebuilt(rebuilt: list, shared: Optional[dict]) -> bool:
    """Whether an object given a second state (rebuilt_target) was also fetched from the memo or by DUP,
    before or after: those copies would not see the state their @inst holds, so JSON cannot carry the
    pickle (@pkl).  Pickles write one BUILD per object; only hand-made ones get here."""
    return bool(shared) and any(id(t) in shared for t in rebuilt)


# Markers whose copies compare equal to the original (texts, references, classes), and those that compare
# as their parts do: what a set item or dict key may repeat (collapses_by_identity).
_EQUAL_COPY_MARKERS = frozenset(("@b", "@bi", "@dt", "@date", "@time", "@td", "@dec", "@uuid", "@cls", "@ref"))
_PART_WISE_MARKERS = frozenset(("@t", "@set", "@fset"))


def note_hashed(ctx: Any, made: Any) -> None:
    """A set's item list or a dict switched to @d pairs was made: noted with the number of changes to
    shared values so far (collapses_by_identity, changed_after_hashed)."""
    if ctx.hashed is None:
        ctx.hashed = []
    ctx.hashed.append((ctx.changes, made))


def note_change(ctx: Any, target: Any) -> None:
    """A shared value changed, after a set or @d dict was made (ctx.changes counts it): kept with its
    number for changed_after_hashed."""
    if ctx.changed is None:
        ctx.changed = {}
    ctx.changed[id(target)] = (target, ctx.changes)


def _hashed_parts(made: Any) -> list:
    """What CPython hashed of a noted set or @d dict: the set's items, the dict's keys."""
    if type(made) is list:
        return made
    pairs = made.get("@d")
    return [p[0] for p in pairs if type(p) is list and p] if type(pairs) is list else []


def collapses_by_identity(hashed: Optional[list]) -> bool:
    """Whether a set's items, or the keys of a dict written as @d pairs (hashed: note_hashed's), reach
    one part twice that a copy would not compare equal to (a NaN, an object, a list, or a tuple holding
    one): pickle's set or dict holds one item or key where the JSON's copies would make two, so JSON
    cannot carry it (@pkl).  A pickler never writes such a set or keys: only a hand-made pickle fetches
    one from the memo twice."""
    for _, made in hashed or ():
        if _repeats_a_part_unequal_when_copied(_hashed_parts(made)):
            return True
    return False


def hashed_unfaithfully(hashed: Optional[list], changed: Optional[dict], may_repeat: Any) -> bool:
    """Whether JSON cannot carry the sets and @d dicts made (note_hashed's): collapses_by_identity, where
    parts may repeat (may_repeat: values were shared, or floats read), or changed_after_hashed."""
    return bool(hashed) and bool((may_repeat and collapses_by_identity(hashed))
                                 or (changed and changed_after_hashed(hashed, changed)))


def changed_after_hashed(hashed: list, changed: dict) -> bool:
    """Whether a set's items or a @d dict's keys reach a value changed after the set or dict was made.
    CPython hashed and compared the value as it was then (an instance's hash may come from its state:
    two parts equal then are one item), while the JSON holds it as changed: JSON cannot carry it (@pkl).
    One walk: each part is reached first from the earliest set or dict that reaches it."""
    seen: set = set()
    for made_at, made in hashed:
        stack = list(_hashed_parts(made))
        while stack:
            x = stack.pop()
            if (type(x) is not list and type(x) is not dict) or id(x) in seen:
                continue
            seen.add(id(x))
            entry = changed.get(id(x))
            if entry is not None and entry[0] is x and entry[1] > made_at:
                return True
            stack.extend(x if type(x) is list else _keys_and_values(x))
    return False


def _repeats_a_part_unequal_when_copied(items: list) -> bool:
    unequal: dict = {}  # id -> whether a copy of the part compares unequal to it (None: being walked)
    stack: list = [(x, None) for x in items]
    while stack:
        x, parts = stack.pop()
        if type(x) is float:
            if x != x:  # a NaN equals only itself
                if id(x) in unequal:
                    return True
                unequal[id(x)] = True
            continue
        if type(x) is not list and type(x) is not dict:
            continue
        if parts is not None:  # back from its parts
            unequal[id(x)] = any(unequal.get(id(y), False) is True for y in parts)
            continue
        if id(x) in unequal:
            if unequal[id(x)] is not False:
                return True
            continue
        parts = _parts_compared(x)
        if parts is None:
            unequal[id(x)] = True
            continue
        unequal[id(x)] = None
        stack.append((x, parts))
        stack.extend((y, None) for y in parts)
    return False


def _parts_compared(x: Any) -> Optional[list]:
    """The parts x compares by, [] for a marker whose copy is equal, None where a copy compares unequal."""
    if type(x) is dict and len(x) == 1:
        key = next(iter(x))
        if key in _EQUAL_COPY_MARKERS:
            return []
        if key in _PART_WISE_MARKERS and type(x[key]) is list:
            return x[key]
    return None


def render_obj(obj: Obj, objs: dict) -> None:
    """Rewrite obj.value in place to the markers for what has been built so far (docs/format.md, "Markers")."""
    value = obj.value
    value.clear()
    value.update(obj_content(obj, objs))


def obj_content(obj: Obj, objs: dict) -> dict:
    """The marker of an object under construction: a known type's, an instance of a class (NEWOBJ without
    arguments or with a tuple of them, or REDUCE without arguments, then BUILD), else the generic call."""
    callable_, args = obj.callable, obj.args
    built = obj.built
    if obj.kind == REDUCE and not built and obj.items is None and obj.appends is None:
        known = _decode_known.recognize_reduce(callable_, args, objs)
        if known is not None:
            return known
    names = _known.global_name(callable_) if built else None
    if names is not None and type(args) is dict and len(args) == 1 and type(args.get("@t")) is list:
        module, name = names
        newobj = obj.kind == NEWOBJ
        if newobj or not args["@t"]:
            state = obj.state
            if newobj and not args["@t"] and (module, name) == ("uuid", "UUID") and obj.items is None and obj.appends is None:
                uuid_text = _decode_known.uuid_from_state(state)
                if uuid_text is not None:
                    return {"@uuid": uuid_text}
            kind = btree_kind(module, name)
            if kind is not None:
                state = _decode_known.btree_state(state, kind[0], kind[1])
            return instance_content(module, name, args, state, obj, newobj)
    return generic_call(obj)


def instance_content(module: str, name: str, args: dict, state: Any, obj: Any, newobj: bool) -> dict:
    """``{"@cls": ..., "@s": ...}`` of an instance of a class made by NEWOBJ (with a tuple of arguments, kept
    in an ``@args``/``@state`` wrapper) or, ``"@newobj": false``, by REDUCE without arguments."""
    if args["@t"]:
        state = {"@args": args, "@state": state}
    content = {"@cls": [module, name], "@s": state}
    if not newobj:
        content["@newobj"] = False
    if obj.items is not None:
        content["@items"] = obj.items
    if obj.appends is not None:
        content["@appends"] = obj.appends
    return content


def generic_call(obj: Any) -> dict:
    """``{"@reduce": {...}}``: everything the pickle gave for the object, by name, in the Rust codec's order."""
    inner = {"callable": obj.callable, "args": obj.args}
    if obj.items is not None:
        inner["items"] = obj.items
    if obj.appends is not None:
        inner["appends"] = obj.appends
    if obj.kind == NEWOBJ:
        inner["newobj"] = True
    if obj.built:
        inner["state"] = obj.state
    return {"@reduce": inner}


def finish(value: Any, unrepresentable: bool, cyclic: bool, maybe_deep: bool, flags: int, start: int,
           budget: int, fetched: int = 0) -> Any:
    """Check the value tree of the pickle at ``start``; raise Unrepresentable when JSON cannot carry it.

    ``maybe_deep``: the pickle ran more than DEEP_CONTAINERS container
    opcodes, enough to be more than MAX_DEPTH deep (a generous count only
    costs time).  ``cyclic``: a shared value was mutated.  ``budget``: its
    expansion budget, ``fetched`` what the values fetched weighed (as read).
    """
    if unrepresentable:
        raise Unrepresentable()
    try:
        if cyclic and _has_cycle(value):
            raise Unrepresentable()
    except CodecError as exc:
        raise _depth_error(exc, start) from None
    longer = written_weight if flags & F_WRITTEN_LONGER else None
    if (cyclic or longer_than_budget(flags, fetched, budget)) and _added_by_sharing(value, longer) > budget:
        raise expansion_error(budget, start)  # before the depth walk, which walks the tree
    try:
        if maybe_deep or cyclic:
            _check_depth(value)
    except CodecError as exc:
        raise _depth_error(exc, start) from None
    if flags & F_ESCAPED_KEY:
        value = _escape_keys(value)
    return value


def longer_than_budget(flags: int, fetched: int, budget: int) -> bool:
    """Whether the values fetched, written in their longer forms, may weigh more than the budget: then
    finish weighs what sharing adds as written."""
    return bool(flags & F_WRITTEN_LONGER) and fetched * WRITTEN_RATIO > budget


def _depth_error(exc: CodecError, start: int) -> CodecError:
    return CodecError(f"{exc} (more than {MAX_DEPTH} levels) in the pickle at offset {start}")


def object_record_state(first: Any, state: Any, unrepresentable: bool, cyclic: bool, flags: int,
                        budget: int) -> dict:
    """The state of an object record (docs/format.md, "Class metadata"): ``{"@obj": first, "@state": state}``.

    The first pickle is not class metadata (an instance, a reference to a
    persistent class...), so its value is kept whole.  ``state`` is already
    finished; ``first`` gets the same checks here, its depth counted from
    its own top (the encoder writes each pickle from depth 0), and errors
    name offset 0.  ``unrepresentable``/``cyclic`` are what the walk over the
    first pickle found (or more).
    """
    first = finish(first, unrepresentable, cyclic, True, flags, 0, budget)
    return {"@obj": first, "@state": state}


def _has_cycle(root: Any) -> bool:
    """Does the value graph contain itself?  Deeper than 3 * MAX_DEPTH is a depth error.

    A depth-first walk with an explicit stack, so that any depth is walked
    without recursion.
    """
    if type(root) is not dict and type(root) is not list:
        return False
    on_path = {id(root)}
    done: set = set()
    stack: list = []
    key, depth = id(root), 0
    it: Any = iter(root.values() if type(root) is dict else root)
    while True:
        for c in it:
            if type(c) is dict or type(c) is list:
                child = id(c)
                if child in on_path:
                    return True
                if child in done:
                    continue
                if depth >= 3 * MAX_DEPTH:
                    raise CodecError("maximum nesting depth exceeded")
                on_path.add(child)
                stack.append((it, key, depth))
                it, key, depth = iter(c.values() if type(c) is dict else c), child, depth + 1
                break
        else:
            on_path.discard(key)
            done.add(key)
            if not stack:
                return False
            it, key, depth = stack.pop()


# Markers whose list payload stands at the marker's own level (docs/format.md, "Nesting depth").
_LIST_PAYLOADS = frozenset(("@t", "@set", "@fset", "@td", "@cls"))
# Markers whose dict payload is the marker's own level: its values are one down.
_DICT_PAYLOADS = frozenset(("@reduce", "@inst"))


def _levels_below(v: Any) -> Any:
    """What _check_depth counts one level below the container v, or None for a scalar marker."""
    if type(v) is list:
        return v
    if len(v) == 1:
        for k in v:
            break
        payload = v[k]
        if k in _LIST_PAYLOADS and type(payload) is list:
            return payload
        if k in _DICT_PAYLOADS and type(payload) is dict:
            return payload.values()
        if k == "@d" and type(payload) is list:
            return [x for pair in payload if type(pair) is list for x in pair]
        if type(payload) is str and type(k) is str and k[:1] == "@":
            return None  # bytes, a big int, a date...: a scalar, not a level
    return v.values()


def _check_depth(root: Any) -> None:
    """Nesting deeper than MAX_DEPTH is an error, counted as the reference counts it.

    Each container is a level; a tuple's or set's items, a dict's keys and
    values (also in the ``@d`` pair form), a reference's id and an object's
    callable, arguments and state are one level below it.  Walked with an
    explicit stack: any depth is checked without recursion.  A container the
    memo gave again stands in many places: its height (the levels at and below
    it) is kept by id once walked, so the work is the graph's, not the tree's
    (no cycles: finish looked for them first).
    """
    if type(root) is not list and type(root) is not dict:
        return
    children = _levels_below(root)
    if children is None:
        return
    heights: dict = {}  # id -> the height of a container walked
    stack: list = []
    node, it, height = root, iter(children), 1  # what `it` gives stands len(stack) + 1 levels down
    while True:
        for c in it:
            if type(c) is dict or type(c) is list:
                known = heights.get(id(c))
                if known is None:
                    children = _levels_below(c)
                    if children is None:
                        continue
                    if len(stack) >= MAX_DEPTH:
                        raise CodecError("maximum nesting depth exceeded")
                    stack.append((node, it, height))
                    node, it, height = c, iter(children), 1
                    break
                if len(stack) + known > MAX_DEPTH:
                    raise CodecError("maximum nesting depth exceeded")
                height = max(height, known + 1)
        else:
            heights[id(node)] = height
            if not stack:
                return
            below = height
            node, it, height = stack.pop()
            height = max(height, below + 1)


def _same(x: Any) -> Any:
    return x


def _key_as_written(k: Any) -> Any:
    return escaped_key(k, False) if type(k) is str and k[:4] in ESCAPED_KEY_PREFIXES else k


def _escape_keys(v: Any) -> Any:
    """Keys that would read back as ``@ns:``/``@su:`` escapes written escaped (docs/format.md, "Escaped keys")."""
    return rebuild_tree(v, _same, _key_as_written, _same_dict)


def _same_dict(original: dict, copy: dict) -> dict:
    return copy


# ---------------------------------------------------------------------------
# Python 2 STRING escapes (protocol 0)
# ---------------------------------------------------------------------------

_SIMPLE_ESCAPES = {
    ord("\\"): 0x5C, ord("'"): 0x27, ord('"'): 0x22, ord("a"): 0x07, ord("b"): 0x08,
    ord("f"): 0x0C, ord("n"): 0x0A, ord("r"): 0x0D, ord("t"): 0x09, ord("v"): 0x0B,
}
_OCTAL = b"01234567"
_HEX = b"0123456789abcdefABCDEF"


def decode_string_escapes(text: bytes) -> bytes:
    """The bytes of a STRING opcode's quoted text, as CPython's unpickler reads it.

    The same result as ``codecs.escape_decode``, which CPython's unpickler
    uses, without its warnings: an unknown escape such as ``\\q`` keeps its
    backslash and an octal escape above 0o377 keeps its low eight bits, where
    ``escape_decode`` also issues a DeprecationWarning (an exception under
    ``python -W error``, and a change of the process's warning state to
    avoid it).  Raises CodecError where escape_decode raises ValueError.
    """
    if b"\\" not in text:
        return text
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        backslash = text.find(b"\\", i)
        if backslash < 0:
            out += text[i:]
            break
        out += text[i:backslash]
        i = backslash + 1
        if i == n:
            raise CodecError("Trailing \\ in string")
        c = text[i]
        i += 1
        if c == 0x0A:  # a backslash before a newline joins the lines
            continue
        simple = _SIMPLE_ESCAPES.get(c)
        if simple is not None:
            out.append(simple)
        elif c in _OCTAL:
            value = c - 0x30
            for _ in range(2):
                if i < n and text[i] in _OCTAL:
                    value = value * 8 + text[i] - 0x30
                    i += 1
            out.append(value & 0xFF)
        elif c == 0x78:  # \xhh: exactly two hex digits
            if i + 1 < n and text[i] in _HEX and text[i + 1] in _HEX:
                out.append(int(text[i:i + 2], 16))
                i += 2
            else:
                raise CodecError(f"invalid \\x escape at position {backslash}")
        else:  # not an escape: the backslash stays, the character is read again
            out.append(0x5C)
            i -= 1
    return bytes(out)


# ---------------------------------------------------------------------------
# Errors of whole records
# ---------------------------------------------------------------------------

def in_state(write: Any, start: int, *args: Any) -> Any:
    """Errors found while writing the state name the state pickle's offset."""
    try:
        return write(*args)
    except CodecError as exc:
        raise CodecError(f"{exc} (state pickle at offset {start})") from None


def check_class_names_at_offset_0(module: str, name: str) -> None:
    try:
        check_class_names((module, name))
    except CodecError as exc:
        raise CodecError(f"{exc} (class pickle at offset 0)") from None


# ---------------------------------------------------------------------------
# Cold opcode work, once for both twins: errors, big numbers, protocol 0 text
# ---------------------------------------------------------------------------
#
# The readers of text-line opcodes (protocol 0) take the pickle and the offset
# after the opcode byte and return (value, offset after the line); ``ctx`` is
# either twin's decoding context (its flags, unrepresentable, refs, compact).

def decode_error(msg: str, pos: int) -> CodecError:
    return CodecError(f"{msg} at offset {pos}")


def eof_error(pos: int) -> CodecError:
    return CodecError(f"unexpected end of pickle stream at offset {pos}")


def int_value(v: int, ctx: Any) -> Any:
    """A pickled int: itself within int64, else the @bi marker."""
    if I64_MIN <= v <= I64_MAX:
        return v
    if v.bit_length() > MAX_BIGINT_BITS:
        ctx.unrepresentable = True  # kept verbatim rather than spelled out (see MAX_BIGINT_BITS)
        return {"@bi": "0"}
    return {"@bi": int_to_decimal(v)}


def float_flags(x: float) -> int:
    if x == 0.0 or x - x != 0.0:
        return F_FLOAT if float_marker(x) else 0
    ax = -x if x < 0 else x
    if ax >= 1e16 or ax < 1e-4:
        return F_EXP_FLOAT
    return 0


def text_line(data: bytes, pos: int) -> Tuple[bytes, int]:
    nl = data.find(b"\n", pos)
    if nl < 0:
        raise eof_error(len(data))
    return data[pos:nl], nl + 1


def line_utf8(line: bytes, start: int, ctx: Any) -> str:
    try:
        s = line.decode("utf-8")
    except UnicodeDecodeError:
        raise decode_error("invalid UTF-8 in pickle string", start) from None
    if "\x00" in s:
        ctx.flags |= F_NUL
    return s


def memo_index(line: bytes, start: int, what: str) -> int:
    try:
        idx = int(line.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise decode_error(f"invalid pickle data: {what} index: {line[:40]!r}", start) from None
    if idx < 0:
        raise decode_error(f"invalid pickle data: {what} index: negative", start)
    return idx


def _parse_int(line: bytes, start: int, what: str) -> int:
    """Text digits as CPython's INT/LONG read them; long texts without int()'s digit limit."""
    try:
        text = line.decode("ascii")
        if len(text) > 4000:
            return decimal_to_int(text.strip(), what)
        return int(text, 0)
    except (ValueError, UnicodeDecodeError):  # CodecError is a ValueError too
        raise decode_error(f"invalid pickle data: {what} parse: {line[:40]!r}", start) from None


def global_lines(ctx: Any, data: bytes, pos: int) -> Tuple[dict, int]:
    """GLOBAL / INST: the class marker of a module line and a name line."""
    start = pos - 1
    module, pos = text_line(data, pos)
    name, pos = text_line(data, pos)
    return {"@cls": [line_utf8(module, start, ctx), line_utf8(name, start, ctx)]}, pos


def int_line(ctx: Any, data: bytes, pos: int) -> Tuple[Any, int]:
    """INT: protocol 0 spells the booleans 00 and 01."""
    line, after = text_line(data, pos)
    if line == b"00":
        return False, after
    if line == b"01":
        return True, after
    return int_value(_parse_int(line, pos - 1, "INT"), ctx), after


def long_line(ctx: Any, data: bytes, pos: int) -> Tuple[Any, int]:
    line, after = text_line(data, pos)
    if line[-1:] == b"L":
        line = line[:-1]
    if len(line) > 10000:
        raise decode_error("invalid pickle data: LONG value too large", pos - 1)
    return int_value(_parse_int(line, pos - 1, "LONG"), ctx), after


def float_line(ctx: Any, data: bytes, pos: int) -> Tuple[float, int]:
    line, after = text_line(data, pos)
    try:
        x = float(line.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise decode_error(f"invalid pickle data: FLOAT parse: {line[:40]!r}", pos - 1) from None
    ctx.flags |= float_flags(x)
    return x, after


def string_line(ctx: Any, data: bytes, pos: int) -> Tuple[dict, int]:
    """STRING: a Python 2 str, quoted, its escapes decoded as CPython does."""
    line, after = text_line(data, pos)
    if len(line) >= 2 and line[0] == line[-1] and line[0] in b"\"'":
        line = line[1:-1]
    else:
        raise decode_error("invalid pickle data: the STRING opcode argument must be quoted", pos - 1)
    try:
        raw = decode_string_escapes(line)
    except CodecError as exc:
        raise decode_error(f"invalid pickle data: STRING escape: {exc}", pos - 1) from None
    return {"@b": b64encode(raw)}, after


def unicode_line(ctx: Any, data: bytes, pos: int) -> Tuple[str, int]:
    line, after = text_line(data, pos)
    try:
        s = line.decode("raw-unicode-escape")
    except UnicodeDecodeError as exc:
        raise decode_error(f"invalid pickle data: UNICODE escape: {exc.reason}", pos - 1) from None
    if "\x00" in s:
        ctx.flags |= F_NUL
    if "@ns:" in s or "@su:" in s:  # maybe spelled with escapes (\u0040ns:): the scan of the bytes misses it
        ctx.flags |= F_ESCAPED_KEY
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            ctx.flags |= F_SURROGATE
    return s, after


def persid_line(ctx: Any, data: bytes, pos: int) -> Tuple[str, int]:
    line, after = text_line(data, pos)
    try:
        pid = line.decode("ascii")
    except UnicodeDecodeError:
        raise decode_error("invalid pickle data: persistent IDs in protocol 0 must be ASCII strings",
                           pos - 1) from None
    if "\x00" in pid:
        ctx.flags |= F_NUL
    return pid, after


def persistent_ref(ctx: Any, pid: Any) -> dict:
    """The @ref marker of a persistent id; its oid goes into refs as ZODB's referencesf finds it."""
    oid = None
    first = None
    if type(pid) is dict and len(pid) == 1:
        if "@t" in pid:
            items = pid["@t"]
            if type(items) is list and items:
                first = items[0]
        elif type(pid.get("@b")) is str:
            oid = binascii.a2b_base64(pid["@b"])  # a bare oid (__getnewargs__ classes)
        if type(first) is dict and len(first) == 1 and type(first.get("@b")) is str:
            oid = binascii.a2b_base64(first["@b"])  # (oid, klass)
    elif type(pid) is str and len(pid) == 8 and pid.isascii():
        oid = pid.encode("ascii")  # referencesf takes an ASCII text id as an oid
    if oid is not None and len(oid) == 8:
        ctx.refs.append(int.from_bytes(oid, "big", signed=True))
    if not ctx.compact:
        return note_persistent_id(ctx, pid)
    if first is not None and oid is not None and len(pid["@t"]) == 2:
        klass = pid["@t"][1]
        if klass is None:
            return {"@ref": oid.hex()}
        if is_global(klass):
            module, name = klass["@cls"]
            if "." not in name:  # "module.Name" is split at its last dot on the way back
                return {"@ref": [oid.hex(), f"{module}.{name}" if module else name]}
    elif type(pid) is str:
        if _known.is_hex(pid):
            ctx.unrepresentable = True  # would read back as an oid
    elif type(pid) is list and len(pid) == 2 and type(pid[0]) is str and (
            type(pid[1]) is str or _known.is_oid_hex(pid[0])):
        ctx.unrepresentable = True  # would read back as [oid, class], or be refused as a malformed one
    return note_persistent_id(ctx, pid)


def note_persistent_id(ctx: Any, pid: Any) -> dict:
    """{"@ref": pid}, a pid of lists or dicts kept for in_persistent_id: the unpickler reads a persistent id
    at its (BIN)PERSID, so one the pickle changes later through the memo is not what the @ref shows."""
    if type(pid) is list or type(pid) is dict:
        if ctx.pids is None:
            ctx.pids = []
        ctx.pids.append(pid)
    return {"@ref": pid}


def in_persistent_id(ctx: Any, target: Any) -> bool:
    """Whether target, a list or dict the pickle changes, is part of a persistent id read before it (the
    decoders' _note_mutation: the record is then @pkl).  Each id is walked once, at the first change after
    it: the work of its graph."""
    parts = ctx.pid_parts
    if parts is None:
        parts = ctx.pid_parts = {}
    for pid in ctx.pids or ():
        stack = [pid]
        while stack:
            x = stack.pop()
            if (type(x) is list or type(x) is dict) and id(x) not in parts:
                parts[id(x)] = x
                stack.extend(x if type(x) is list else x.values())
    ctx.pids = None
    return id(target) in parts
