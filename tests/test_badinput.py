"""Bad input, for each twin: damaged records, hostile records, deep nesting, wrong argument types.

The rule (docs/api.md, docs/format.md "Nesting depth" and "Differences from
the Rust codec", Limits and Errors): every problem with the data is a
ValueError (with the byte offset for pickles); nothing else escapes -- no
RecursionError, MemoryError, IndexError, OverflowError, UnicodeError, no
crash, no hang.  Nesting beyond 1000 levels is a ValueError in every
direction, memo indices are sparse, declared lengths beyond the input fail
before allocating.

Whatever could crash the process (a Cython twin overflowing its C stack,
a runaway allocation) runs in a child interpreter (``_isolated``: the code
goes in on stdin, ``sys.executable -``), so that a crash fails the test
instead of killing pytest; where the platform allows, the child's address
space is capped, so that an allocation of a declared length cannot exhaust
the machine either.
"""

from __future__ import annotations

import base64
import collections
import io
import json
import os
import pickletools
import random
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, Iterable, List

import pytest

from corpus import row_record, vectors
from helpers import DECODERS, PICKLE_DECODERS, RECORD_DECODERS, same_records, slowdown
from strictcompare import diff
from zodb_json_codec._db import fidelity as _fidelity
from zodb_json_codec._jsonread import read_json

TESTS = Path(__file__).resolve().parent

CLASS_PICKLE = b"\x80\x03cpersistent.mapping\nPersistentMapping\nq\x00."


def rec(state_body: bytes) -> bytes:
    """A record: a ZODB class pickle, then a protocol 3 state pickle with this body."""
    return CLASS_PICKLE + b"\x80\x03" + state_body + b"."


def single(body: bytes) -> bytes:
    return b"\x80\x03" + body + b"."


# ---------------------------------------------------------------------------
# Running code in a child interpreter
# ---------------------------------------------------------------------------

_PRELUDE = f"""
import gc, json, os, reprlib, sys, time
try:
    import tracemalloc
except ImportError:  # PyPy has no tracemalloc: peak() measures the process's memory instead
    tracemalloc = None
try:
    import resource
except ImportError:  # not on Windows
    resource = None
sys.path.insert(0, {str(TESTS)!r})
if resource is not None and "libasan" not in os.environ.get("LD_PRELOAD", ""):
    # A runaway allocation becomes a MemoryError here, not the OOM killer's business.  (Under
    # AddressSanitizer, whose shadow memory needs more address space than that, scripts/asan-tests sets
    # ASan's malloc_limit_mb to the same 3 GiB instead.)
    _soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (min(3 << 30, _hard) if _hard > 0 else 3 << 30, _hard))
from zodb_json_codec import _impl
_dec, _enc = _impl.import_twin(sys.argv[1])
F = {{name: getattr(_dec, name) for name in _impl.DECODE_FUNCTIONS}}
F.update({{name: getattr(_enc, name) for name in _impl.ENCODE_FUNCTIONS}})
CLASS_PICKLE = {CLASS_PICKLE!r}
SLOWDOWN = float(sys.argv[2])  # helpers.slowdown(): times are given in the reference machine's seconds

def rec(body):
    return CLASS_PICKLE + b"\\x80\\x03" + body + b"."

def single(body):
    return b"\\x80\\x03" + body + b"."

def seconds_since(t):
    '''Seconds since perf_counter() was t, in the reference machine's seconds.'''
    return (time.perf_counter() - t) / SLOWDOWN

def outcome(fn, *args):
    '''[kind, detail, seconds]: kind "ok" or the exception type's name.'''
    t = time.perf_counter()
    try:
        value = fn(*args)
    except BaseException as exc:  # everything, to report it
        return [type(exc).__name__, str(exc)[:300], seconds_since(t)]
    elapsed = seconds_since(t)
    return ["ok", reprlib.repr(value)[:300], elapsed]  # a few levels: values may be 100 000 deep

def _proc_status(field):
    '''A size from /proc/self/status (Linux) in bytes, or None.'''
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError):
        pass
    return None

def _reset_peak_rss():
    '''Make VmHWM (the peak resident size) start again from the current size: Linux >= 4.0.'''
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True

def _maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 if resource else 0  # KiB on Linux

def peak(fn, *args):
    '''[outcome, peak bytes allocated while fn ran]

    The largest of: what tracemalloc saw (Python's allocators; CPython only,
    PyPy has no tracemalloc); how far the process's resident size rose
    above its size when fn started (VmHWM, reset first: any allocator, a
    Cython twin's or PyPy's, sees each call apart from the calls before
    it); how far the process's peak virtual size rose (VmPeak: memory
    reserved but never touched); and how far ru_maxrss rose (where /proc is
    missing -- blind below the peak the process, or the parent it was
    forked from, ever had).
    '''
    gc.collect()  # garbage freed during fn would otherwise make room for what fn allocates, unseen
    hwm_reset = _reset_peak_rss()
    hwm_before = _proc_status("VmHWM") if hwm_reset else None
    vm_before = _proc_status("VmPeak")
    rss_before = _maxrss()
    if tracemalloc is not None:
        tracemalloc.start()
    try:
        result = outcome(fn, *args)
        traced = tracemalloc.get_traced_memory()[1] if tracemalloc is not None else 0
    finally:
        if tracemalloc is not None:
            tracemalloc.stop()
    grown = [traced, _maxrss() - rss_before]
    hwm_after, vm_after = _proc_status("VmHWM"), _proc_status("VmPeak")
    if hwm_before is not None and hwm_after is not None:
        grown.append(hwm_after - hwm_before)
    if vm_before is not None and vm_after is not None:
        grown.append(vm_after - vm_before)
    return [result, max(grown)]

result = None
"""


def _isolated(impl, body: str, timeout: float = 120) -> Any:
    """Run body in a child interpreter with this twin's functions as F; returns its ``result``.  Its
    times (outcome, seconds_since) and the timeout are in the reference machine's seconds
    (helpers.slowdown)."""
    code = _PRELUDE + textwrap.dedent(body) + "\nprint('RESULT:' + json.dumps(result))\n"
    timeout *= slowdown()
    try:
        proc = subprocess.run([sys.executable, "-", impl.name, repr(slowdown())], input=code, capture_output=True,
                              text=True, timeout=timeout, cwd=str(TESTS))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child interpreter did not finish in {timeout:.0f} s (a hang)", pytrace=False)
    assert proc.returncode == 0, (
        f"the child interpreter died (exit status {proc.returncode}"
        f"{', signal ' + str(-proc.returncode) if proc.returncode < 0 else ''}):\n{proc.stderr[-4000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT:")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT:"):])


