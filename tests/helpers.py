"""Helpers the test modules share, each written once.

- ``DECODERS`` / ``RECORD_DECODERS`` / ``PICKLE_DECODERS`` / ``ENCODERS``:
  the public function names a twin has (tests/twinloader.py loads them).
- ``Ref`` / ``record``: a ZODB record (class pickle then state pickle, one pickler
  for both, as ZODB's ObjectWriter does).
- ``same_records``: the "same objects" comparison of two records
  (what ``zodb-json-codec verify`` uses; tests/test_fidelity.py tests it).
- ``PATHS`` / ``records_back``: a record through one of the three ways a
  storage keeps it (the dict, the dict variant for PostgreSQL stored with
  json.dumps, the JSON text) and encoded back.
- ``cli``: the command line in a child process.
- ``large_text_records``: records whose strings are long (kilobytes of text with
  non-ASCII, escapes, U+0000, lone surrogates) in every place a string can be.
- ``UTF8_SEQUENCES`` / ``utf8_texts``: byte sequences that strict UTF-8 takes
  or refuses, at every position around the 16-byte blocks the compiled
  twins check at once.
- ``ODD_CHARACTERS`` / ``THREE_BYTE_RUN`` / ``NOT_THREE_BYTE``: characters to
  put at every place of a str, for the blocks in which the compiled twins
  make a str's UTF-8; ``MIXED_BLOCKS``: every mix of UTF-8 lengths in such a
  block.
- ``slowdown``: how much slower than the reference machine this interpreter
  runs Python here, for the "no hang" time bounds.
- ``MAX_EXAMPLES``: the generated-value properties' base number of examples
  (``CODEC_HYPOTHESIS_EXAMPLES``, 150; conftest.py sets 50 for the quick tier).
"""

from __future__ import annotations

import io
import json
import functools
import os
import subprocess
import sys
import time
import types
from typing import Any, Callable, List, Optional, Sequence

from cpython_pickle import Pickler
from zodb_json_codec._db import fidelity as _fidelity

# Spelled out, not taken from _impl: test_twins checks that _impl names the same functions.
RECORD_DECODERS = ("decode_zodb_record", "decode_zodb_record_for_pg", "decode_zodb_record_for_pg_json")
PICKLE_DECODERS = ("pickle_to_dict", "pickle_to_json")
DECODERS = RECORD_DECODERS + PICKLE_DECODERS
ENCODERS = ("encode_zodb_record", "encode_zodb_record_from_pg_json", "dict_to_pickle", "json_to_pickle")

APP_CLASS = (("app.mod", "Kls"), None)  # ZODB's class metadata: ((module, name), None)


class Ref:
    """Stands for a persistent object: the pickler writes pid as its persistent id."""

    def __init__(self, pid: Any) -> None:
        self.pid = pid

    def __repr__(self) -> str:
        return f"Ref({self.pid!r})"


MAX_EXAMPLES = int(os.environ.get("CODEC_HYPOTHESIS_EXAMPLES", "150"))

#: Seconds of _calibration_work on the reference machine (the 2-core x86-64 VM the time bounds were set on,
#: CPython 3.11; 3.12 takes 0.025 there, 3.9 0.08).
REFERENCE_CALIBRATION = 0.03


def _calibration_work() -> None:
    table = {}
    for i in range(100_000):
        table[i & 1023] = [i, str(i)]


