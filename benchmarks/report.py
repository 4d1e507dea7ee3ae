"""Side-by-side speed of pickle, the Rust codec and both twins of this codec, timed in one run.

    python benchmarks/report.py [--rust SO] [--fs PATH ...] [--only SET ...]
                                [--budget SECONDS] [--rounds N] [--json OUT] [--markdown]
                                [--parts PART ...] [--runs N] [--pg] [--dsn DSN] [--no-server]

Contenders (each only when available; a missing one is a note, not an error):
  pickle    the C unpickler with persistent_load as ZODB uses it; pg_json is
            loads + json.dumps(default=repr); encode is pickle.dumps protocol 3
  rust      zodb-json-codec 1.6.1, the reference, loaded from its _rust*.so
            under another module name (--rust; it has our import name)
  cython    this codec's Cython twin (_decode_cython, _encode_cython), when built
  python    this codec's Python twin (_decode_python, _encode_python)
Both twins are taken with zodb_json_codec._impl.import_twin, so they run in
one process whatever ZODB_JSON_CODEC_PURE_PYTHON says.

Sets: the ten synthetic shapes the Rust codec publishes numbers for (one
record each), whole FileStorage scans (wikipedia and public from
tests/data, plus any --fs), and two generated FileStorages of Plone-like
content (benchmarks/largetext.py): plone_large_text (3 KB-1 MB rich-text
bodies, 3 MB of pickles) and large_strings (50 KB-1 MB strings); and
wikipedia_from_jsonb, the wikipedia records as encode_zodb_record writes
them (what a storage decodes when it copies from a jsonb storage).
Operations: decode (record -> dict), encode (the contender's own decoded
dict -> record), pg_json (record -> JSON text).

Parts (--parts; the default is sets, threads and load):
  sets     time per record of each operation on every set, the ratio
           tables, and pg_json's MB/s of pickle input on the generated sets
           next to a memcpy of the same bytes timed in the same alternation
  threads  pg_json records/s with 1 and 2 threads on plone_large_text, for
           the Cython twin and the Rust codec, results kept and dropped, and
           the Cython twin in 1 and 2 processes: the machine's ceiling (see
           threads.py)
  load     the load path of a PostgreSQL storage on wikipedia, public and
           large_strings: (a) json.loads + the storage's @ns walk + Rust
           encode, (b) json.loads + our encode, (c) our
           encode_zodb_record_from_pg_json ("not yet" until a twin has it),
           on PostgreSQL's jsonb text of our pg_json (see loadpath.py); each
           pass gets new str objects of the texts, as from a driver
  gc       decode with the cycle collector on and results kept, repeated
           --runs times on wikipedia and public (plus one run with it off),
           and the objects the collector tracks per decoded record
  encode   encode_zodb_record against the Rust codec, repeated --runs times
  pg       records/s loaded one zoid at a time through psycopg from a real
           table of the wikipedia corpus (pgload.py); --pg adds it
PostgreSQL (load and pg): --dsn, else a throwaway server started with
tests/pgserver.py; --no-server makes load use the codec's own text.

Timing: per set and operation the contenders are timed in alternation,
the order rotating every round, and each keeps its minimum over the
rounds; times are per record. Ratios within one run are what count.

Targets are checked and printed as PASS/MISS, never enforced; those of
the issues on the store path (issue 12) and the load path (issue 13) are
labelled so. The exit status is 0 unless something errors: a twin that
fails on a record, the new function giving other bytes than
json.loads + encode_zodb_record, or a part that could not run (pg without
a server) make it 1, after the report.

Every contender is timed on the same records: a record that one of them
cannot read (pickle without the application's classes, the Rust codec on
a few odd pickles) is left out for all, and the report says how many.

Get the Rust .so with:
  pip download --no-deps zodb-json-codec==1.6.1 -d /tmp/rust && unzip -o /tmp/rust/*.whl -d /tmp/rust
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the modules beside this file

import baseline  # noqa: E402
import containers  # noqa: E402
import datasets  # noqa: E402
import loadpath  # noqa: E402
import pgload  # noqa: E402
import threads  # noqa: E402
from timing import (  # noqa: E402
    MEMCPY_NOTE, NEW_COPY_NOTE, interleaved, interleaved_fresh, mb_per_s, memcpy_pass, new_copy_pass,
)

OPS = ("decode", "encode", "pg_json")
# Ratio tables, numerator over denominator (< 1: the numerator is faster).
RATIOS = (("cython", "rust"), ("cython", "pickle"), ("python", "pickle"), ("cython", "python"))
# The contenders that are this project: their failures are errors, the others' are notes.
OURS = ("cython", "python")

PARTS = ("sets", "threads", "load", "gc", "encode", "pg")
DEFAULT_PARTS = ("sets", "threads", "load")
#: Sets whose pg_json MB/s is shown, beside memcpy's.
THROUGHPUT_SETS = datasets.GENERATED_NAMES
THREAD_SETS = ("plone_large_text",)
THREAD_COUNTS = (1, 2)
PROCESS_BUDGETS = 10  # the processes' ceiling runs for this many budgets a round (threads.process_throughput)
GC_SETS = ("wikipedia", "public")
LOAD_SETS = ("wikipedia", "public", "large_strings")
PG_SET = "wikipedia"
EVERY_CORPUS = datasets.SYNTHETIC_NAMES + datasets.FS_NAMES + datasets.GENERATED_NAMES + datasets.DERIVED_NAMES


@dataclass(frozen=True)
class Target:
    numerator: str
    denominator: str
    sets: Tuple[str, ...]
    ops: Tuple[str, ...]
    limit: float
    label: str = ""


TARGETS = (
    Target("cython", "rust", datasets.SYNTHETIC_NAMES, OPS, 1.0),
    Target("cython", "rust", ("wikipedia",), ("decode", "pg_json"), 0.7),
    Target("cython", "rust", EVERY_CORPUS, ("pg_json",), 0.5, "issue 12"),
    Target("cython", "pickle", GC_SETS, ("decode",), 0.8, "issue 12"),
)
# Goals of the other parts, by the issue that sets them.
THREADS_GOAL = 1.7  # issue 12: 2-thread over 1-thread records/s of the Cython twin, at least
GC_GOALS = (("pickle", 0.8), ("rust", 0.5))  # issue 12: compiled decode over these, in every run
ENCODE_GOAL = 0.6  # issue 13: cython/rust encode in every run
ENCODE_GOAL_SETS = datasets.SYNTHETIC_NAMES + datasets.FS_NAMES
LOAD_GOALS = (("(c)", "(b)", 0.25), ("(c)", "(a)", 0.15))  # issue 13, on wikipedia
LOAD_GOAL_SET = "wikipedia"
LOAD_MEMCPY_GOAL = 2.0  # issue 13: (c)'s time within 2x memcpy's on large_strings
LOAD_MEMCPY_SET = "large_strings"


@dataclass(frozen=True)
class Contender:
    name: str
    source: str
    decode: Callable[[bytes], Any]
    encode: Callable[[Any], bytes]
    pg_json: Callable[[bytes], Any]
    # encode_zodb_record_from_pg_json, once a twin has it (issue 13).
    from_pg_json: Optional[Callable[[str, str, Any], bytes]] = None


def _find(modules: Sequence[ModuleType], name: str) -> Optional[Callable]:
    """The function called name in the first of modules that has it."""
    return next((getattr(m, name) for m in modules if hasattr(m, name)), None)


def _contender(name: str, *modules: ModuleType) -> Contender:
    return Contender(
        name=name,
        source=getattr(modules[0], "__file__", "?"),
        decode=_find(modules, "decode_zodb_record"),
        encode=_find(modules, "encode_zodb_record"),
        pg_json=_find(modules, "decode_zodb_record_for_pg_json"),
        from_pg_json=_find(modules, loadpath.NEW_FUNCTION),
    )


def load_rust(path: str) -> ModuleType:
    """The Rust codec's extension, imported under a name that cannot clash with this package."""
    spec = importlib.util.spec_from_file_location("refcodec._rust", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not an extension module: {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def gather_contenders(rust: Optional[ModuleType]) -> Tuple[Dict[str, Contender], List[str]]:
    """The available contenders, in column order, and notes on the missing ones."""
    from zodb_json_codec import _impl

    contenders = {"pickle": _contender("pickle", baseline)}
    notes = []
    if rust is not None:
        contenders["rust"] = _contender("rust", rust)
    else:
        notes.append("rust: not timed (give --rust PATH_TO_SO)")
    try:
        contenders["cython"] = _contender("cython", *_impl.import_twin("cython"))
    except ImportError as exc:
        state = "installed but does not import" if _impl.cython_installed() else "not built"
        notes.append(f"compiled: column omitted, the Cython twin is {state} ({exc})")
    contenders["python"] = _contender("python", *_impl.import_twin("python"))
    for name in OURS:
        if name in contenders and contenders[name].from_pg_json is None:
            notes.append(f"{name}: {loadpath.NEW_FUNCTION} {loadpath.NOT_YET} (load path (c) not timed)")
    return contenders, notes


def load_sets(only: Optional[Sequence[str]], extra_fs: Sequence[str]) -> Dict[str, List[bytes]]:
    """Records of each set by label: the chosen built-in sets, then fs:NAME for each --fs."""
    sets = {name: datasets.load(name) for name in datasets.NAMES if not only or name in only}
    for path in extra_fs:
        sets["fs:" + os.path.basename(path)] = datasets.fs_records(path)
    return sets


def unreadable(c: Contender, items: Sequence[bytes]) -> Dict[int, str]:
    """Indexes of the records c fails on (decode, encode of its own result, or pg_json), with the error."""
    failed = {}
    for i, data in enumerate(items):
        try:
            c.encode(c.decode(data))
            c.pg_json(data)
        except Exception as exc:  # noqa: BLE001 - reported, and by the exit status for ours
            failed[i] = f"{type(exc).__name__}: {exc}"[:200]
    return failed


def usable_records(contenders: Dict[str, Contender], all_items: List[bytes]) -> Tuple[List[bytes], Dict[str, Any]]:
    """The records every contender reads, and what was left out ("left_out" counts, first "errors")."""
    failures = {name: unreadable(c, all_items) for name, c in contenders.items()}
    failures = {name: failed for name, failed in failures.items() if failed}
    skipped = {i for failed in failures.values() for i in failed}
    items = [data for i, data in enumerate(all_items) if i not in skipped]
    return items, {
        "records": len(items),
        "scanned": len(all_items),
        "bytes": sum(map(len, items)),
        "left_out": {name: len(failed) for name, failed in failures.items()},
        "errors": {name: next(iter(failed.values())) for name, failed in failures.items()},
    }


def op_passes(
    contenders: Dict[str, Contender], items: List[bytes], ops: Sequence[str] = OPS
) -> Dict[str, Dict[str, Callable[[], Any]]]:
    """One pass over items per operation and contender; each contender encodes what it decoded itself.

    The decoded dicts for encode are made (and stay alive) only when encode is among ops: they
    would give the cycle collector more to walk while decode is timed.
    """
    calls: Dict[str, Dict[str, Callable[[], Any]]] = {op: {} for op in ops}
    for name, c in contenders.items():
        if "decode" in ops:
            calls["decode"][name] = lambda fn=c.decode, xs=items: [fn(x) for x in xs]
        if "encode" in ops:
            decoded = [c.decode(data) for data in items]
            calls["encode"][name] = lambda fn=c.encode, xs=decoded: [fn(x) for x in xs]
        if "pg_json" in ops:
            calls["pg_json"][name] = lambda fn=c.pg_json, xs=items: [fn(x) for x in xs]
    return calls


def call_floor(contender: Contender, items: List[bytes]) -> Callable[[], Any]:
    """A pass like op_passes' encode pass over the contender's decoded items that calls len() instead: what the
    timing itself costs per record (most of a one-record set's time, for the Rust codec's too)."""
    decoded = [contender.decode(data) for data in items]
    return lambda xs=decoded: [len(x) for x in xs]


def bench_sets(
    contenders: Dict[str, Contender],
    sets: Dict[str, List[bytes]],
    budget: float,
    rounds: int,
    usable: Optional[Callable[[str], Tuple[List[bytes], Dict[str, Any]]]] = None,
) -> List[Dict[str, Any]]:
    """One row per set: "<contender>.<op>" seconds per record, and what was left out.

    Every contender is timed on the same records: those none of them fails
    on (pickle cannot load records whose classes are not importable, and the
    Rust codec rejects a few). "left_out" counts each contender's failures,
    "errors" gives its first message (usable(label) gives both, when the
    caller has them already). On THROUGHPUT_SETS a memcpy of each record
    joins pg_json's alternation, as "memcpy.pg_json".
    """
    rows = []
    for label, all_items in sets.items():
        items, meta = usable(label) if usable else usable_records(contenders, all_items)
        row: Dict[str, Any] = {"set": label, **meta}
        if items:
            calls = op_passes(contenders, items)
            if label in THROUGHPUT_SETS:
                calls["pg_json"]["memcpy"] = memcpy_pass(items)
            for op, fns in calls.items():
                for name, secs in interleaved(fns, budget, rounds).items():
                    row[f"{name}.{op}"] = secs / len(items)
        rows.append(row)
        print(".", end="", flush=True, file=sys.stderr)
    print(file=sys.stderr)
    return rows


def ratio(row: Dict[str, Any], numerator: str, denominator: str, op: str) -> Optional[float]:
    a, b = row.get(f"{numerator}.{op}"), row.get(f"{denominator}.{op}")
    return a / b if a and b else None


def render(title: str, header: Sequence[str], lines: Sequence[Sequence[str]], markdown: bool) -> str:
    """A table as Markdown, or as fixed-width text (first column left-aligned, the others right)."""
    if markdown:
        out = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(cells) + " |" for cells in lines]
        return "\n".join(out) + "\n"
    widths = [max(len(str(cells[i])) for cells in [header, *lines]) for i in range(len(header))]
    fmt = lambda cells: "  ".join(  # noqa: E731
        str(cell).ljust(w) if i == 0 else str(cell).rjust(w) for i, (cell, w) in enumerate(zip(cells, widths))
    )
    return "\n".join([title, fmt(header), *(fmt(cells) for cells in lines)]) + "\n"


def micros(secs: Optional[float]) -> str:
    return f"{secs * 1e6:.2f} µs" if secs else "n/a"


def records_cell(row: Dict[str, Any]) -> str:
    timed, scanned = row["records"], row["scanned"]
    return str(timed) if timed == scanned else f"{timed} of {scanned}"


def times_tables(rows: List[Dict[str, Any]], names: Sequence[str], markdown: bool) -> List[str]:
    tables = []
    for op in OPS:
        lines = [[row["set"], records_cell(row), *(micros(row.get(f"{name}.{op}")) for name in names)] for row in rows]
        tables.append(render(f"{op}: time per record", ["set", "records", *names], lines, markdown))
    return tables


def ratio_tables(rows: List[Dict[str, Any]], names: Sequence[str], markdown: bool) -> List[str]:
    tables = []
    for numerator, denominator in RATIOS:
        if numerator not in names or denominator not in names:
            continue
        lines = []
        for row in rows:
            values = [ratio(row, numerator, denominator, op) for op in OPS]
            lines.append([row["set"], *(f"{v:.2f}" if v else "n/a" for v in values)])
        title = f"{numerator}/{denominator}: time ratio (< 1: {numerator} is faster)"
        tables.append(render(title, ["set", *OPS], lines, markdown))
    return tables


def throughput_table(rows: List[Dict[str, Any]], names: Sequence[str], markdown: bool) -> List[str]:
    """pg_json's MB/s of pickle input where memcpy was timed beside the contenders."""
    lines = []
    for row in rows:
        if "memcpy.pg_json" not in row:
            continue
        cells = [row["set"], f"{row['bytes'] / 1e6:.2f}"]
        for name in ("memcpy", *names):
            secs = row.get(f"{name}.pg_json")
            cells.append(f"{mb_per_s(row['bytes'], secs * row['records']):,.0f}" if secs else "n/a")
        lines.append(cells)
    if not lines:
        return []
    title = f"pg_json: MB/s of pickle input ({MEMCPY_NOTE})"
    return [render(title, ["set", "MB", "memcpy", *names], lines, markdown)]


def verdict(
    what: str, value: Optional[float], limit: float, at_least: bool = False, why_not: str = "", detail: str = ""
) -> str:
    """One target line: PASS or MISS with the value (and detail), or n/a with why_not."""
    if value is None:
        return f"n/a   {what}: {why_not or 'not measured'}"
    met = value >= limit if at_least else value <= limit
    return f"{'PASS' if met else 'MISS'}  {what}: {value:.2f}{' ' + detail if detail else ''}"


def _tag(label: str) -> str:
    return f"[{label}] " if label else ""


def check_targets(rows: List[Dict[str, Any]], names: Sequence[str]) -> List[str]:
    """PASS or MISS per target and (set, op); n/a, with the reason, where it cannot be measured."""
    by_set = {row["set"]: row for row in rows}
    lines = []
    for target in TARGETS:
        ratio_name = f"{_tag(target.label)}{target.numerator}/{target.denominator}"
        missing = [n for n in (target.numerator, target.denominator) if n not in names]
        if missing:
            scope = "every synthetic shape" if target.sets == datasets.SYNTHETIC_NAMES else ", ".join(target.sets)
            what = f"{ratio_name} {'/'.join(target.ops)} on {scope} <= {target.limit:.1f}"
            lines.append(f"n/a   {what}: no {' or '.join(missing)} timed")
            continue
        not_run = [label for label in target.sets if label not in by_set]
        if not_run:
            lines.append(f"n/a   {ratio_name} <= {target.limit:.1f} on {', '.join(not_run)}: not run (--only)")
        for label in (label for label in target.sets if label in by_set):
            for op in target.ops:
                what = f"{ratio_name} {op} {label} <= {target.limit:.1f}"
                value = ratio(by_set[label], target.numerator, target.denominator, op)
                lines.append(verdict(what, value, target.limit, why_not="no record every contender reads"))
    return lines


def left_out_lines(rows: List[Dict[str, Any]], markdown: bool) -> List[str]:
    left_out = [row for row in rows if row["left_out"]]
    if not left_out:
        return []
    title = "Records left out (every contender is timed on the same records)"
    lines = [f"**{title}**\n" if markdown else title]
    for row in left_out:
        lines.append(f"- {row['set']}: timed {row['records']} of {row['scanned']} records")
        for name, count in row["left_out"].items():
            blame = " (ERROR: a bug of this codec)" if name.split()[-1] in OURS else ""
            lines.append(f"  - {name} fails on {count}{blame}, first: {row['errors'][name]}")
    return ["\n".join(lines) + "\n"]


def describe_run(contenders: Dict[str, Contender], budget: float, rounds: int) -> List[str]:
    lines = [
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()},"
        f" {os.cpu_count()} cores; budget {budget} s, {rounds} rounds"
    ]
    lines += [f"{name}: {c.source}" for name, c in contenders.items()]
    return lines