# ---------------------------------------------------------------------------
# (a) Damaged corpus records: truncations and random corruptions
# ---------------------------------------------------------------------------

def sample_records() -> List[bytes]:
    """A handful of public corpus records of different classes, 80 bytes to 2.5 kB."""
    picked: Dict[Any, bytes] = {}
    for row in vectors("public"):
        data = row_record(row)
        if not 80 <= len(data) <= 2500 or not row["pg_json"]:
            continue
        cls = tuple(row["pg_json"][:2])
        picked.setdefault(cls, data)
    return [picked[k] for k in sorted(picked)][:14]


def class_pickle_end(data: bytes) -> int:
    """Offset just after the first pickle's STOP."""
    f = io.BytesIO(data)
    for op, _, pos in pickletools.genops(f):
        if op.name == "STOP":
            return pos + 1
    raise AssertionError("no STOP")


def _call_all(functions, names, data, report, label):
    for name in names:
        t = time.perf_counter()
        try:
            functions[name](data)
        except ValueError as exc:
            kind = "ValueError"
            message = str(exc)
            if "offset" not in message:
                report["no_offset"].append([name, message[:200], base64.b64encode(data).decode()])
        except BaseException as exc:  # noqa: BLE001 - nothing but ValueError may escape
            kind = type(exc).__name__
            report["escaped"].append([name, f"{kind}: {str(exc)[:200]}", base64.b64encode(data).decode()])
        else:
            kind = "ok"
        elapsed = (time.perf_counter() - t) / slowdown()  # the reference machine's seconds
        report["counts"][f"{label} {name} {kind}"] += 1
        report["total_seconds"] += elapsed
        if elapsed > report["slowest"][0]:
            report["slowest"] = [elapsed, name, base64.b64encode(data).decode()]


def _new_report() -> dict:
    return {"counts": collections.Counter(), "escaped": [], "no_offset": [], "total_seconds": 0.0,
            "slowest": [0.0, None, None]}


def truncation_report(functions) -> dict:
    """Every strict prefix of each sample record, and of its state pickle, through every decoder."""
    report = _new_report()
    for data in sample_records():
        end = class_pickle_end(data)
        state = data[end:]
        for n in range(len(data)):
            # A strict prefix of a record never holds both pickles.
            _call_all(functions, RECORD_DECODERS, data[:n], report, "record-prefix")
            # The single-pickle functions read the first pickle: complete from `end` on.
            _call_all(functions, PICKLE_DECODERS, data[:n], report,
                      "record-prefix-with-class" if n >= end else "record-prefix-without-class")
        for n in range(len(state)):
            _call_all(functions, PICKLE_DECODERS, state[:n], report, "state-prefix")
    report["counts"] = dict(report["counts"])
    return report


# Opcodes worth splicing in: every one that reads a length, a memo index or
# changes the stack shape, and a few that do not exist.
_SPLICE_OPS = b"()]}tld\x85\x86\x87RbQP\x81\x92\x8f\x90\x91\x93\x94\x95ioqhrjgpXBCTUS\x8c\x8d\x8e\x8a\x8bsuae0122KJMGFILV\x80.\x82\x96\x97\x98\xff\x00"
_HUGE = [b"\xff\xff\xff\x7f", b"\xff\xff\xff\xff", b"\x00\x00\x00\x80", b"\xff\xff\xff\xff\xff\xff\xff\x7f",
         b"\xff\xff\xff\xff\xff\xff\xff\xff"]


def mutants(records: List[bytes], seed: int, count: int) -> Iterable[bytes]:
    """Deterministic random damage: byte flips, huge length fields, spliced opcodes, noise, splices."""
    rnd = random.Random(seed)
    for _ in range(count):
        d = bytearray(rnd.choice(records))
        kind = rnd.randrange(7)
        i = rnd.randrange(len(d))
        if kind == 0:  # flip a few bytes
            for _ in range(rnd.randint(1, 4)):
                d[rnd.randrange(len(d))] ^= 1 << rnd.randrange(8)
        elif kind == 1:  # a length field (or any 4/8 bytes) set huge
            huge = rnd.choice(_HUGE)
            d[i:i + len(huge)] = huge
        elif kind == 2:  # an opcode spliced in, with a huge or random argument
            d[i:i] = bytes([rnd.choice(_SPLICE_OPS)]) + rnd.choice(_HUGE + [b"", bytes([rnd.randrange(256)])])
        elif kind == 3:  # noise
            d[i:i + rnd.randint(1, 16)] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 16)))
        elif kind == 4:  # a piece of another record
            other = rnd.choice(records)
            j = rnd.randrange(len(other))
            d[i:i] = other[j:j + rnd.randint(1, 200)]
        elif kind == 5:  # a piece of itself, repeated
            j = rnd.randrange(len(d))
            d[i:i] = d[j:j + rnd.randint(1, 50)] * rnd.randint(1, 3)
        else:  # cut, and something after the cut
            d[i:] = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 8)))
        yield bytes(d)


def fuzz_report(functions, seed: int, count: int) -> dict:
    report = _new_report()
    records = sample_records()
    for data in mutants(records, seed, count):
        _call_all(functions, DECODERS, data, report, "record")
        end = data.find(b".\x80")  # the state pickle, roughly: exercise pickle_to_* on it too
        if end > 0:
            _call_all(functions, PICKLE_DECODERS, data[end + 1:], report, "state")
    report["counts"] = dict(report["counts"])
    return report


