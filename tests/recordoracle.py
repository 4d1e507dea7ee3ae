"""The oracle for generated records: sound values, the twins alike, and what decodes encodes back.

``check_record(data, twins)`` raises ``Failure`` (an AssertionError saying
which promise broke, and how) when, for a record pickle's own unpickler
loads:

- any record decoder (``decode_zodb_record``, ``decode_zodb_record_for_pg``,
  ``decode_zodb_record_for_pg_json``) of either twin raises anything but
  ValueError, or returns a value that holds itself or that is heavier as a
  tree than the expansion budget allows (docs/format.md, "Expansion budget");
- the twins' outcomes differ (tests/strictcompare.py: values strictly, texts
  identically, the same ValueError message);
- the Cython twin's direct lane neither declines nor gives the Python twin's
  ``decode_zodb_record_for_pg_json``;
- what decoded does not encode back (``encode_zodb_record`` of the dict, of
  the pg dict after a trip through JSON text, ``encode_zodb_record_from_pg_json``
  of the JSON text) to a record that loads to the same objects as the
  original (``zodb_json_codec._db.fidelity``), or, where the decoder gave the
  record verbatim (``@pkl``), to other bytes than the original; or the twins'
  encoders disagree; or what they wrote does not decode again.

``collected_outcome(fn, data, after)`` is a call made while the collector
runs at every allocation and, at the collection ``after`` collections in, a
``__del__`` empties every list made since the call began (the decoder's
stack, its items, its values: it finds them through ``gc.get_objects()``, as
docs/design.md "Where Python code can run" says any ``__del__`` can).  The
Cython twin must not crash; run it where a crash cannot take the caller down.

tests/test_generated.py and fuzz/fuzz_structure.py share it; ``call`` lets
the harness time each call and run the Cython twin in its small stack.
"""

from __future__ import annotations

import gc
import sys
from types import SimpleNamespace
from typing import Any, Callable, Dict, Optional, Tuple

from deepvalues import json_text
from strictcompare import Outcome, describe, diff, outcome, outcome_diff
from zodb_json_codec._db import fidelity
from zodb_json_codec._decode_common import expansion_budget
from zodb_json_codec._jsonread import read_json

RECORD_DECODERS = ("decode_zodb_record", "decode_zodb_record_for_pg", "decode_zodb_record_for_pg_json")
#: A call: (twin name, what is called, the function, its arguments) -> its outcome.
Call = Callable[..., Outcome]


class Failure(AssertionError):
    """A promise the record broke: what was called, and how it went wrong."""


def plain_call(twin: str, label: str, fn: Callable[..., Any], *args: Any) -> Outcome:
    return outcome(fn, *args)


class Twins(SimpleNamespace):
    """python: the Python twin's functions; cython: the Cython twin's, or None; lane: the direct lane, or None."""


def check_record(data: bytes, twins: Twins, call: Call = plain_call) -> None:
    """Every promise above for one record; Failure for the first one broken."""
    original = loaded("the generator wrote a record pickle cannot load", data)
    decoded = {name: decoded_alike(data, name, twins, call) for name in RECORD_DECODERS}
    if twins.lane is not None:
        lane_agrees(data, twins.lane, decoded["decode_zodb_record_for_pg_json"], call)
    paths = [(dict_path, "decode_zodb_record"), (pg_path, "decode_zodb_record_for_pg"),
             (pg_json_path, "decode_zodb_record_for_pg_json")]
    for path, decoder in paths:
        if decoded[decoder][0] == "ok":
            try:
                path(data, original, decoded[decoder][1], twins, call)
            except Refused:  # the record names a global no encoder may write (docs/security.md)
                pass


class Refused(Exception):
    """Both twins' encoder refused a global the record names, as the globals policy says it must: the round
    trip ends there (a refusal the policy would not make is a Failure)."""


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------