# -- the parts ---------------------------------------------------------------


@dataclass
class Part:
    """What one part measured: tables to print, target lines, errors (bugs of ours, or cannot run), raw data."""

    tables: List[str] = field(default_factory=list)
    targets: List[str] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    data: Any = None


@dataclass
class Run:
    """Everything the parts share: options, contenders, the loaded sets, and the PostgreSQL server."""

    args: argparse.Namespace
    contenders: Dict[str, Contender]
    sets: Dict[str, List[bytes]]
    server: "Server"
    _usable: Dict[str, Tuple[List[bytes], Dict[str, Any]]] = field(default_factory=dict)

    def usable(self, label: str) -> Tuple[List[bytes], Dict[str, Any]]:
        """usable_records() of a set, checked once per run."""
        if label not in self._usable:
            self._usable[label] = usable_records(self.contenders, self.sets[label])
        return self._usable[label]

    @property
    def names(self) -> List[str]:
        return list(self.contenders)

    def pick(self, *names: str) -> Dict[str, Contender]:
        return {n: self.contenders[n] for n in names if n in self.contenders}

    def ours(self) -> Optional[Contender]:
        """The twin a storage would run: compiled when built, else pure."""
        return self.contenders.get("cython") or self.contenders.get("python")

    def chosen(self, wanted: Sequence[str]) -> List[str]:
        """The sets of wanted that were loaded and have records every contender reads."""
        return [label for label in wanted if label in self.sets and self.usable(label)[0]]

    def not_run(self, part: str, wanted: Sequence[str]) -> List[str]:
        """Target lines (n/a) for the sets of wanted that part cannot time, and why."""
        missing = [label for label in wanted if label not in self.sets]
        empty = [label for label in wanted if label in self.sets and not self.usable(label)[0]]
        lines = [f"n/a   {part} on {', '.join(missing)}: not run (--only)"] if missing else []
        if empty:
            lines.append(f"n/a   {part} on {', '.join(empty)}: no record every contender reads")
        return lines


