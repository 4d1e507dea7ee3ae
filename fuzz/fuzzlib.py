"""What the harnesses share: both twins, calls in a small stack, the oracle, the "same objects" checks.

Each harness calls both twins on what the fuzzer gives and raises ``Finding``
(atheris then reports it and libFuzzer keeps the input as a crash artifact)
when the Cython twin raises anything but ValueError (TypeError where an
encoder is given a value it cannot encode, in the values harness), when the
twins' outcomes differ (``strictcompare.outcome_diff``: values type-, order-
and float-bit-strict, pickle bytes and JSON text identical, the same
exception type and message), when what was decoded does not encode back to
the same objects (``zodb_json_codec._db.fidelity``), or when one call takes
longer than FUZZ_SLOW_SECONDS.  Crashes and sanitizer reports end the process
by themselves; fuzz/README.md has the whole list.

Environment (scripts/fuzz and fuzz/run.sh set the first two):

- FUZZ_COPY: the instrumented copy of the project (.fuzz-build/copy): the
  codec must be imported from there, with the Cython twin built.
- FUZZ_STACK_KB (default 512): the Cython twin's calls run in a thread with
  this much stack, so that C recursion too deep for a small thread stack is a
  crash here.  The project promises 128 KiB (musl's default) for a release
  build; ASan's redzones and libFuzzer's hooks make the frames larger here:
  the 999-level encode of tests/test_badinput.py's objects nested through
  their items passes in 128 KiB in a release build, needs 160 KiB with ASan
  alone and about 300 KiB under the running fuzzer, while an unbounded C
  recursion (commit e2ca19b's deep values) overflows even 1 MiB.  0: call
  it in the main thread (8 MiB).
- FUZZ_SLOW_SECONDS (default 5): a single call of the Cython twin taking
  longer (in CPU time of its thread) is a finding (a hang in the making).
  Here every allocation goes through ASan's malloc (PYTHONMALLOC=malloc),
  which makes allocation-heavy calls about 20 times slower than in a release build (pickle_to_json of a
  4096-leaf shared tree: 0.02 s there, 0.4 s here), so 5 s here is roughly
  the 0.25 s of a release build.  FUZZ_PY_SLOW_SECONDS (default 30): the same
  for the Python twin (also instrumented).  libFuzzer's -timeout (scripts/fuzz:
  60 s for a whole input) catches calls that never return.
- FUZZ_INSTRUMENT (default "none"): which of the package's Python modules
  atheris instruments for coverage: "none", "shared" or "all" (see below).
- FUZZ_TRACE=1: each Cython twin call is named on stderr before it is made
  (which call crashed?).
- FUZZ_LOOSE_ERRORS=1: the twins' exceptions need only both be ValueError
  (messages and subclasses may differ).
"""

from __future__ import annotations

import base64
import io
import math
import os
import queue
import re
import sys
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))  # strictcompare, deepvalues (stdlib only)

import atheris  # noqa: E402

# Python coverage (atheris' bytecode instrumentation) for: "none" (the default: the Cython twin's
# compiled code is what guides the fuzzer); "shared", the rules both twins call (known types, markers,
# limits, error wording, the JSON reader, the expansion weight): about 10 times slower; "all", the
# Python twin's loops too.
INSTRUMENT = os.environ.get("FUZZ_INSTRUMENT", "none")
_SHARED = ["zodb_json_codec._common", "zodb_json_codec._known", "zodb_json_codec._decode_known",
           "zodb_json_codec._encode_known", "zodb_json_codec._decode_common", "zodb_json_codec._jsonread"]
_INCLUDE = {"shared": _SHARED, "all": ["zodb_json_codec"], "none": ["zodb_json_codec_instrument_nothing"]}
if INSTRUMENT not in _INCLUDE:
    sys.exit(f"fuzzlib: FUZZ_INSTRUMENT must be one of {', '.join(_INCLUDE)}, not {INSTRUMENT!r}")

with atheris.instrument_imports(include=_INCLUDE[INSTRUMENT]):
    import zodb_json_codec  # noqa: E402,F401
    from zodb_json_codec import _impl  # noqa: E402
    from zodb_json_codec._db import fidelity  # noqa: E402
    from zodb_json_codec._jsonread import read_json  # noqa: E402
    _PY_DECODE, _PY_ENCODE = _impl.import_twin("python")
    _CY_DECODE, _CY_ENCODE = _impl.import_twin("cython")