def decoded_alike(data: bytes, name: str, twins: Twins, call: Call) -> Outcome:
    """The Python twin's outcome of decoder name, sound, and the Cython twin's the same."""
    py = sound_outcome(data, name, "python", call("python", name, getattr(twins.python, name), data))
    if twins.cython is not None:
        cy = sound_outcome(data, name, "cython", call("cython", name, getattr(twins.cython, name), data))
        found = outcome_diff(py, cy)
        if found:
            raise Failure(f"{name}: the twins differ: {found}\n  python: {describe(py)[:300]}\n"
                          f"  cython: {describe(cy)[:300]}")
    return py


def sound_outcome(data: bytes, name: str, twin: str, got: Outcome) -> Outcome:
    """got, if it is a ValueError or a value that neither holds itself nor outweighs the budget."""
    label = f"{name} [{twin}]"
    if got[0] == "raised":
        if not issubclass(got[1], ValueError):
            raise Failure(f"{label} raised {got[1].__module__}.{got[1].__qualname__}: {got[2][:300]}")
        return got
    value = got[1]
    bound = weight_bound(data)
    if name == "decode_zodb_record_for_pg_json":
        if len(value[2]) > 8 * bound:
            raise Failure(f"{label}: a JSON text of {len(value[2])} characters from {len(data)} bytes: "
                          "the expansion budget was not kept")
        return got
    state = value if name == "decode_zodb_record" else value[2]
    if holds_itself(state):
        raise Failure(f"{label} returned a value that holds itself (docs/format.md: such a record is @pkl)")
    weight = tree_weight(state, bound)
    if weight > bound:
        raise Failure(f"{label} returned a value of weight over {bound} as a tree from {len(data)} bytes: "
                      "the expansion budget was not kept")
    return got


def weight_bound(data: bytes) -> int:
    """The most a decoded value may weigh: the budget sharing may add, and generously what the pickle's own
    opcodes make (each byte at most a few values)."""
    return expansion_budget(len(data)) + 64 * len(data)


