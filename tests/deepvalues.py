"""Values 1000 levels deep for the tests, written out without recursion.

json.dumps, pickle.dumps, repr and copy.deepcopy recurse once per level and
overflow at about 1000 levels (Python 3.9 to 3.11) or 1500 (3.12), far
below what the codec takes: the tests make and check deep values with these
helpers (and zodb_json_codec._jsonread.read_json, _fidelity.load_record and
_fidelity.same, which are iterative) instead.
"""

from __future__ import annotations

import json
from typing import Any, List

# A pickle body per level (protocol 3, no memo): what comes before the inner value, and after it.
PICKLE_NESTING = {
    "list": (b"]", b"a"),  # [v]
    "dict": (b"}X\x01\x00\x00\x00k", b"s"),  # {"k": v}
    "tuple": (b"", b"\x85"),  # (v,)
}


def nested_pickle(shape: str, depth: int, leaf: bytes = b"K\x01") -> bytes:
    """The body of a pickle of leaf wrapped in depth levels of shape, as pickle.dumps would nest them."""
    before, after = PICKLE_NESTING[shape]
    return before * depth + leaf + after * depth


def json_text(value: Any) -> str:
    """What json.dumps(value) writes (lists, dicts with str keys, JSON scalars), at any depth.

    TypeError for anything else, as json.dumps.
    """
    out: List[str] = []
    stack: list = [(iter((value,)), False, "")]  # (items, of a dict, closing bracket)
    while stack:
        items, of_dict, closing = stack[-1]
        for v in items:
            if of_dict:
                key, v = v
                if type(key) is not str:
                    raise TypeError(f"keys must be str, not {type(key).__name__}")
                out.append(json.dumps(key) + ": ")
            if type(v) is list:
                out.append("[")
                stack.append((iter(v), False, "]"))
                break
            if type(v) is dict:
                out.append("{")
                stack.append((iter(v.items()), True, "}"))
                break
            if v is not None and type(v) not in (str, int, float, bool):
                raise TypeError(f"{type(v).__name__} is not JSON")
            out.append(json.dumps(v))
            out.append(", ")
        else:
            stack.pop()
            if out[-1] == ", ":
                out.pop()
            out.append(closing)
            if stack:
                out.append(", ")
    return "".join(out)