from deepvalues import json_text  # noqa: E402
import strictcompare  # noqa: E402
from strictcompare import describe, outcome_diff  # noqa: E402

DECODERS = _impl.DECODE_FUNCTIONS
ENCODERS = _impl.ENCODE_FUNCTIONS
SLOW_SECONDS = float(os.environ.get("FUZZ_SLOW_SECONDS", "5"))
PY_SLOW_SECONDS = float(os.environ.get("FUZZ_PY_SLOW_SECONDS", "30"))
STACK_KB = int(os.environ.get("FUZZ_STACK_KB", "512"))
TRACE = os.environ.get("FUZZ_TRACE", "") not in ("", "0")
LOOSE_ERRORS = os.environ.get("FUZZ_LOOSE_ERRORS", "") not in ("", "0")


def _check_build() -> None:
    """The codec must come from the instrumented copy, with its Cython twin (not some other install)."""
    copy = os.environ.get("FUZZ_COPY")
    if not copy:
        sys.exit("fuzzlib: FUZZ_COPY is not set: run the harnesses through scripts/fuzz or fuzz/run.sh")
    copy = os.path.realpath(copy)
    for module in (zodb_json_codec, _CY_DECODE, _CY_ENCODE):
        path = os.path.realpath(module.__file__)
        if not path.startswith(copy + os.sep):
            sys.exit(f"fuzzlib: {module.__name__} imported from {path}, not from the instrumented copy {copy}")
    if not _CY_DECODE.__file__.endswith(".so") or not _CY_ENCODE.__file__.endswith(".so"):
        sys.exit("fuzzlib: the Cython twin is not a compiled module")


_check_build()


def _namespace(decode, encode):
    class Twin:
        pass
    twin = Twin()
    for name in DECODERS:
        setattr(twin, name, getattr(decode, name))
    for name in ENCODERS:
        setattr(twin, name, getattr(encode, name))
    return twin


PY = _namespace(_PY_DECODE, _PY_ENCODE)
CY = _namespace(_CY_DECODE, _CY_ENCODE)
LANE = getattr(_CY_DECODE, "_direct_lane_record", None)


class Finding(Exception):
    """The oracle's verdict: atheris reports it, libFuzzer keeps the input."""


# ---------------------------------------------------------------------------
# Calls
# ---------------------------------------------------------------------------

def _timed(fn: Callable[..., Any], args: tuple) -> tuple:
    """("ok", value, seconds) or ("raised", type, message, seconds): the CPU seconds of this thread, which
    other processes on the machine do not stretch (one call took 10.9 s of wall clock on a loaded 2-core
    machine, in an input whose every call together takes 3.9 s alone)."""
    started = time.thread_time()
    try:
        value = fn(*args)
    except Exception as exc:  # noqa: BLE001 - the outcome is what is judged
        return ("raised", type(exc), str(exc), time.thread_time() - started)
    return ("ok", value, time.thread_time() - started)


class _SmallStack:
    """One thread with a small stack that runs the calls handed to it, one at a time."""

    def __init__(self, kb: int) -> None:
        self.jobs: "queue.SimpleQueue" = queue.SimpleQueue()
        self.done: "queue.SimpleQueue" = queue.SimpleQueue()
        threading.stack_size(kb * 1024)
        try:
            threading.Thread(target=self._serve, name=f"small-stack-{kb}k", daemon=True).start()
        finally:
            threading.stack_size(0)

    def _serve(self) -> None:
        while True:
            fn, args = self.jobs.get()
            self.done.put(_timed(fn, args))

    def __call__(self, fn: Callable[..., Any], args: tuple) -> tuple:
        self.jobs.put((fn, args))
        return self.done.get()


_small_stack = _SmallStack(STACK_KB) if STACK_KB > 0 else None


def _judge_time(label: str, timed: tuple, limit: float, name: str) -> tuple:
    seconds = timed[-1]
    if seconds > limit:
        raise Finding(f"{label}: one call took {seconds:.2f} s ({name}={limit}): a hang in the making")
    return timed[:-1]