class Server:
    """The PostgreSQL of a run: --dsn, or a throwaway one started on first use; the reason when there is none."""

    def __init__(self, dsn: Optional[str], allowed: bool, stack: contextlib.ExitStack) -> None:
        self._dsn, self._allowed, self._stack = dsn, allowed, stack
        self._started: Optional[Tuple[Optional[str], str]] = None

    def get(self) -> Tuple[Optional[str], str]:
        """(dsn, what it is), or (None, why there is none)."""
        if self._started is None:
            if not self._allowed and self._dsn is None:
                self._started = (None, "no server asked for (--no-server)")
            else:
                try:
                    self._started = self._stack.enter_context(pgload.server(self._dsn))
                except Exception as exc:  # noqa: BLE001 - a missing server is reported, not raised
                    self._started = (None, f"no PostgreSQL: {type(exc).__name__}: {exc}"[:300])
        return self._started


def part_sets(run: Run) -> Part:
    rows = bench_sets(run.contenders, run.sets, run.args.budget, run.args.rounds, run.usable)
    md = run.args.markdown
    tables = times_tables(rows, run.names, md) + ratio_tables(rows, run.names, md)
    tables += throughput_table(rows, run.names, md) + left_out_lines(rows, md)
    errors = [f"{name} fails on {row['set']}" for row in rows for name in row["left_out"] if name in OURS]
    return Part(tables, check_targets(rows, run.names), errors, rows)