def fuzz_lossless_report(functions, seed: int, count: int) -> dict:
    """Mutants that still decode and that pickle itself can load must come back intact (nothing is lost)."""
    from zodb_json_codec import GlobalRefused

    report = {"checked": 0, "unloadable": 0, "incomparable": 0, "no_global": 0, "failures": []}
    for data in mutants(sample_records(), seed, count):
        try:
            decoded = functions["decode_zodb_record"](data)
        except ValueError:
            continue
        try:
            original = _fidelity.load_record(data)
        except Exception:  # noqa: BLE001 - damaged beyond what pickle loads: not a valid record
            report["unloadable"] += 1
            continue
        try:
            again = [functions["encode_zodb_record"](decoded)]
            try:
                module, name, text, _ = functions["decode_zodb_record_for_pg_json"](data)
            except ValueError as exc:  # a NUL in a class name: PostgreSQL cannot store it
                if "U+0000" not in str(exc) and "surrogate" not in str(exc):
                    raise
            else:
                again.append(functions["encode_zodb_record"]({"@cls": [module, name], "@s": read_json(text)}))
        except GlobalRefused as exc:
            if exc.allow_line is not None:  # a name no rule forbids: the standard policy must allow it
                report["failures"].append([f"GlobalRefused: {str(exc)[:200]}", base64.b64encode(data).decode()])
            else:  # damage that names no global that can exist (OFS>Image.Image): not a record ZODB can load
                report["no_global"] += 1
            continue
        except BaseException as exc:  # noqa: BLE001 - report everything
            report["failures"].append([f"{type(exc).__name__}: {str(exc)[:200]}",
                                       base64.b64encode(data).decode()])
            continue
        for path, encoded in zip(("dict", "json"), again):
            try:
                same = _fidelity.same(original, _fidelity.load_record(encoded))
            except Exception:  # noqa: BLE001 - values the comparison itself cannot handle
                report["incomparable"] += 1
                continue
            if not same:
                report["failures"].append([f"{path} path lost data", base64.b64encode(data).decode()])
        report["checked"] += 1
    return report


def _summary(report: dict) -> str:
    return json.dumps({k: report[k] for k in ("escaped", "no_offset", "slowest")}, indent=1)[:6000]


def test_every_truncation_raises_only_value_error(impl):
    report = _isolated(impl, """
        from test_badinput import truncation_report
        result = truncation_report(F)
    """, timeout=300)
    counts = report["counts"]
    assert report["escaped"] == [], _summary(report)
    assert report["no_offset"] == [], _summary(report)
    # No strict prefix of a record decodes; a prefix of a single pickle
    # decodes exactly when it holds the whole pickle.
    for name in RECORD_DECODERS:
        assert counts.get(f"record-prefix {name} ok", 0) == 0
        assert counts[f"record-prefix {name} ValueError"] > 1000
    for name in PICKLE_DECODERS:
        assert counts.get(f"state-prefix {name} ok", 0) == 0
        assert counts.get(f"record-prefix-without-class {name} ok", 0) == 0
        assert counts.get(f"record-prefix-with-class {name} ValueError", 0) == 0
        assert counts[f"record-prefix-with-class {name} ok"] > 500
    assert report["slowest"][0] < 1.0, _summary(report)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_corruptions_raise_only_value_error(impl, seed):
    count = 4000
    report = _isolated(impl, f"""
        from test_badinput import fuzz_report
        result = fuzz_report(F, {seed}, {count})
    """, timeout=300)
    counts = report["counts"]
    assert report["escaped"] == [], _summary(report)
    assert report["no_offset"] == [], _summary(report)
    assert report["slowest"][0] < 1.0, _summary(report)
    assert report["total_seconds"] < 60
    # The damage is varied enough: some mutants still decode, most do not.
    for name in DECODERS:
        ok = counts.get(f"record {name} ok", 0)
        errors = counts.get(f"record {name} ValueError", 0)
        assert ok + errors == count
        if name in RECORD_DECODERS:
            assert 0.02 * count < ok < 0.8 * count, (name, ok)
    for name in PICKLE_DECODERS:  # on the (damaged) state pickles
        ok = counts.get(f"state {name} ok", 0)
        errors = counts.get(f"state {name} ValueError", 0)
        assert 0.02 * count < ok and 0.2 * count < errors, (name, ok, errors)


def test_damaged_records_that_still_load_lose_nothing(impl):
    # Random damage that leaves a record pickle can load makes an unusual
    # but valid record: both paths must keep it intact.
    report = _isolated(impl, """
        from test_badinput import fuzz_lossless_report
        result = fuzz_lossless_report(F, 3, 6000)
    """, timeout=300)
    assert report["failures"] == [], json.dumps(report["failures"][:10], indent=1)
    assert report["checked"] > 300
    assert report["incomparable"] < 0.05 * report["checked"]


def test_the_fuzzer_finds_what_it_is_meant_to_find():
    # A decoder that raises something else, or a message without an offset, is reported.
    def bad(data):
        if len(data) % 2:
            raise IndexError("boom")
        raise ValueError("no position given")

    report = _new_report()
    _call_all({"pickle_to_dict": bad}, ["pickle_to_dict"], b"abc", report, "x")
    _call_all({"pickle_to_dict": bad}, ["pickle_to_dict"], b"ab", report, "x")
    assert [e[1] for e in report["escaped"]] == ["IndexError: boom"]
    assert [e[1] for e in report["no_offset"]] == ["no position given"]
    assert len(set(mutants(sample_records(), 1, 200))) > 190


# ---------------------------------------------------------------------------
# (b) Hostile records
# ---------------------------------------------------------------------------

def test_peak_sees_what_is_allocated():
    # peak() stands behind the "without allocating" checks below, and on
    # PyPy (no tracemalloc) only the process's own sizes feed it: it must see
    # an allocation of the size they forbid, apart from garbage freed before,
    # and report next to nothing for a small decode.
    result = _isolated(SimpleNamespace(name="python"), r"""
        result = {"small decode": peak(F["pickle_to_dict"], single(b"K\x07"))[1]}
        for name, make in [("bytearray", lambda: len(bytearray(64 << 20))),
                           ("list", lambda: len([0] * (8 << 20))),  # 64 MiB of pointers
                           ("bytes", lambda: len(b"x" * (64 << 20)))]:
            result[name] = peak(make)[1]
            result[name + " again"] = peak(make)[1]  # the first one's memory is garbage by now
    """)
    assert result.pop("small decode") < 1 << 20, result
    for name, peak_bytes in result.items():
        assert peak_bytes >= 60 << 20, (name, result)


def test_memo_index_2_31_decodes_without_allocating(impl):
    result = _isolated(impl, r"""
        result = {}
        for idx in (b"\xff\xff\xff\x7f", b"\xff\xff\xff\xff"):
            body = b"K\x07r" + idx + b"0j" + idx  # 7, LONG_BINPUT idx, POP, LONG_BINGET idx
            result[idx.hex() + " record"] = peak(F["decode_zodb_record"], rec(body))
            result[idx.hex() + " pg_json"] = peak(F["decode_zodb_record_for_pg_json"], rec(body))
            result[idx.hex() + " single"] = peak(F["pickle_to_dict"], single(body))
        # PUT/GET with a decimal index far beyond any table
        body = b"K\x07p99999999999999999999\n0g99999999999999999999\n"
        result["text record"] = peak(F["decode_zodb_record"], rec(body))
        result["text single"] = peak(F["pickle_to_dict"], single(body))
    """)
    want = {"record": repr({"@cls": ["persistent.mapping", "PersistentMapping"], "@s": 7}),
            "pg_json": repr(("persistent.mapping", "PersistentMapping", "7", [])),
            "single": "7"}
    assert len(result) == 8
    for key, ((kind, detail, seconds), peak_bytes) in result.items():
        assert kind == "ok", (key, detail)
        assert detail == want[key.split()[-1]], (key, detail)
        assert peak_bytes < 8 << 20, (key, peak_bytes)
        assert seconds < 1.0