def call_py(label: str, fn: Callable[..., Any], *args: Any) -> tuple:
    """outcome() of a Python twin call, in this thread."""
    return _judge_time(f"{label} [python]", _timed(fn, args), PY_SLOW_SECONDS, "FUZZ_PY_SLOW_SECONDS")


def call_cy(label: str, fn: Callable[..., Any], *args: Any) -> tuple:
    """outcome() of a Cython twin call, in the small-stack thread."""
    if TRACE:
        print(f"fuzzlib: calling {label} [cython]", file=sys.stderr, flush=True)
    timed = _small_stack(fn, args) if _small_stack is not None else _timed(fn, args)
    return _judge_time(f"{label} [cython]", timed, SLOW_SECONDS, "FUZZ_SLOW_SECONDS")


def short(value: Any, limit: int = 300) -> str:
    return describe(("ok", value))[len("returned "):][:limit]


def allowed(label: str, twin: str, result: tuple, errors: Tuple[type, ...] = (ValueError,)) -> None:
    """Only these exceptions may come out of a codec call."""
    if result[0] == "raised" and not issubclass(result[1], errors):
        raise Finding(f"{label}: the {twin} twin raised {result[1].__module__}.{result[1].__qualname__}: "
                      f"{result[2][:500]}")


def same_outcome(label: str, py: tuple, cy: tuple) -> None:
    """The twins agree (strictly; with FUZZ_LOOSE_ERRORS, two ValueErrors of any wording agree)."""
    if LOOSE_ERRORS and py[0] == cy[0] == "raised" and issubclass(py[1], ValueError) and issubclass(cy[1], ValueError):
        return
    found = diff(py[1], cy[1]) if py[0] == cy[0] == "ok" else outcome_diff(py, cy)
    if found:
        raise Finding(f"{label}: the twins differ: {found}\n  python: {describe(py)[:400]}\n  cython: {describe(cy)[:400]}")


def both(label: str, name: str, *args: Any, errors: Tuple[type, ...] = (ValueError,)) -> Tuple[tuple, tuple]:
    """Both twins' function `name` on args: only `errors` escape, outcomes equal. (python, cython) outcomes."""
    py = call_py(f"{label} {name}", getattr(PY, name), *args)
    cy = call_cy(f"{label} {name}", getattr(CY, name), *args)
    allowed(f"{label} {name}", "cython", cy, errors)
    allowed(f"{label} {name}", "python", py, errors)
    same_outcome(f"{label} {name}", py, cy)
    return py, cy


def refused_by_policy(outcome: tuple, name: str, *args: Any) -> bool:
    """Whether outcome is the Python twin's name(*args) refusing a global that the globals policy refuses
    (docs/security.md: a record naming one is outside what the codec writes back); a GlobalRefused the
    policy would not make is a finding."""
    if outcome[0] != "raised" or outcome[1].__name__ != "GlobalRefused":
        return False
    from zodb_json_codec import GlobalRefused, get_globals_policy
    try:
        getattr(PY, name)(*args)
    except GlobalRefused as refusal:
        if refusal.allow_line is None or get_globals_policy().decision(refusal.role, refusal.module,
                                                                       refusal.name) is not None:
            return True
        raise Finding(f"{name} refused {refusal.module}.{refusal.name} as {refusal.role}, which the policy "
                      f"allows: {refusal}") from None
    return False


def diff(a: Any, b: Any) -> Optional[str]:
    """strictcompare.diff's verdict, in memory proportional to the depth.

    (strictcompare.diff keeps each level's path text, a string as long as the
    level is deep: values 13 000 levels deep, which the fuzzer makes, took
    gigabytes.)  The path is made only for the difference found.
    """
    stack: List[Tuple[Any, str]] = [(iter([(a, b, "$")]), "")]
    while stack:
        for x, y, label in stack[-1][0]:
            if x is y and type(x) not in (dict, list):  # (a snapshot shares its leaves; a set's repr may be deep)
                continue
            found, parts = strictcompare._diff_here(x, y, "")
            if found is not None:
                path = "".join(lab for _, lab in stack[1:]) + ("" if label == "$" else label)
                return f"${path}{found}"
            if parts is not None:
                stack.append((_parts(x, y), "" if label == "$" else label))
                break
        else:
            stack.pop()
    return None