def part_threads(run: Run) -> Part:
    """pg_json records/s of 1 and 2 threads, Cython twin and Rust codec in one alternation."""
    functions = {name: c.pg_json for name, c in run.pick("rust", "cython").items()}
    part = Part(targets=run.not_run("threads", THREAD_SETS), data={})
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = []
    for label in run.chosen(THREAD_SETS):
        items, _ = run.usable(label)
        rates = threads.thread_throughput(functions, items, THREAD_COUNTS, run.args.budget, run.args.rounds)
        dropped = threads.thread_throughput(functions, items, THREAD_COUNTS, run.args.budget, run.args.rounds,
                                            keep=False)
        part.data[label] = rates
        part.data[label + " (results dropped)"] = dropped
        for results, by_name in (("kept", rates), ("dropped", dropped)):
            for name, by_count in by_name.items():
                speeds = [by_count[k]["records/s"] for k in THREAD_COUNTS]
                lines.append([label, name, results, *(f"{v:,.0f}" for v in speeds), f"{speeds[1] / speeds[0]:.2f}",
                              *(f"{by_count[k]['cpu/wall']:.2f}" for k in THREAD_COUNTS)])
        if "cython" in functions:  # the machine's ceiling: as many processes as threads, nothing shared
            ceiling = threads.process_throughput(functions["cython"], items, THREAD_COUNTS,
                                                 PROCESS_BUDGETS * run.args.budget, min(3, run.args.rounds))
            if ceiling is not None:
                part.data[label + " (processes)"] = ceiling
                speeds = [ceiling[k] for k in THREAD_COUNTS]
                lines.append([label, "cython", "processes", *(f"{v:,.0f}" for v in speeds),
                              f"{speeds[1] / speeds[0]:.2f}", *("" for _ in THREAD_COUNTS)])
        what = f"[issue 12] compiled pg_json 2 threads/1 thread records/s {label} >= {THREADS_GOAL}"
        compiled = rates.get("cython")
        value = compiled[2]["records/s"] / compiled[1]["records/s"] if compiled else None
        part.targets.append(verdict(what, value, THREADS_GOAL, at_least=True, why_not="no Cython twin"))
    title = (f"threads: pg_json records/s ({os.cpu_count()} cores, load average {load} before; k threads start"
             " together at a barrier, each makes one whole pass over the set; records/s = k x records / wall"
             " time; CPU/wall: the process's CPU time over wall time, about k x the 1-thread value when the"
             " threads run at once; results kept until the pass ends (the goal's measure) or dropped at once;"
             " processes: the same passes, results dropped, in as many forked processes, the machine's ceiling)")
    header = ["set", "contender", "results", *(f"{k} thread{'s' if k > 1 else ''}" for k in THREAD_COUNTS), "2/1",
              *(f"CPU/wall {k}" for k in THREAD_COUNTS)]
    part.tables.append(render(title, header, lines, run.args.markdown))
    return part