def test_200000_memo_entries_decode(impl):
    # The Rust codec refuses more than 100 000 memo entries; we decode any number
    # (docs/format.md, "Differences from the Rust codec", Limits).
    result = _isolated(impl, r"""
        import struct
        n = 200000
        body = b"](" + b"".join(b"M" + struct.pack("<H", i % 65536) + b"r" + struct.pack("<I", i)
                                for i in range(n))
        body += b"e" + b"j" + struct.pack("<I", n - 1) + b"a" + b"j" + struct.pack("<I", 0) + b"a"
        t = time.perf_counter()
        value = F["decode_zodb_record"](rec(body))["@s"]
        _, _, text, _ = F["decode_zodb_record_for_pg_json"](rec(body))
        single_value = F["pickle_to_dict"](single(body))
        result = [len(value), value[:2], value[-3:], seconds_since(t),
                  json.loads(text) == value, single_value == value]
    """)
    length, head, tail, seconds, same_json, same_single = result
    assert length == 200002
    assert head == [0, 1] and tail == [(200000 - 1) % 65536, (200000 - 1) % 65536, 0]
    assert same_json and same_single
    assert seconds < 20


def test_huge_integers_do_not_take_quadratic_time(impl):
    # A record holding one big integer (LONG4) is a valid pickle; writing
    # its @bi text, and reading that text back, must not take time
    # quadratic in its size ("no hang").  CPython 3.11's own int <-> str
    # refuses such sizes (sys.int_max_str_digits) for exactly this reason;
    # the codec converts them itself.  Here 300 kB (722 000 digits): chunked
    # conversion takes about 4 s for it (a 1 MB record about 45 s, 16 MB
    # hours); divide and conquer with decimal arithmetic takes well under 1 s.
    result = _isolated(impl, r"""
        import struct
        n = 300_000
        data = rec(b"\x8b" + struct.pack("<i", n) + b"\x11" * n)
        result = {"decode_zodb_record": outcome(F["decode_zodb_record"], data)}
        digits = "7" * 722_000
        result["encode_zodb_record"] = outcome(F["encode_zodb_record"], {"@cls": ["m", "C"], "@s": {"@bi": digits}})
        result["json_to_pickle"] = outcome(F["json_to_pickle"], '{"@bi": "' + digits + '"}')
    """, timeout=60)
    for fn, (kind, detail, seconds) in result.items():
        assert kind in ("ok", "ValueError", "CodecError"), (fn, kind, detail)
        assert seconds < 2, (fn, seconds)


# name, state body with a declared length far beyond the input
HUGE_LENGTHS = {
    "BINUNICODE 0xffffffff": b"X\xff\xff\xff\xffabc",
    "BINBYTES 0xffffffff": b"B\xff\xff\xff\xffabc",
    "BINSTRING 0x7fffffff": b"T\xff\xff\xff\x7fabc",
    "BINUNICODE8 2**63": b"\x8d" + struct.pack("<Q", 2**63) + b"abc",
    "BINUNICODE8 2**64-1": b"\x8d" + struct.pack("<Q", 2**64 - 1) + b"abc",
    "BINBYTES8 2**63": b"\x8e" + struct.pack("<Q", 2**63) + b"abc",
    "BYTEARRAY8 2**63": b"\x96" + struct.pack("<Q", 2**63) + b"abc",
    "LONG4 0x7fffffff": b"\x8b\xff\xff\xff\x7f" + b"\x01" * 8,
    "LONG4 negative": b"\x8b\x00\x00\x00\x80" + b"\x01" * 8,
    "BINSTRING negative": b"T\x00\x00\x00\x80abc",
    "SHORT_BINUNICODE 255": b"\x8c\xffabc",
    "LONG1 255": b"\x8a\xff" + b"\x01" * 8,
    "FRAME then BINUNICODE": b"\x95" + struct.pack("<Q", 2**62) + b"X\xff\xff\xff\xffabc",
}


def test_huge_declared_lengths_fail_fast_without_allocating(impl):
    result = _isolated(impl, """
        from test_badinput import HUGE_LENGTHS
        result = {}
        for case, body in HUGE_LENGTHS.items():
            for fn in ("decode_zodb_record", "decode_zodb_record_for_pg", "decode_zodb_record_for_pg_json"):
                result[f"{case}: {fn}"] = peak(F[fn], rec(body))
            for fn in ("pickle_to_dict", "pickle_to_json"):
                result[f"{case}: {fn}"] = peak(F[fn], single(body))
    """)
    assert len(result) == 5 * len(HUGE_LENGTHS)
    for case, ((kind, message, seconds), peak_bytes) in result.items():
        assert kind in ("ValueError", "CodecError"), (case, kind, message)
        assert "offset" in message, (case, message)
        assert peak_bytes < 8 << 20, (case, peak_bytes)
        assert seconds < 1.0, (case, seconds)


def _nested(shape: str, n: int) -> bytes:
    """A pickle body of n nested containers of one shape, innermost None."""
    prefix, suffix = NEST[shape]
    return prefix * n + b"N" + suffix * n


NEST = {
    "list": (b"]", b"a"),
    "list (MARK/APPENDS)": (b"](", b"e"),
    "tuple": (b"", b"\x85"),
    "tuple (MARK/TUPLE)": (b"(", b"t"),
    "dict": (b"}X\x01\x00\x00\x00k", b"s"),
    "dict (MARK/DICT)": (b"(X\x01\x00\x00\x00k", b"d"),
    "dict with int keys": (b"}K\x01", b"s"),
    "dict with tuple keys": (b"}K\x01K\x02\x86", b"s"),
    "frozenset": (b"cbuiltins\nfrozenset\n]", b"a\x85R"),
    "instance": (b"czodbapp\nPlain\n)\x81}X\x01\x00\x00\x00a", b"sb"),
    "reduce": (b"cmod\nfunc\n", b"\x85R"),
}
DEEP_SHAPES = ["list", "list (MARK/APPENDS)", "tuple", "tuple (MARK/TUPLE)", "dict", "dict (MARK/DICT)",
               "dict with int keys", "dict with tuple keys", "frozenset", "instance", "reduce"]