def _parts(a: Any, b: Any):
    if type(a) is dict:
        for i, (ka, kb) in enumerate(zip(list(a), list(b))):
            yield ka, kb, f".<key {i}>"
            yield a[ka], b[kb], f"[{strictcompare._short(ka, 40)}]"
    else:
        for i, (x, y) in enumerate(zip(a, b)):
            yield x, y, f"[{i}]"


def must_equal(label: str, expected: Any, got: Any) -> None:
    found = diff(expected, got)
    if found:
        raise Finding(f"{label}: {found}")


# ---------------------------------------------------------------------------
# "The same objects": zodb_json_codec._db.fidelity, with the few real globals
# it rebuilds kept from allocating what a hostile pickle asks for
# ---------------------------------------------------------------------------

_BIG = 1 << 16


def _too_big(value: Any) -> bool:
    if type(value) is int:
        return abs(value) > _BIG
    if type(value) is range:
        try:
            return len(value) > _BIG
        except OverflowError:
            return True
    return False


def _guarded(real: Callable[..., Any]) -> Callable[..., Any]:
    def build(*args: Any, **kw: Any) -> Any:
        if any(_too_big(a) for a in args) or any(_too_big(a) for a in kw.values()):
            raise ValueError(f"fuzzlib: {real.__name__} of a huge size: not rebuilt")
        return real(*args, **kw)
    build.__name__ = build.__qualname__ = real.__name__
    return build


class _Loader(fidelity.Loader):
    """fidelity's loader; the real globals that take a size are wrapped (one wrapper each: identity holds)."""

    _GUARDED = {key: None for key in [("builtins", "bytearray"), ("builtins", "set"), ("builtins", "frozenset"),
                                      ("copyreg", "_reconstructor"), ("copyreg", "__newobj__"),
                                      ("_codecs", "encode")]}

    def find_class(self, module: Any, name: Any) -> Any:
        found = super().find_class(module, name)
        module = fidelity._text(module)
        key = (fidelity._RENAMED_MODULES.get(module, module), fidelity._text(name))
        if key in self._GUARDED and not (isinstance(found, type) and issubclass(found, fidelity.Inert)):
            if self._GUARDED[key] is None:
                self._GUARDED[key] = _guarded(found)
            return self._GUARDED[key]
        return found


def _load_pickles(data: bytes, count: int) -> Optional[list]:
    """The first `count` pickles of data loaded with one unpickler (shared memo, as ZODB), or None."""
    try:
        loader = _Loader(io.BytesIO(data), encoding="bytes")
        return [loader.load() for _ in range(count)]
    except Exception:  # noqa: BLE001 - not loadable (or not rebuilt): nothing to compare
        return None


def _same(a: Any, b: Any) -> Optional[bool]:
    try:
        return fidelity.same(a, b)
    except Exception:  # noqa: BLE001 - values the comparison cannot handle: unknown
        return None