def _load_functions(run: Run) -> Dict[str, Callable[[loadpath.Row], Any]]:
    """The load path's contenders per row, in column order; (c) only for twins that have the function."""
    fns: Dict[str, Callable[[loadpath.Row], Any]] = {}
    if "rust" in run.contenders:
        fns["(a) old"] = loadpath.old_path(run.contenders["rust"].encode)
    fns.update(loadpath.parts())
    for name, c in run.pick(*OURS).items():
        fns[f"(b) {name}"] = loadpath.dict_path(c.encode)
    for name, c in run.pick(*OURS).items():
        if c.from_pg_json is not None:
            fns[f"(c) {name}"] = loadpath.text_path(c.from_pg_json)
            fns[f"(c) {name} str"] = loadpath.text_path(c.from_pg_json, as_str=True)
    return fns


def _twin_of(fn_label: str) -> Optional[str]:
    """Which of our twins a load column times ("(c) cython str" -> "cython"), or None."""
    found = [word for word in fn_label.split() if word in OURS]
    return found[0] if found else None


def _failing_rows(fns: Dict[str, Callable[[loadpath.Row], Any]], rows: List[loadpath.Row]) -> Dict[str, Dict[int, str]]:
    failed: Dict[str, Dict[int, str]] = {}
    for label, fn in fns.items():
        for i, row in enumerate(rows):
            try:
                fn(row)
            except Exception as exc:  # noqa: BLE001 - reported; an error when it is ours
                failed.setdefault(label, {})[i] = f"{type(exc).__name__}: {exc}"[:200]
    return failed


def bench_load_set(run: Run, label: str, dsn: Optional[str], part: Part) -> Dict[str, Any]:
    """Seconds per record of each load contender on one set, after checking that (c) gives (b)'s bytes."""
    ours = run.ours()
    items, meta = run.usable(label)
    rows = loadpath.state_texts(items, ours.pg_json, dsn)
    fns = _load_functions(run)
    failed = _failing_rows(fns, rows)
    skipped = {i for bad in failed.values() for i in bad}
    rows = [row for i, row in enumerate(rows) if i not in skipped]
    for name in OURS:
        for form in (f"(c) {name}", f"(c) {name} str"):
            if form in fns:
                wrong = loadpath.differences(fns[form], fns[f"(b) {name}"], rows)
                if wrong:
                    part.errors.append(f"load {label}: {form} gives other bytes than (b) {name} on {wrong} records")
    for fn_label, bad in failed.items():
        if _twin_of(fn_label):
            first = next(iter(bad.values()))
            part.errors.append(f"load {label}: {fn_label} fails on {len(bad)} records, first: {first}")
    texts = [row.data for row in rows]
    # Every pass gets new row texts, made untimed, as a driver hands over a new str per row.
    passes = {fn_label: (lambda fresh, fn=fn: [fn(row) for row in fresh]) for fn_label, fn in fns.items()}
    copy = memcpy_pass(texts)
    passes["memcpy"] = lambda _fresh: copy()
    passes["new copy"] = new_copy_pass
    result = {"set": label, "records": len(rows), "scanned": meta["scanned"], "bytes": sum(map(len, texts)),
              "left_out": {**meta["left_out"], **{k: len(v) for k, v in failed.items()}},
              "errors": {**meta["errors"], **{k: next(iter(v.values())) for k, v in failed.items()}}}
    if rows:
        times = interleaved(passes, run.args.budget, run.args.rounds, fresh=lambda: loadpath.fresh_rows(rows))
        for fn_label, secs in times.items():
            result[fn_label] = secs / len(rows)
    return result


def _load_cell(result: Dict[str, Any], label: str) -> str:
    if label.startswith("(c)") and label not in result:
        return loadpath.NOT_YET
    return micros(result.get(label))


def _load_ratio(result: Dict[str, Any], numerator: str, denominator: str) -> Optional[float]:
    a, b = result.get(numerator), result.get(denominator)
    return a / b if a and b else None