_DEEP_DECODE = r"""
    result = {}
    for fn in ("decode_zodb_record", "decode_zodb_record_for_pg", "decode_zodb_record_for_pg_json"):
        result[fn] = outcome(F[fn], rec(body))
    for fn in ("pickle_to_dict", "pickle_to_json"):
        result[fn] = outcome(F[fn], single(body))
"""


def _assert_all_value_errors(result: dict, limit: float = 10.0) -> None:
    for fn, (kind, message, seconds) in result.items():
        assert kind in ("ValueError", "CodecError"), (fn, kind, message)
        assert "depth" in message, (fn, message)
        assert seconds < limit, (fn, seconds)


@pytest.mark.slow
@pytest.mark.parametrize("shape", DEEP_SHAPES)
def test_100000_deep_pickles_are_value_errors(impl, shape):
    # Lists, tuples and dicts 100 000 deep (the reference crashes at 200 000);
    # the costlier shapes 20 000 deep, still far beyond any recursion limit.
    n = 100000 if shape in ("list", "list (MARK/APPENDS)", "tuple", "tuple (MARK/TUPLE)", "dict") else 20000
    result = _isolated(impl, f"from test_badinput import _nested\nbody = _nested({shape!r}, {n})\n"
                       + textwrap.dedent(_DEEP_DECODE))
    _assert_all_value_errors(result)


def test_100000_nested_persistent_references_are_a_value_error(impl):
    # BINPERSID on the result of BINPERSID: CPython's unpickler takes it
    # (persistent_load of a loaded reference).  The value is 100 000 levels
    # deep like any other: a ValueError (docs/format.md, "Nesting depth"), not a value that
    # json.dumps or the encoders then fail on.
    result = _isolated(impl, 'body = b"N" + b"Q" * 100000\n' + textwrap.dedent(_DEEP_DECODE))
    _assert_all_value_errors(result)


def test_deep_pickle_with_a_shared_list_is_a_value_error_not_verbatim(impl):
    # A list memoized, fetched again (BINGET) and then filled: the decoder
    # must check the graph for cycles.  5000 or 100 000 levels deep it is
    # still nesting beyond 1000 levels, a ValueError (docs/format.md, "Nesting
    # depth"), as it is at 2000 levels -- not a "valid record JSON cannot
    # carry" (docs/format.md, "The verbatim fallback (`@pkl`)").
    result = _isolated(impl, r"""
        result = {}
        for n in (2000, 5000, 100000):
            body = b"]q\x01h\x010" + b"]" * n + b"a" * n
            for fn in ("decode_zodb_record", "decode_zodb_record_for_pg_json"):
                result[f"{n} {fn}"] = outcome(F[fn], rec(body))
            result[f"{n} pickle_to_dict"] = outcome(F["pickle_to_dict"], single(body))
    """)
    _assert_all_value_errors(result)


def test_mark_bomb_is_harmless(impl):
    result = _isolated(impl, r"""
        result = [outcome(F["decode_zodb_record"], rec(b"(" * 200000 + b"K\x01")),
                  outcome(F["pickle_to_json"], single(b"(" * 200000 + b"K\x01"))]
    """)
    for kind, detail, seconds in result:
        assert kind in ("ok", "ValueError", "CodecError"), detail
        assert seconds < 10


def _deep_python(kind: str, n: int) -> Any:
    leaf: Any = 1
    for _ in range(n):
        if kind == "list":
            leaf = [leaf]
        elif kind == "dict":
            leaf = {"k": leaf}
        elif kind == "tuple":
            leaf = (leaf,)
        elif kind == "frozenset":
            leaf = frozenset([leaf])
        elif kind == "@t":
            leaf = {"@t": [leaf]}
        elif kind == "@d":
            leaf = {"@d": [[1, leaf]]}
        elif kind == "@set":
            leaf = {"@fset": [leaf]}
        elif kind == "@reduce":
            leaf = {"@reduce": {"callable": {"@cls": ["m", "f"]}, "args": {"@t": [leaf]}}}
        elif kind == "@ref":
            leaf = {"@ref": leaf}
        elif kind == "instance":
            leaf = {"@cls": ["m", "C"], "@s": leaf}
        elif kind == "@items":
            leaf = {"@cls": ["m", "D"], "@s": None, "@items": [["k", leaf]]}
        else:
            raise AssertionError(kind)
    return leaf


ENCODE_SHAPES = ["list", "dict", "tuple", "frozenset", "@t", "@d", "@set", "@reduce", "@ref", "instance", "@items"]
JSON_ENCODE_SHAPES = [kind for kind in ENCODE_SHAPES if kind not in ("tuple", "frozenset")]


@pytest.mark.slow
def test_encoding_100000_deep_values_is_a_value_error(impl):
    result = _isolated(impl, """
        from deepvalues import json_text
        from test_badinput import ENCODE_SHAPES, JSON_ENCODE_SHAPES, _deep_python
        result = {}
        for kind in ENCODE_SHAPES:
            value = _deep_python(kind, 100000)
            result[f"{kind}: encode_zodb_record"] = outcome(F["encode_zodb_record"], {"@cls": ["m", "C"], "@s": value})
            result[f"{kind}: dict_to_pickle"] = outcome(F["dict_to_pickle"], {"v": value})
            if kind in JSON_ENCODE_SHAPES:
                result[f"{kind}: json_to_pickle"] = outcome(F["json_to_pickle"], json_text(value))
    """)
    assert len(result) == 2 * len(ENCODE_SHAPES) + len(JSON_ENCODE_SHAPES)
    _assert_all_value_errors(result)


def test_json_to_pickle_of_100000_levels_is_a_value_error(impl):
    result = _isolated(impl, """
        texts = {"arrays": "[" * 100000 + "]" * 100000,
                 "objects": '{"a":' * 100000 + "1" + "}" * 100000,
                 "@t": '{"@t":[' * 100000 + "1" + "]}" * 100000,
                 "unclosed": "[" * 100000}
        result = {name: outcome(F["json_to_pickle"], text) for name, text in texts.items()}
    """)
    for name, (kind, message, seconds) in result.items():
        assert kind in ("ValueError", "CodecError"), (name, kind, message)
        assert seconds < 10


# As the Rust codec counts depth (docs/format.md, "Nesting depth"): the root is
# depth 0, each container's children one deeper, deeper than 1000 fails: 1001
# nested containers decode, 1002 do not.
BOUNDARY_SHAPES = ["list", "list (MARK/APPENDS)", "tuple", "tuple (MARK/TUPLE)", "dict", "dict (MARK/DICT)",
                   "dict with int keys", "dict with tuple keys", "frozenset"]