@functools.lru_cache(maxsize=None)
def slowdown() -> float:
    """How many times slower than the reference machine this interpreter runs a fixed piece of Python
    work here (best of 5), never below 1.  The tests' "no hang" bounds are in the reference machine's
    seconds and are multiplied by it: under qemu's emulation of aarch64 it is 15-20, and a hang (time
    quadratic in the input, or none at all) is still orders of magnitude past any such bound."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        _calibration_work()
        best = min(best, time.perf_counter() - started)
    return max(1.0, best / REFERENCE_CALIBRATION)


def ref_pid(obj: Any) -> Any:
    """The persistent id of a Ref, None (pickle it) for anything else."""
    return obj.pid if type(obj) is Ref else None


def record(state: Any, protocol: int = 3, *, klass: Any = APP_CLASS,
           persistent_id: Callable[[Any], Any] = ref_pid) -> bytes:
    """klass then state, pickled by one pickler (one memo), as ZODB writes a record.

    The pickler is CPython's (tests/cpython_pickle.py), on PyPy too;
    persistent_id gives the persistent id of an object, or None (by
    default: a Ref's pid).
    """
    f = io.BytesIO()
    p = Pickler(f, protocol, persistent_id=persistent_id)
    p.dump(klass)
    p.dump(state)
    return f.getvalue()


def same_records(a: bytes, b: bytes) -> bool:
    """Both records load to the same objects (class and state), as zodb-json-codec verify compares them."""
    return _fidelity.same(_fidelity.load_record(a), _fidelity.load_record(b))


# ---------------------------------------------------------------------------
# The three paths a record takes through a storage, and back
# ---------------------------------------------------------------------------

def _no_database(texts: Sequence[str]) -> List[str]:
    return list(texts)


# path name -> (decoder, what the storage keeps of its state as JSON text)
_PATH_TEXTS = {
    # the storage keeps the dict itself (no JSON text: the state is encoded as decoded)
    "dict": ("decode_zodb_record", None),
    # the dict variant for PostgreSQL, stored the way a storage stores it: json.dumps
    # (allow_nan=False: the variant spells every NaN and infinity as {"@f": ...})
    "pg": ("decode_zodb_record_for_pg", lambda state: json.dumps(state, allow_nan=False)),
    # the JSON text for PostgreSQL, stored as it is
    "pg_json": ("decode_zodb_record_for_pg_json", lambda text: text),
}
PATHS = tuple(_PATH_TEXTS)


def records_back(impl: Any, data: Sequence[bytes], path: str,
                 jsonb: Optional[Callable[[Sequence[str]], List[str]]] = None) -> List[bytes]:
    """Each record decoded on path, kept, read back and encoded by impl.

    jsonb(texts) is what the database gives back for each JSON text (e.g.
    pgjsonb.jsonb_texts through a real jsonb column; conftest's kept_by);
    None: the texts themselves.  The "dict" path keeps no text.
    """
    jsonb = jsonb or _no_database
    decoder, as_text = _PATH_TEXTS[path]
    decode = getattr(impl, decoder)
    if as_text is None:
        return [impl.encode_zodb_record(decode(d)) for d in data]
    decoded = [decode(d) for d in data]
    texts = jsonb([as_text(state) for _, _, state, _ in decoded])
    assert len(texts) == len(decoded)
    return [impl.encode_zodb_record({"@cls": [module, name], "@s": json.loads(text)})
            for (module, name, _, _), text in zip(decoded, texts)]


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------

def cli(*args: str, stdin: Optional[bytes] = None, stderr: Optional[int] = None,
        code: Optional[str] = None) -> subprocess.CompletedProcess:
    """``python -m zodb_json_codec *args`` in a child process (or ``python -c code *args``).

    ``stdout`` is the bytes written; ``out`` and ``err`` are stdout and
    stderr as text (UTF-8, strictly).  stderr may redirect the child's
    stderr (then ``err`` is empty).
    """
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "zodb_json_codec", *args]
    proc = subprocess.run(command, input=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE if stderr is None else stderr, timeout=1200)
    proc.out = proc.stdout.decode("utf-8")  # type: ignore[attr-defined]
    proc.err = (proc.stderr or b"").decode("utf-8")  # type: ignore[attr-defined]
    return proc


def fresh_database(pg_dsn: str, name: str) -> str:
    """The DSN of a new, empty database of the throwaway PostgreSQL (zodb-pgjsonb's tables have fixed names)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_conninfo(pg_dsn, dbname=name)


def _large_texts() -> List[str]:
    """Long strings of the kinds Plone pages hold, and of the kinds PostgreSQL cannot store."""
    prose = "Grüße, Ελληνικά, русский, 中文テキスト, emoji 😀 and plain ASCII words. "
    html = '<p class="x">\u2028 "quoted" \\ back\\slash\t\b\f\x01\x1f</p>\n'
    return [prose * 600, html * 400, "a" * 40_000, "中" * 20_000, ("x" * 5000) + "\x00" + ("y" * 5000),
            ("z" * 5000) + "\ud800" + ("é" * 3000), "Grüße à l'été. " * 5000, "é" * 40, "short"]


def large_text_records() -> List[bytes]:
    """Records with long strings as dict values and keys, in lists, tuples, sets, shared (memo),
    in dicts that look like markers, in object states (REDUCE + BUILD) and in BTree buckets."""
    out: List[bytes] = []
    for text in _large_texts():
        other = text[::-1] + "!"
        for protocol in (2, 3, 4):
            out += [
                record({"title": "t", "text": text, "again": text, "list": [text, other, 1.5]}, protocol),
                record(text, protocol),
                record({text: 1, other: [text]}, protocol),
                record({(text, 1): "tuple key", "@ref": text}, protocol),
                record({"@ref": text}, protocol),
                record({"@dec": text}, protocol),  # a marker only if the value is a str
                record({"@dt": text, "@tz": {"k": other}}, protocol),
                record({"s": {text, other}, "t": (text, other), "f": frozenset([text])}, protocol),
                record({"obj": types.SimpleNamespace(body=text, n=1)}, protocol),
                record(((text, 1, other, 2),), protocol, klass=(("BTrees.OOBTree", "OOBucket"), None)),
            ]
    return out


#: One character's bytes that strict UTF-8 takes (each length, each lead byte's narrowest second-byte range,
#: the last before the surrogates and the last code point) and refuses (a lone continuation, truncated and
#: overlong sequences, surrogates, code points past U+10FFFF, bytes that are never UTF-8), and U+0000.
UTF8_SEQUENCES = [
    b"\xc2\x80", b"\xc3\xa9", b"\xdf\xbf", b"\xe0\xa0\x80", b"\xe2\x82\xac", b"\xed\x9f\xbf", b"\xee\x80\x80",
    b"\xef\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf0\x9f\x98\x80", b"\xf4\x8f\xbf\xbf", b"\x00", b"\x7f",
    b"\x80", b"\xbf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80",
    b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf",
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xff", b"\xfe", b"\xc3\xa9\xa9",
    b"\xe2\x82\xac\x80", b"\xc3\x28", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc",
]


#: One character (or two) to put anywhere in a str: ASCII's last, each UTF-8 length's edges, lone surrogates
#: (also beside a 4-byte character).
ODD_CHARACTERS = ["\x7f", "\x80", "\xe9", "\xff", "\u0100", "\u07ff", "\u0800", "\u4e2d", "\uffff", "\ud800",
                  "\udfff", "\U00010000", "\U0001f600", "\U0010ffff", "\U0001f600\ud800", "\udfff\U0010ffff"]
#: Characters of three UTF-8 bytes from the range's edges (U+0800-U+FFFF without the surrogates), which the
#: Cython encoder turns into UTF-8 8 at a time; and characters that end such a run.
THREE_BYTE_RUN = "\u0800\u4e2d\ud7ff\ue000\uffff\u2014" * 6
NOT_THREE_BYTE = ["a", "\x80", "\u07ff", "\ud800", "\udbff", "\udc00", "\udfff", "\U0001f600"]
#: Characters of one, two and three UTF-8 bytes, from each length's edges (none that JSON text must escape).
_BY_UTF8_LENGTH = (("a", "~", "\x7f"), ("\x80", "\xe9", "\u0100", "\u07ff"),
                   ("\u0800", "\u4e2d", "\ud7ff", "\ue000", "\uffff"))
#: Every way the 8 characters of a block can be one, two or three UTF-8 bytes long (3**8 blocks), which the
#: Cython twins turn into UTF-8 8 characters a step in a 2-byte str, each way through its own shuffle.
MIXED_BLOCKS = ["".join(_BY_UTF8_LENGTH[way // 3 ** j % 3][(way + j) % len(_BY_UTF8_LENGTH[way // 3 ** j % 3])]
                        for j in range(8)) for way in range(3 ** 8)]


def utf8_texts(size: int, filler: bytes = b"a") -> List[bytes]:
    """Texts of size bytes of filler (ASCII or a valid multi-byte character) with one of UTF8_SEQUENCES at every
    offset in the last 40 bytes, across 16-byte block boundaries (size a multiple of 16 gives every alignment)."""
    out = []
    for sequence in UTF8_SEQUENCES:
        for at in range(max(0, size - 40), size - len(sequence) + 1):
            whole = at // len(filler)  # whole characters of filler, then ASCII up to at bytes
            head = filler * whole + b"a" * (at - whole * len(filler))
            out.append(head + sequence + b"b" * (size - at - len(sequence)))
    return out