def load_tables(results: List[Dict[str, Any]], ours: str, source: str, markdown: bool) -> List[str]:
    columns = ["(a) old", "json.loads", "walk", *(f"(b) {n}" for n in OURS), *(f"(c) {n}" for n in OURS),
               *(f"(c) {n} str" for n in OURS)]
    lines = [[r["set"], records_cell(r), *(_load_cell(r, c) for c in columns)] for r in results]
    tables = [render(f"load path: time per record (state_json: {source}; as the UTF-8 bytes psycopg hands a jsonb"
                     " loader, which (a) and (b) json.loads and (c) takes as they are; (c) ... str: as the str of a"
                     " state::text cast)", ["set", "records", *columns], lines, markdown)]
    pairs = [(f"(b) {ours}", "(a) old"), (f"(c) {ours}", f"(b) {ours}"), (f"(c) {ours}", "(a) old"),
             (f"(c) {ours} str", f"(b) {ours}"), (f"(c) {ours} str", "(a) old")]
    lines = []
    for r in results:
        cells = [r["set"]]
        for a, b in pairs:
            value = _load_ratio(r, a, b)
            absent = loadpath.NOT_YET if a.startswith("(c)") and a not in r else "n/a"
            cells.append(f"{value:.2f}" if value else absent)
        lines.append(cells)
    tables.append(render("load path: time ratios (< 1: the first is faster)", ["set", *(f"{a}/{b}" for a, b in pairs)],
                         lines, markdown))
    columns = ["memcpy", "new copy", "(a) old", f"(b) {ours}", f"(c) {ours}", f"(c) {ours} str"]
    lines = []
    for r in results:
        cells = [r["set"], f"{r['bytes'] / 1e6:.2f}"]
        for c in columns:
            secs = r.get(c)
            cells.append(f"{mb_per_s(r['bytes'], secs * r['records']):,.0f}" if secs else
                         (loadpath.NOT_YET if c.startswith("(c)") else "n/a"))
        lines.append(cells)
    tables.append(render(f"load path: MB/s of state_json (UTF-8 bytes) input ({MEMCPY_NOTE}; {NEW_COPY_NOTE})",
                         ["set", "MB", *columns], lines, markdown))
    return tables


def load_targets(results: List[Dict[str, Any]], ours: str) -> List[str]:
    by_set = {r["set"]: r for r in results}
    lines = []
    not_yet = f"{loadpath.NOT_YET} (no {loadpath.NEW_FUNCTION} in the {ours} twin)"
    if LOAD_GOAL_SET in by_set:
        r = by_set[LOAD_GOAL_SET]
        for form in ("", " str"):  # (c) given bytes (the driver's jsonb loader) and str (a ::text cast)
            for a, b, limit in LOAD_GOALS:
                num, den = f"{a} {ours}{form}", (f"{b} {ours}" if b == "(b)" else "(a) old")
                why = not_yet if num not in r else f"no {den} timed"
                lines.append(verdict(f"[issue 13] load {num}/{den} {LOAD_GOAL_SET} <= {limit}",
                                     _load_ratio(r, num, den), limit, why_not=why))
    if LOAD_MEMCPY_SET in by_set:
        r = by_set[LOAD_MEMCPY_SET]
        num = f"(c) {ours}"
        floor = _load_ratio(r, "new copy", "memcpy")
        lines.append(verdict(f"[issue 13] load {num} time/memcpy time {LOAD_MEMCPY_SET} <= {LOAD_MEMCPY_GOAL}",
                             _load_ratio(r, num, "memcpy"), LOAD_MEMCPY_GOAL, why_not=not_yet,
                             detail=f"(a new bytes copy of each input alone: {floor:.2f})" if floor else ""))
    return lines


def part_load(run: Run) -> Part:
    """(a), (b), (c) per record on LOAD_SETS, on PostgreSQL's jsonb text when a server is there."""
    dsn, what = run.server.get()
    source = f"PostgreSQL's jsonb text output, from {what}" if dsn else f"the codec's own text ({what})"
    part = Part(targets=run.not_run("load", LOAD_SETS), data={"state_json": source})
    ours = run.ours().name
    results = []
    for label in run.chosen(LOAD_SETS):
        results.append(bench_load_set(run, label, dsn, part))
        print(".", end="", flush=True, file=sys.stderr)
    print(file=sys.stderr)
    part.data["rows"] = results
    part.tables = load_tables(results, ours, source, run.args.markdown) + left_out_lines(results, run.args.markdown)
    part.targets += load_targets(results, ours)
    return part


def _decode_ratios(run: Run, items: List[bytes]) -> Dict[str, float]:
    """Seconds per record of decode, pickle, rust and compiled in one alternation (results kept per pass)."""
    fns = op_passes(run.pick("pickle", "rust", "cython"), items, ("decode",))["decode"]
    return {name: secs / len(items) for name, secs in interleaved(fns, run.args.budget, run.args.rounds).items()}


def part_gc(run: Run) -> Part:
    """decode repeated --runs times with the collector on, one run with it off, and tracked objects per record."""
    part = Part(targets=run.not_run("gc", GC_SETS), data={"runs": [], "containers": {}})
    chosen = run.chosen(GC_SETS)
    items = {label: run.usable(label)[0] for label in chosen}
    lines = []
    for number in [*range(1, run.args.runs + 1), "off"]:
        for label in chosen:
            if number == "off":
                gc.disable()
            try:
                times = _decode_ratios(run, items[label])
            finally:
                gc.enable()
            part.data["runs"].append({"run": number, "set": label, **times})
            cells = ["collector off" if number == "off" else f"run {number}", label,
                     *(micros(times.get(n)) for n in ("pickle", "rust", "cython"))]
            cells += [f"{times['cython'] / times[n]:.2f}" if n in times and "cython" in times else "n/a"
                      for n, _ in GC_GOALS]
            lines.append(cells)
    header = ["run", "set", "pickle", "rust", "cython", *(f"compiled/{n}" for n, _ in GC_GOALS)]
    part.tables.append(render("decode, results kept (a list per pass), cycle collector on unless said",
                              header, lines, run.args.markdown))
    part.targets += gc_targets(part.data["runs"], chosen, run.args.runs)
    part.tables.append(container_table(run, items, part))
    return part


def gc_targets(runs: List[Dict[str, Any]], chosen: Sequence[str], count: int) -> List[str]:
    lines = []
    for label in chosen:
        for name, limit in GC_GOALS:
            values = [r["cython"] / r[name] for r in runs
                      if r["set"] == label and r["run"] != "off" and "cython" in r and name in r]
            what = f"[issue 12] compiled/{name} decode {label} <= {limit} in each of {count} runs (collector on)"
            worst = max(values) if len(values) == count else None
            shown = "worst run; all: " + " ".join(f"{v:.2f}" for v in values)
            lines.append(verdict(what, worst, limit, why_not=f"no {name} or compiled timed", detail=f"({shown})"))
    return lines