# Containers below the innermost one of a shape: a tuple key is one more level.
EXTRA_LEVELS = {"dict with tuple keys": 1}


@pytest.mark.parametrize("shape", BOUNDARY_SHAPES)
def test_1001_nested_containers_decode_and_1002_do_not(impl, shape):
    n = 1001 - EXTRA_LEVELS.get(shape, 0)
    calls = [(fn, rec) for fn in RECORD_DECODERS] + [(fn, single) for fn in PICKLE_DECODERS]
    for fn, wrap in calls:
        getattr(impl, fn)(wrap(_nested(shape, n)))  # 1001 levels decode
        with pytest.raises(ValueError, match="depth"):
            getattr(impl, fn)(wrap(_nested(shape, n + 1)))  # 1002 do not


def _objects_nested_through_their_items(n: int) -> bytes:
    """n objects, each holding the next as the value of a dict item (SETITEM on the object).

    Class and arguments come from the memo, so NEWOBJ is the only container
    opcode per object, and it makes three levels: the object, the list of
    its items, the item pair.
    """
    return b")q\x000cmm\nC\nq\x010" + b"h\x01h\x00\x81K\x01" * n + b"N" + b"s" * n


def test_objects_nested_through_their_items_are_three_levels_each(impl):
    # 333 objects are 999 levels deep (the innermost None at 1000): they
    # decode; 334 are 1002 levels, deeper than 1000 in every decoder.
    for fn in RECORD_DECODERS:
        getattr(impl, fn)(rec(_objects_nested_through_their_items(333)))
        with pytest.raises(ValueError, match="depth"):
            getattr(impl, fn)(rec(_objects_nested_through_their_items(334)))
    for fn in PICKLE_DECODERS:
        getattr(impl, fn)(single(_objects_nested_through_their_items(333)))
        with pytest.raises(ValueError, match="depth"):
            getattr(impl, fn)(single(_objects_nested_through_their_items(334)))
    value = impl.pickle_to_dict(single(_objects_nested_through_their_items(333)))
    assert diff(impl.pickle_to_dict(impl.dict_to_pickle(value)), value) is None
    assert diff(impl.pickle_to_dict(impl.json_to_pickle(impl.pickle_to_json(single(
        _objects_nested_through_their_items(333))))), value) is None


def _objects_nested_above_a_reference(n: int) -> bytes:
    """_objects_nested_through_their_items with ZODB's reference (TUPLE2, BINPUT, BINPERSID) innermost."""
    ref = b"C\x08" + b"\x00" * 7 + b"\x01q\x02cmod\nKls\nq\x03\x86q\x04Q"
    return _objects_nested_through_their_items(n).replace(b"N", ref, 1)


def test_a_reference_at_the_bottom_of_the_deepest_objects(impl):
    # The compiled decoder does not count a reference it reads in one step as a container (it allows two
    # levels for it instead): the deepest value it takes must stay the Python twin's.  Under 333 objects
    # the record's compact {"@ref": [oid, class]} is within 1000 levels, under 334 it is not; a single
    # pickle's verbose reference (the pid tuple kept) is a level deeper.
    for fns, wrap, deepest in ((RECORD_DECODERS, rec, 333), (PICKLE_DECODERS, single, 332)):
        for fn in fns:
            getattr(impl, fn)(wrap(_objects_nested_above_a_reference(deepest)))
            with pytest.raises(ValueError, match="depth"):
                getattr(impl, fn)(wrap(_objects_nested_above_a_reference(deepest + 1)))


@pytest.mark.slow
@pytest.mark.parametrize("shape", BOUNDARY_SHAPES)
def test_the_deepest_decodable_record_encodes_back(impl, shape, pg_dsn):
    # Whatever decodes must encode back to the same objects (nothing is lost):
    # the encoders' depth limit may not be stricter than the decoder's.
    from pgjsonb import record_after_jsonb

    depth = _deepest(lambda n: _decodes(impl, rec(_nested(shape, n))))
    data = rec(_nested(shape, depth))
    again = impl.encode_zodb_record(impl.decode_zodb_record(data))
    assert same_records(data, again)
    again = record_after_jsonb(impl, data, pg_dsn)
    assert same_records(data, again)
    single_data = single(_nested(shape, depth))
    again = impl.json_to_pickle(impl.pickle_to_json(single_data))
    assert _fidelity.same(_fidelity.Loader(io.BytesIO(single_data)).load(),
                          _fidelity.Loader(io.BytesIO(again)).load())


# Leaves at the bottom of the deepest decodable list nesting.
PAYLOADS = {
    "None": b"N",
    "frozenset": b"cbuiltins\nfrozenset\n]K\x01a\x85R",
    "weak reference": b"X\x01\x00\x00\x00wC\x08\x00\x00\x00\x00\x00\x00\x00\x01\x85\x86Q",
    "oid-only reference": b"C\x08\x00\x00\x00\x00\x00\x00\x00\x01Q",
    "reference with class": b"C\x08\x00\x00\x00\x00\x00\x00\x00\x01cmod\nKls\n\x86Q",
    "dict with an int key": b"}K\x01K\x02s",
    "tuple": b"K\x01\x85",
    "datetime with offset": (b"cdatetime\ndatetime\nC\n\x07\xe9\x01\x02\x03\x04\x05\x00\x00\x00"
                             b"cdatetime\ntimezone\ncdatetime\ntimedelta\nK\x00M\x10\x0eK\x00\x87R\x85R\x86R"),
    "instance": b"czodbapp\nPlain\n)\x81}X\x01\x00\x00\x00aK\x01sb",
    "reduce": b"cmod\nfunc\nK\x01\x85R",
    "big int": b"\x8a\x09" + b"\x00" * 8 + b"\x01",
    "nan": b"G\x7f\xf8\x00\x00\x00\x00\x00\x00",
    "NUL text": b"X\x01\x00\x00\x00\x00",
}


def _deepest(decodes, top: int = 1002) -> int:
    """The largest n in [1, top] for which decodes(n) holds (it holds up to some n, then fails)."""
    assert decodes(1)
    if decodes(top):
        return top
    low, high = 1, top  # decodes(low), not decodes(high)
    while high - low > 1:
        mid = (low + high) // 2
        if decodes(mid):
            low = mid
        else:
            high = mid
    return low