def holds_itself(value: Any) -> bool:
    """Whether a list or dict in value contains itself: a walk that marks the containers on its path."""
    on_path: Dict[int, bool] = {}
    stack = [(value, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            on_path[id(node)] = False
            continue
        if type(node) is not list and type(node) is not dict:
            continue
        state = on_path.get(id(node))
        if state:
            return True
        if state is False:  # walked already from elsewhere, without meeting itself
            continue
        on_path[id(node)] = True
        stack.append((node, True))
        stack.extend((x, False) for x in (node if type(node) is list else node.values()))
    return False


def tree_weight(value: Any, limit: int) -> int:
    """The weight as the decoders count it (_decode_common.weight): every value, plus each text's length, a
    shared part at each place; any number above limit once past it."""
    total, stack = 0, [value]
    while stack and total <= limit:
        v = stack.pop()
        total += 1 + (len(v) if type(v) is str else 0)
        if type(v) is list:
            stack.extend(v)
        elif type(v) is dict:
            stack.extend(v.keys())
            stack.extend(v.values())
    return total


def lane_agrees(data: bytes, lane: Callable[[bytes], Any], python: Outcome, call: Call) -> None:
    got = call("cython", "the direct lane", lane, data)
    if got[0] == "raised":
        raise Failure(f"the direct lane raised {got[1].__qualname__}: {got[2][:300]} (it may only decline)")
    if got[1] is None:
        return
    if python[0] != "ok":
        raise Failure(f"the direct lane gave {describe(got)[:200]}, the Python twin raised {python[2][:300]}")
    found = diff(python[1], got[1])
    if found:
        raise Failure(f"the direct lane's text is not the Python twin's decode_zodb_record_for_pg_json: {found}")


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------

def loaded(problem: str, data: bytes) -> Tuple[Any, Any]:
    """((class name, args), state) as pickle's unpickler loads the record, with stand-ins for classes."""
    try:
        return fidelity.load_record(data)
    except Exception as exc:  # noqa: BLE001 - whatever pickle says, the record does not load
        raise Failure(f"{problem}: {type(exc).__name__}: {exc}") from None


def verbatim(state: Any) -> bool:
    return type(state) is dict and len(state) == 1 and type(state.get("@pkl")) is str


def encoded(label: str, twins: Twins, call: Call, encoder: str, *args: Any) -> bytes:
    """Both twins' encoder on args: the same outcome, and bytes."""
    py = call("python", encoder, getattr(twins.python, encoder), *args)
    if twins.cython is not None:
        cy = call("cython", encoder, getattr(twins.cython, encoder), *args)
        found = outcome_diff(py, cy)
        if found:
            raise Failure(f"{label}: the twins' {encoder} differ: {found}")
    if py[0] == "raised" and py[1].__name__ == "GlobalRefused":
        policy_refusal(label, getattr(twins.python, encoder), *args)
    if py[0] != "ok":
        raise Failure(f"{label}: decoded, but {encoder} refuses it: {describe(py)[:300]}\n"
                      f"  decoded: {describe(('ok', args[-1]))[:300]}")
    return py[1]


def policy_refusal(label: str, encoder: Callable[..., Any], *args: Any) -> None:
    """Refused if the globals policy refuses the global the encoder named (by its rules, asked again); else
    Failure: an encoder refused what the policy allows."""
    from zodb_json_codec import GlobalRefused, get_globals_policy

    try:
        encoder(*args)
    except GlobalRefused as refusal:
        decision = get_globals_policy().decision(refusal.role, refusal.module, refusal.name)
        if decision is not None or refusal.allow_line is None:
            raise Refused(str(refusal)) from None
        raise Failure(f"{label}: refused {refusal.module}.{refusal.name} as {refusal.role}, which the policy "
                      f"allows: {refusal}") from None


def written_back(label: str, data: bytes, original: Any, again: bytes, state: Any, twins: Twins,
                 call: Call) -> None:
    """again, what an encoder wrote of state: the original bytes if state was @pkl, else a record that
    loads to the same objects and decodes again."""
    if verbatim(state):
        if again != data:
            raise Failure(f"{label}: the record was given verbatim (@pkl), but the encoder wrote other bytes: "
                          f"{again[:200]!r}")
        return
    back = loaded(f"{label}: what the codec wrote does not load ({again[:200]!r})", again)
    try:
        same = fidelity.same(original, back)
    except Exception as exc:  # noqa: BLE001 - a comparison that cannot be made is a finding to look at
        raise Failure(f"{label}: the objects cannot be compared: {type(exc).__name__}: {exc}") from None
    if not same:
        raise Failure(f"{label}: not the same objects after the round trip:\n  original loads as "
                      f"{_short(original)}\n  written back loads as {_short(back)}\n  written back: {again[:300]!r}")
    again_decoded = call("python", "decode_zodb_record", twins.python.decode_zodb_record, again)
    if again_decoded[0] == "raised" and not _tolerated(again_decoded[2]):
        raise Failure(f"{label}: what the encoder wrote does not decode: {again_decoded[2][:300]}")


def _tolerated(message: str) -> bool:
    """Errors decoding what an encoder wrote that break no promise: the encoders count depth otherwise than
    the decoders, and write a shared value as the tree it is (docs/format.md, "Nesting depth", "Expansion
    budget")."""
    return "depth" in message or "expansion budget" in message


def _short(value: Any) -> str:
    return describe(("ok", value))[len("returned "):][:400]


def dict_path(data: bytes, original: Any, doc: dict, twins: Twins, call: Call) -> None:
    again = encoded("decode_zodb_record -> encode_zodb_record", twins, call, "encode_zodb_record", doc)
    written_back("decode_zodb_record -> encode_zodb_record", data, original, again, doc["@s"], twins, call)


def pg_path(data: bytes, original: Any, decoded: tuple, twins: Twins, call: Call) -> None:
    module, name, state, _ = decoded
    label = "decode_zodb_record_for_pg -> JSON text -> encode_zodb_record"
    try:
        kept = read_json(json_text(state))
    except (TypeError, ValueError) as exc:
        raise Failure(f"decode_zodb_record_for_pg gave a state that is not JSON: {exc}") from None
    again = encoded(label, twins, call, "encode_zodb_record", {"@cls": [module, name], "@s": kept})
    written_back(label, data, original, again, kept, twins, call)


def pg_json_path(data: bytes, original: Any, decoded: tuple, twins: Twins, call: Call) -> None:
    module, name, text, _ = decoded
    label = "decode_zodb_record_for_pg_json -> encode_zodb_record_from_pg_json"
    try:
        state = read_json(text)
    except ValueError as exc:
        raise Failure(f"decode_zodb_record_for_pg_json wrote text that is not JSON: {exc}: {text[:300]!r}") from None
    again = encoded(label, twins, call, "encode_zodb_record_from_pg_json", module, name, text)
    written_back(label, data, original, again, state, twins, call)
    from_value = encoded(label, twins, call, "encode_zodb_record", {"@cls": [module, name], "@s": state})
    if from_value != again:
        raise Failure(f"{label}: encode_zodb_record_from_pg_json is not encode_zodb_record of the text read "
                      f"(docs/api.md): {again[:200]!r} != {from_value[:200]!r}")


# ---------------------------------------------------------------------------
# A collector that empties the decoder's lists
# ---------------------------------------------------------------------------

# The lists are emptied only while no Python walk runs: in the Cython twin's C code and the rules it calls
# (_known, _decode_known, _decode_common's markers).  Where the Python twin's own walk runs (its opcode
# loop, its JSON writer and json's C encoder), CPython's list and json code hold a list's items without
# references of their own, as the Cython twin may not: on CPython 3.11 and earlier a collection inside a
# list slice's allocation that empties the list crashes CPython itself (``lst[-3:]`` in plain Python).
# And the checks after the walk (_decode_common's cycle, weight and depth walks), their own work lists
# emptied, end early (a cycle unseen, then walked forever): a change to the checker, not to the decoder.
_PYTHON_WALKS = frozenset({"zodb_json_codec._decode_python", "zodb_json_codec._jsontext_python", "json.encoder"})
_CHECKS = ("zodb_json_codec._decode_common", frozenset({"finish", "weight", "object_record_state", "in_state"}))


def _python_walk_running() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if module in _PYTHON_WALKS or (module == _CHECKS[0] and frame.f_code.co_name in _CHECKS[1]):
            return True
        frame = frame.f_back
    return False


class _Countdown:
    """Garbage in a cycle: at each collection its __del__ leaves another for the next one, until the
    collection `left` collections in (or the first after it outside the Python twin's walk), where it
    runs the action."""

    armed: Optional[Callable[[], None]] = None

    def __init__(self, left: int) -> None:
        self.left = left
        self.cycle = self

    def __del__(self) -> None:
        action = _Countdown.armed
        if action is None:
            return
        if self.left > 0 or _python_walk_running():
            _Countdown(max(self.left - 1, 0))
        else:
            _Countdown.armed = None
            action()


class _ListsMadeSince:
    """Empties, when called, every list made since it was made (known by the ids of those there before)."""

    def __init__(self) -> None:
        self.before = {id(obj) for obj in gc.get_objects() if type(obj) is list}

    def __call__(self) -> None:
        made = [obj for obj in gc.get_objects() if type(obj) is list and id(obj) not in self.before]
        for found in made:
            found.clear()


def collected_outcome(fn: Callable[[bytes], Any], data: bytes, after: int) -> Outcome:
    """fn(data) with the collector running at every allocation and, at the collection after collections in,
    every list made since the call began emptied.  Run it in a process a crash may end."""
    threshold = gc.get_threshold()
    gc.collect()  # (the collections then start from the same count each time: reproducible)
    _Countdown.armed = _ListsMadeSince()
    _Countdown(after)
    gc.set_threshold(1)
    try:
        return outcome(fn, data)
    finally:
        _Countdown.armed = None
        gc.set_threshold(*threshold)