def container_table(run: Run, items: Dict[str, List[bytes]], part: Part) -> str:
    lines = []
    for label, records in items.items():
        for name, c in run.contenders.items():
            counts = containers.tracked_per_record(c.decode, records)
            part.data["containers"].setdefault(label, {})[name] = counts
            kept, allocated = counts["kept"], counts["allocated"]
            lines.append([label, name, *(f"{kept[k]:.1f}" for k in (*containers.KINDS, "all")),
                          f"{allocated['all']:.1f}", f"{counts['garbage']:.2f}"])
    title = ("objects tracked by the cycle collector per decoded record (gc.get_objects() after minus before"
             " decoding the set into a list, collector off meanwhile; 'kept': after one gc.collect(),"
             " 'allocated': before it; 'garbage': unreachable objects that collection freed)")
    header = ["set", "contender", *(f"kept {k}" for k in containers.KINDS), "kept all", "allocated all", "garbage"]
    return render(title, header, lines, run.args.markdown)


#: What part_encode hands the encoders: "fresh", values json.loads made just before (timing.interleaved_fresh), as
#: a storage's load path has them (the goal's measure); "kept", the same decoded dicts every round, as the report
#: timed before.  CPython keeps a str's UTF-8 once a codec asks for it (the Rust codec does), so with "kept" only
#: the first round makes it, and the dicts of a whole pass stay wherever the caches left them.
ENCODE_INPUTS = ("fresh", "kept")


def encode_timer(pair: Dict[str, Contender], items: List[bytes], inputs: str,
                 run: Run) -> Callable[[], Dict[str, float]]:
    """What times one run of encode passes over items: seconds per pass of each contender and of the floor (the
    same pass calling len()). What the runs share (the floor's dicts, the fresh texts) is made once, here.

    Fresh: both contenders encode json.loads values of the same texts (the Cython twin's decoded dicts as
    JSON); kept: each its own decoded dicts, decoded again for every run."""
    if inputs == "kept":
        floor = call_floor(pair["cython"], items)

        def kept() -> Dict[str, float]:
            passes = op_passes(pair, items, ("encode",))["encode"]
            passes["floor"] = floor
            return interleaved(passes, run.args.budget, run.args.rounds)
        return kept
    texts = [json.dumps(pair["cython"].decode(data)) for data in items]
    passes = {name: (lambda xs, fn=c.encode: [fn(x) for x in xs]) for name, c in pair.items()}
    passes["floor"] = lambda xs: [len(x) for x in xs]
    return lambda: interleaved_fresh(passes, texts, run.args.rounds)


def part_encode(run: Run) -> Part:
    """cython/rust encode on every chosen built-in set, --runs times, each run a fresh alternation, on fresh and on
    kept inputs (ENCODE_INPUTS)."""
    pair = run.pick("rust", "cython")
    part = Part(data={})
    if len(pair) < 2:
        part.targets.append(f"n/a   [issue 13] cython/rust encode <= {ENCODE_GOAL}: no rust or compiled timed")
        return part
    labels = run.chosen([label for label in run.sets if label in datasets.NAMES])
    items = {label: run.usable(label)[0] for label in labels}
    part.targets += run.not_run("encode", ENCODE_GOAL_SETS)
    for inputs in ENCODE_INPUTS:
        ratios, best = encode_runs(run, pair, items, inputs)
        part.data[inputs] = ratios
        part.tables += encode_tables(run, inputs, ratios, best, items)
        for label in run.chosen(ENCODE_GOAL_SETS):
            values = ratios[label]
            what = f"[issue 13] cython/rust encode {label} ({inputs}) <= {ENCODE_GOAL} in each of {run.args.runs} runs"
            shown = "worst run; all: " + " ".join(f"{v:.2f}" for v in values)
            part.targets.append(verdict(what, max(values), ENCODE_GOAL, detail=f"({shown})"))
    return part


def encode_runs(run: Run, pair: Dict[str, Contender], items: Dict[str, List[bytes]],
                inputs: str) -> Tuple[Dict[str, List[float]], Dict[str, Dict[str, float]]]:
    """cython/rust per run and set, and each contender's best seconds per pass (the floor's too)."""
    ratios: Dict[str, List[float]] = {label: [] for label in items}
    best: Dict[str, Dict[str, float]] = {label: {} for label in items}
    timers = {label: encode_timer(pair, items[label], inputs, run) for label in items}
    for _ in range(run.args.runs):
        for label in items:
            times = timers[label]()
            ratios[label].append(times["cython"] / times["rust"])
            for name, seconds in times.items():
                best[label][name] = min(best[label].get(name, seconds), seconds)
        print(".", end="", flush=True, file=sys.stderr)
    print(file=sys.stderr)
    return ratios, best


def encode_tables(run: Run, inputs: str, ratios: Dict[str, List[float]], best: Dict[str, Dict[str, float]],
                  items: Dict[str, List[bytes]]) -> List[str]:
    what = {"fresh": "values json.loads made just before (a storage's load path)",
            "kept": "the same decoded dicts every round"}[inputs]
    lines = [[label, *(f"{v:.2f}" for v in values), f"{max(values):.2f}"] for label, values in ratios.items()]
    header = ["set", *(f"run {i}" for i in range(1, run.args.runs + 1)), "worst"]
    tables = [render(f"encode, {what}: cython/rust time ratio per run (< 1: compiled is faster)",
                     header, lines, run.args.markdown)]
    lines = [[label, f"{len(items[label])}", *(micros(t[k] / len(items[label])) for k in ("rust", "cython", "floor")),
              f"{(t['cython'] - t['floor']) / (t['rust'] - t['floor']):.2f}"] for label, t in best.items()]
    tables.append(render(
        f"encode, {what}: time per record, best of the runs; floor: the same pass calling len() instead (the loop,"
        " the call and the list of results, which every contender pays); net: (cython - floor) / (rust - floor)",
        ["set", "records", "rust", "cython", "floor", "net"], lines, run.args.markdown))
    return tables