def _decodes(impl, data: bytes) -> bool:
    try:
        impl.decode_zodb_record(data)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("payload", list(PAYLOADS))
def test_whatever_decodes_at_the_depth_limit_encodes_back(impl, payload):
    # Wrap the payload in as many lists as the decoder takes (about 1000):
    # the encoders must take the decoded value, and give the same objects.
    def data(n: int) -> bytes:
        return rec(b"]" * n + PAYLOADS[payload] + b"a" * n)

    n = _deepest(lambda n: _decodes(impl, data(n)))
    assert n >= 995, n  # the payload itself is one or two levels
    decoded = impl.decode_zodb_record(data(n))
    again = impl.encode_zodb_record(decoded)
    assert same_records(data(n), again)
    module, name, text, _ = impl.decode_zodb_record_for_pg_json(data(n))
    again = impl.encode_zodb_record({"@cls": [module, name], "@s": read_json(text)})
    assert same_records(data(n), again)


def test_reduce_of_os_system_decodes_to_a_marker_and_runs_nothing(impl, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    calls = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
    command = f"touch {marker}".encode()
    gadgets = [
        b"cos\nsystem\nX" + struct.pack("<I", len(command)) + command + b"\x85R",
        b"cposix\nsystem\nX" + struct.pack("<I", len(command)) + command + b"\x85R",
        b"cbuiltins\neval\nX\x1c\x00\x00\x00__import__('os').system('id')\x85R",
        b"csubprocess\ncall\nX\x04\x00\x00\x00true\x85R",
        b"czodb_codec_never_imported\nGadget\n)\x81}b",
        b"cthis\ns\n)R",  # an existing module that prints when imported
    ]
    this_before = "this" in sys.modules
    for gadget in gadgets:
        for fn in RECORD_DECODERS:
            getattr(impl, fn)(rec(gadget))
        for fn in PICKLE_DECODERS:
            getattr(impl, fn)(single(gadget))
    assert calls == [] and not marker.exists()
    assert "zodb_codec_never_imported" not in sys.modules
    assert ("this" in sys.modules) == this_before
    decoded = impl.decode_zodb_record(rec(gadgets[0]))["@s"]
    assert decoded == {"@reduce": {"callable": {"@cls": ["os", "system"]},
                                   "args": {"@t": [command.decode()]}}}
    # The encoders refuse to write it back (docs/security.md); without the globals policy, they write the same
    # REDUCE, still without running it.
    from zodb_json_codec import GlobalRefused, GlobalsPolicy

    with pytest.raises(GlobalRefused, match="'os.system' refused as CALL"):
        impl.encode_zodb_record(impl.decode_zodb_record(rec(gadgets[0])))
    with pytest.warns(RuntimeWarning):
        anything = GlobalsPolicy("unrestricted")
    again = impl.encode_zodb_record(impl.decode_zodb_record(rec(gadgets[0])), policy=anything)
    assert same_records(rec(gadgets[0]), again)
    assert calls == [] and not marker.exists()


# ---------------------------------------------------------------------------
# (c) Decoding errors name the offset
# ---------------------------------------------------------------------------

# state body, offset (within the state pickle's body) the message must name
OFFSET_CASES = {
    "unknown opcode": (b"K\x01\xff", 2),
    "unknown opcode after a string": (b"X\x03\x00\x00\x00abc\x00", 8),
    "stack underflow (TUPLE2)": (b"K\x01\x86", 2),
    "stack underflow (SETITEM)": (b"}K\x01s", 3),
    "APPEND to an int": (b"K\x01K\x02a", 4),
    "invalid UTF-8": (b"K\x01X\x02\x00\x00\x00\xff\xfe", 2),
    "memo index not found": (b"K\x01h\x05", 2),
    "odd number of dict items": (b"}(K\x01u", 4),
    "no MARK for TUPLE": (b"K\x01t", 2),
    "no MARK for SETITEMS": (b"}K\x01K\x02u", 5),
    "no MARK for APPENDS": (b"]K\x01e", 3),
    "negative BINSTRING length": (b"T\xff\xff\xff\xffabc", 0),
    "STACK_GLOBAL of an int": (b"K\x01K\x02\x93", 4),
    "unsupported protocol": (b"\x80\x09N", 0),
}


@pytest.mark.parametrize("case", list(OFFSET_CASES))
def test_decoding_errors_name_the_offset(impl, case):
    body, at = OFFSET_CASES[case]
    for fn, data, base in [(fn, rec(body), len(CLASS_PICKLE) + 2) for fn in RECORD_DECODERS] + \
                          [(fn, single(body), 2) for fn in PICKLE_DECODERS]:
        with pytest.raises(ValueError) as info:
            getattr(impl, fn)(data)
        message = str(info.value)
        assert f"offset {base + at}" in message, (fn, message)


@pytest.mark.parametrize("case", [c for c in OFFSET_CASES if c.startswith("no MARK for ")])
def test_a_missing_mark_names_the_opcode(impl, case):
    """SETITEMS and APPENDS share one handler in the compiled twin: each still says which it was."""
    with pytest.raises(ValueError, match=f"pickle stack underflow \\({case}\\)"):
        impl.decode_zodb_record(rec(OFFSET_CASES[case][0]))


def _one_key_dict(key: str, value_ops: bytes) -> bytes:
    """Pickle ops building {key: value}: a user dict that looks like a marker without being one."""
    raw = key.encode()
    return b"}X" + struct.pack("<I", len(raw)) + raw + value_ops + b"s"


OID_1 = b"C\x08\x00\x00\x00\x00\x00\x00\x00\x01"

# Dicts of a marker's key but not its value type stay plain dicts; used where
# the decoder expects a class, bytes or a tuple they must not break it.
LOOKALIKE_CASES = {
    "REDUCE of {'@cls': 5}": _one_key_dict("@cls", b"K\x05") + b")R",
    "REDUCE of {'@cls': [1, 2]}": _one_key_dict("@cls", b"]K\x01K\x02\x86e") + b")R",
    "reference ({'@b': 5}, None)": _one_key_dict("@b", b"K\x05") + b"N\x86Q",
    "reference (oid, {'@cls': 5})": OID_1 + _one_key_dict("@cls", b"K\x05") + b"\x86Q",
    "reference {'@t': 5}": _one_key_dict("@t", b"K\x05") + b"Q",
    "datetime of {'@b': 5}": b"cdatetime\ndatetime\n" + _one_key_dict("@b", b"K\x05") + b"\x85R",
    "NEWOBJ of {'@cls': 5} then BUILD": _one_key_dict("@cls", b"K\x05") + b")\x81}b",
}


@pytest.mark.parametrize("case", list(LOOKALIKE_CASES))
def test_marker_lookalike_dicts_decode_without_type_errors(impl, case):
    # Found while building the Cython twin: both twins unpacked such dicts
    # as if they were markers and raised TypeError.
    body = LOOKALIKE_CASES[case]
    for fn, data in [(fn, rec(body)) for fn in RECORD_DECODERS] + [(fn, single(body)) for fn in PICKLE_DECODERS]:
        try:
            getattr(impl, fn)(data)
        except ValueError:
            pass  # a refusal is fine; any other exception type is the bug


@pytest.mark.parametrize("case", ["first pickle too deep", "NUL in the class name", "too deep"])
def test_record_level_errors_name_an_offset(impl, case):
    # Errors found after the opcodes were read (how deep the first pickle's
    # value is, what PostgreSQL can store, how deep the state is) still name
    # the offset of the pickle they are about (docs/api.md: every error says
    # what is wrong and where, the byte offset in a pickle).
    if case == "first pickle too deep":  # an object record (not class metadata): kept, so checked
        data, functions = single(_nested("list", 1100)) + single(b"N"), RECORD_DECODERS
    elif case == "NUL in the class name":
        data, functions = b"\x80\x03cmod\x00\nKls\n." + single(b"N"), RECORD_DECODERS[1:]
    else:
        data, functions = rec(_nested("list", 1100)), RECORD_DECODERS
    for fn in functions:
        with pytest.raises(ValueError, match="offset"):
            getattr(impl, fn)(data)


def test_truncation_names_an_offset_inside_the_input(impl):
    data = rec(b"X\x05\x00\x00\x00hello")
    for n in range(len(data)):
        with pytest.raises(ValueError) as info:
            impl.decode_zodb_record(data[:n])
        message = str(info.value)
        assert "offset" in message
        offset = int(message.rsplit("offset", 1)[1].split()[0].strip(":,)"))
        assert 0 <= offset <= n, (n, message)


# ---------------------------------------------------------------------------
# (d) Argument types
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", DECODERS)
@pytest.mark.parametrize("argument", ["text", 7, None, [1], 1.5], ids=["str", "int", "None", "list", "float"])
def test_decoders_refuse_other_types_naming_them(impl, fn, argument):
    with pytest.raises(TypeError) as info:
        getattr(impl, fn)(argument)
    assert type(argument).__name__ in str(info.value)


@pytest.mark.parametrize("fn", DECODERS)
def test_decoders_take_bytes_bytearray_and_memoryview(impl, fn):
    data = rec(b"}X\x01\x00\x00\x00aK\x01s") if fn in RECORD_DECODERS else single(b"}X\x01\x00\x00\x00aK\x01s")
    want = getattr(impl, fn)(data)
    padded = b"xx" + data + b"yy"
    for variant in (bytearray(data), memoryview(data), memoryview(bytearray(data)), memoryview(padded)[2:-2]):
        assert getattr(impl, fn)(variant) == want, type(variant).__name__
    # keyword name as in the reference
    assert getattr(impl, fn)(data=data) == want


@pytest.mark.parametrize("argument", ["text", b"bytes", 7, None, [1], ("a", "b")],
                         ids=["str", "bytes", "int", "None", "list", "tuple"])
@pytest.mark.parametrize("fn", ["encode_zodb_record", "dict_to_pickle"])
def test_dict_encoders_refuse_non_dicts_naming_the_type(impl, fn, argument):
    with pytest.raises(TypeError) as info:
        getattr(impl, fn)(argument)
    assert type(argument).__name__ in str(info.value)


@pytest.mark.parametrize("argument", [b"{}", bytearray(b"{}"), 7, None, {"a": 1}, ["x"]],
                         ids=["bytes", "bytearray", "int", "None", "dict", "list"])
def test_json_to_pickle_refuses_non_str_naming_the_type(impl, argument):
    with pytest.raises(TypeError) as info:
        impl.json_to_pickle(argument)
    assert type(argument).__name__ in str(info.value)


class _Secretive:
    def __str__(self):
        return "SECRET-TEXT"

    __repr__ = __str__


@pytest.mark.parametrize("value", [_Secretive(), object(), complex(1, 2), range(3), lambda: 1, Ellipsis],
                         ids=["custom", "object", "complex", "range", "function", "ellipsis"])
def test_unencodable_values_are_type_errors_naming_the_type(impl, value):
    for call in (lambda: impl.encode_zodb_record({"@cls": ["m", "C"], "@s": {"x": [value]}}),
                 lambda: impl.dict_to_pickle({"x": (value,)})):
        with pytest.raises(TypeError) as info:
            call()
        message = str(info.value)
        assert type(value).__name__ in message
        assert "SECRET-TEXT" not in message


@pytest.mark.parametrize("text", ["", "{", "[1,]", "NaN", "[Infinity]", '{"a": 1} x', '"\\ud800', "\x00"])
def test_bad_json_is_a_value_error(impl, text):
    with pytest.raises(ValueError):
        impl.json_to_pickle(text)


@pytest.mark.parametrize("obj", [
    {"@s": 1}, {"@cls": "mod.Name", "@s": 1}, {"@cls": ["m"], "@s": 1}, {"@cls": ["m", 1], "@s": 1},
    {"@cls": ("m", "C"), "@s": 1},
    {"@cls": ["m", "C"], "@s": {"@ref": ["zz", "m.C"]}},
])
def test_malformed_records_are_value_errors(impl, obj):
    with pytest.raises(ValueError):
        impl.encode_zodb_record(obj)


@pytest.mark.parametrize("marker", [
    {"@b": "not base64!"}, {"@b": "YQ"}, {"@dt": "yesterday"}, {"@date": "20250101"}, {"@uuid": "xyz"},
    {"@bi": "12a"}, {"@td": [1, 2, "3"]}, {"@f": "NaNa"}, {"@dt": "2025-01-01T00:00:00", "@tz": {"x": 1}},
    {"@d": [[1, 2, 3]]}, {"@ns": "////"}, {"@reduce": {"callable": None}},
], ids=lambda m: json.dumps(m)[:40])
def test_malformed_markers_are_value_errors(impl, marker):
    with pytest.raises(ValueError):
        impl.encode_zodb_record({"@cls": ["m", "C"], "@s": {"x": marker}})
    with pytest.raises(ValueError):
        impl.dict_to_pickle({"x": marker})
    with pytest.raises(ValueError):
        impl.json_to_pickle(json.dumps({"x": marker}))