def same_objects(label: str, original: bytes, again: bytes, pickles: int,
                 unwrap: Optional[Callable[[Any], Any]] = None) -> None:
    """When pickle can load `original` (its first `pickles` pickles), `again` must load to the same objects.

    unwrap: applied to the last object loaded from `again` (a value written inside a wrapper dict).
    """
    if original == again:
        return
    a = _load_pickles(original, pickles)
    if a is None:
        return
    b = _load_pickles(again, pickles)
    if b is None:
        raise Finding(f"{label}: the original loads with pickle, what the codec wrote back does not:\n"
                      f"  original {original[:300]!r}\n  again    {again[:300]!r}")
    if unwrap is not None:
        try:
            b[-1] = unwrap(b[-1])
        except Exception:  # noqa: BLE001
            raise Finding(f"{label}: what the codec wrote back is not the wrapper written: {again[:300]!r}") from None
    if pickles == 2:
        a = (fidelity.class_name(a[0]), a[1])
        b = (fidelity.class_name(b[0]), b[1])
    if _same(a, b) is False:
        raise Finding(f"{label}: not the same objects after the round trip:\n"
                      f"  original {original[:300]!r}\n  again    {again[:300]!r}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def storable(label: str, value: Any) -> None:
    """A PostgreSQL variant's value: no str (key or value) with U+0000 or a lone surrogate (jsonb refuses them)."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str:
            if "\x00" in v or _SURROGATE.search(v):
                raise Finding(f"{label}: a text jsonb cannot store: {v[:200]!r}")
        elif t is dict:
            for k, x in v.items():
                stack.append(k)
                stack.append(x)
        elif t is list:
            stack.extend(v)


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------

def snapshot(value: Any) -> Any:
    """A copy of the containers of value (dict, list, tuple, set, frozenset), without recursion.

    Compared with ``diff`` after the calls: no encoder may change its argument.
    """
    def fresh(v: Any) -> Any:
        t = type(v)
        if t is dict:
            return {}, list(v.items())
        if t is list or t is tuple:
            return [], list(v)
        return None, None

    root_copy, items = fresh(value)
    if root_copy is None:
        return value
    work = [(value, root_copy, items)]
    done = []
    while work:
        original, copy, items = work.pop()
        done.append((original, copy))
        for item in items:
            if type(original) is dict:
                k, v = item
                c, sub = fresh(v)
                if c is None:
                    copy[k] = v
                else:
                    copy[k] = c
                    work.append((v, c, sub))
            else:
                c, sub = fresh(item)
                if c is None:
                    copy.append(item)
                else:
                    copy.append(c)
                    work.append((item, c, sub))
    # tuples were copied as lists: make them tuples again, innermost first
    fixed = {}
    for original, copy in reversed(done):
        if type(original) is tuple:
            fixed[id(copy)] = tuple(fixed.get(id(x), x) for x in copy)
        elif type(original) is list:
            copy[:] = [fixed.get(id(x), x) for x in copy]
        else:
            for k in copy:
                copy[k] = fixed.get(id(copy[k]), copy[k])
    return fixed.get(id(root_copy), root_copy)


def pg_state_text(label: str, state: Any) -> str:
    """The JSON text a storage keeps of a decode_zodb_record_for_pg state; a Finding if it is not JSON."""
    try:
        text = json_text(state)
    except TypeError as exc:
        raise Finding(f"{label}: decode_zodb_record_for_pg gave a state that is not JSON: {exc}") from None
    if "NaN" in text or "Infinity" in text:
        # json.dumps spells them so; the pg variant must give {"@f": ...} instead
        stack = [state]
        while stack:
            v = stack.pop()
            if type(v) is float and not math.isfinite(v):
                raise Finding(f"{label}: decode_zodb_record_for_pg gave the float {v!r} (not JSON)")
            if type(v) is dict:
                stack.extend(v.values())
            elif type(v) is list:
                stack.extend(v)
    return text


def verbatim(value: Any) -> bool:
    """A whole record's state or a whole pickle given as {"@pkl": base64}: the encoders return those bytes."""
    return type(value) is dict and len(value) == 1 and type(value.get("@pkl")) is str


def tolerated_decode_error(message: str) -> bool:
    """Errors decoding what an encoder wrote that are no finding: depth (the encoders count levels
    otherwise than the decoders, docs/format.md "Nesting depth") and memo sharing over the budget."""
    return "depth" in message or "expansion budget" in message


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def pickle_end(data: bytes) -> Optional[int]:
    """Where the first pickle ends (just after its STOP), by pickletools, or None."""
    import pickletools
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for op, _, pos in pickletools.genops(io.BytesIO(data)):
                if op.name == "STOP":
                    return pos + 1
    except Exception:  # noqa: BLE001
        return None
    return None


def main(test_one_input: Callable[[bytes], None]) -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


__all__ = ["PY", "CY", "LANE", "Finding", "both", "call_py", "call_cy", "allowed", "same_outcome", "must_equal",
           "same_objects", "storable", "has_surrogate", "snapshot", "pg_state_text", "read_json", "json_text", "diff", "short", "b64",
           "pickle_end", "main", "verbatim", "tolerated_decode_error", "DECODERS", "ENCODERS", "List"]