def part_pg(run: Run) -> Part:
    """Records/s loaded zoid by zoid from a pg-export table of the wikipedia corpus, per load path."""
    part = Part(data={})
    dsn, what = run.server.get()
    if dsn is None:
        part.errors.append(f"pg: not run, {what}")
        return part
    import psycopg

    ours, rust = run.ours(), run.contenders.get("rust")
    try:
        pgload.export(datasets.storage_path(PG_SET), dsn)
    except RuntimeError as exc:
        part.errors.append(f"pg: not run, {exc}")
        return part
    try:
        with psycopg.connect(dsn) as conn:
            ids = pgload.zoids(conn)
            fns = pgload.loaders(conn, rust.encode if rust else None, ours.encode, ours.from_pg_json, ours.name)
            old = fns[f"(b) {ours.name}"]
            for form in (f"(c) {ours.name}", f"(c) {ours.name} str"):
                new = fns.get(form)
                wrong = sum(1 for zoid in ids if new(zoid) != old(zoid)) if new is not None else 0
                if wrong:
                    part.errors.append(f"pg: {form} gives other bytes than (b) on {wrong} records")
            times = interleaved(pgload.passes(fns, ids), run.args.budget, run.args.rounds)
            conn.rollback()
    finally:
        pgload.drop(dsn)
    part.data = {"server": what, "records": len(ids), **{k: v / len(ids) for k, v in times.items()}}
    labels = ["fetch only", "(a) old", f"(b) {ours.name}", f"(c) {ours.name}", f"(c) {ours.name} str"]
    lines = []
    for label in labels:
        secs = part.data.get(label)
        if secs is None:
            absent = loadpath.NOT_YET if label.startswith("(c)") else "n/a"
            lines.append([label, absent, absent, absent])
            continue
        versus = part.data.get("(a) old")
        lines.append([label, f"{1 / secs:,.0f}", micros(secs), f"{versus / secs:.2f}" if versus else "n/a"])
    title = (f"pg: loading {len(ids)} {PG_SET} objects one zoid at a time through psycopg {psycopg.__version__}"
             f" from {what} (records/s; speed-up over (a))")
    part.tables.append(render(title, ["path", "records/s", "per record", "x (a)"], lines, run.args.markdown))
    return part


PART_FUNCTIONS: Dict[str, Callable[[Run], Part]] = {
    "sets": part_sets, "threads": part_threads, "load": part_load,
    "gc": part_gc, "encode": part_encode, "pg": part_pg,
}


def print_targets(target_lines: List[str], markdown: bool) -> None:
    print("**Targets**\n" if markdown else "Targets")
    for line in target_lines:
        print(f"- {line}" if markdown else f"  {line}")
    verdicts = [line.split()[0] for line in target_lines]
    print(f"\n{verdicts.count('PASS')} passed, {verdicts.count('MISS')} missed, {verdicts.count('n/a')} not measured")


def _positive(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be more than 0: {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its error message
    return parse


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rust", metavar="PATH_TO_SO", help="the Rust codec's _rust*.so, timed as 'rust'")
    ap.add_argument("--fs", action="append", default=[], metavar="PATH",
                    help="another FileStorage to scan, shown as fs:NAME (repeatable)")
    ap.add_argument("--only", nargs="+", choices=datasets.NAMES, metavar="SET",
                    help=f"run only these built-in sets (of: {', '.join(datasets.NAMES)}); --fs ones still run")
    ap.add_argument("--budget", type=_positive(float), default=0.2, metavar="SECONDS",
                    help="each timed loop lasts about a tenth of this, as compare.py's --budget (default 0.2)")
    ap.add_argument("--rounds", type=_positive(int), default=15, metavar="N",
                    help="rounds of alternation; each contender keeps its minimum (default 15)")
    ap.add_argument("--json", metavar="OUT", help="write the raw rows (seconds per record) to this file")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown, for docs/performance.md")
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(DEFAULT_PARTS), metavar="PART",
                    help=f"what to measure (of: {', '.join(PARTS)}; default: {' '.join(DEFAULT_PARTS)})")
    ap.add_argument("--runs", type=_positive(int), default=5, metavar="N",
                    help="repetitions of the gc and encode parts' comparisons (default 5)")
    ap.add_argument("--pg", action="store_true", help="add the pg part (end-to-end loads from PostgreSQL)")
    ap.add_argument("--dsn", metavar="DSN", help="a PostgreSQL for the load and pg parts (default: a throwaway one)")
    ap.add_argument("--no-server", action="store_true",
                    help="start no PostgreSQL: the load part times the codec's own text (pg needs --dsn then)")
    args = ap.parse_args(argv)
    if args.pg and "pg" not in args.parts:
        args.parts.append("pg")
    for path in args.fs:
        if not os.path.isfile(path):
            ap.error(f"--fs {path}: no such file")
    if args.rust:
        try:
            args.rust_module = load_rust(args.rust)
        except (ImportError, OSError) as exc:
            ap.error(f"--rust {args.rust}: cannot load the Rust codec: {exc}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    contenders, notes = gather_contenders(getattr(args, "rust_module", None))
    for line in describe_run(contenders, args.budget, args.rounds) + notes:
        print(f"- {line}" if args.markdown else line)
    print()

    target_lines: List[str] = []
    errors: List[str] = []
    raw: Dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        run = Run(args, contenders, load_sets(args.only, args.fs), Server(args.dsn, not args.no_server, stack))
        for name in (p for p in PARTS if p in args.parts):
            part = PART_FUNCTIONS[name](run)
            for table in part.tables:
                print(table, flush=True)
            target_lines += part.targets
            errors += part.errors
            raw[name] = part.data
    print_targets(target_lines, args.markdown)
    if errors:
        print("\nErrors:\n" + "\n".join(f"  {e}" for e in errors))

    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            info = {"python": sys.version, "budget": args.budget, "rounds": args.rounds, "runs": args.runs}
            contender_files = {n: c.source for n, c in contenders.items()}
            json.dump({**info, "contenders": contender_files, "rows": raw.get("sets", []), "parts": raw}, f, indent=1)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
