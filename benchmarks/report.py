"""Side-by-side speed of pickle, the Rust codec and both twins of this codec, timed in one run.

    python benchmarks/report.py [--rust SO] [--fs PATH ...] [--only SET ...]
                                [--budget SECONDS] [--rounds N] [--json OUT] [--markdown]

Contenders (each only when available; a missing one is a note, not an error):
  pickle    the C unpickler with persistent_load as ZODB uses it; pg_json is
            loads + json.dumps(default=repr); encode is pickle.dumps protocol 3
  rust      zodb-json-codec 1.6.1, the reference, loaded from its _rust*.so
            under another module name (--rust; it has our import name)
  compiled  this codec's Cython twin (_decode_c, _encode_c), when built
  pure      this codec's pure-Python twin (_decode_py, _encode_py)
Both twins are taken with zodb_json_codec._impl.import_twin, so they run in
one process whatever ZODB_JSON_CODEC_PURE_PYTHON says.

Sets: the ten synthetic shapes the Rust codec publishes numbers for (one
record each) and whole FileStorage scans (wikipedia and public from
tests/data, plus any --fs). Operations: decode (record -> dict), encode (the
contender's own decoded dict -> record), pg_json (record -> JSON text).

Timing is compare.py's: per set and operation the contenders are timed in
alternation, the order rotating every round, and each keeps its minimum
over the rounds; times are per record. Ratios within one run are what count.

The issue's targets are checked and printed as PASS/MISS, never enforced:
compiled/rust <= 1.0 for every operation on every synthetic shape; <= 0.7
for decode and pg_json on the wikipedia scan; compiled decode <= 0.8 x
pickle decode on the wikipedia scan. The exit status is 0 unless something
errors: a twin that fails on a record makes it 1, after the report.

Every contender is timed on the same records: a record that one of them
cannot read (pickle without the application's classes, the Rust codec on a
few odd pickles) is left out for all, and the report says how many.

Get the Rust .so with:
  pip download --no-deps zodb-json-codec==1.6.1 -d /tmp/rust && unzip -o /tmp/rust/*.whl -d /tmp/rust
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))  # datasets, baseline beside this file

import baseline  # noqa: E402
import datasets  # noqa: E402

OPS = ("decode", "encode", "pg_json")
# Ratio tables, numerator over denominator (< 1: the numerator is faster).
RATIOS = (("compiled", "rust"), ("compiled", "pickle"), ("pure", "pickle"), ("compiled", "pure"))
# The contenders that are this project: their failures are errors, the others' are notes.
OURS = ("compiled", "pure")


@dataclass(frozen=True)
class Target:
    numerator: str
    denominator: str
    sets: Tuple[str, ...]
    ops: Tuple[str, ...]
    limit: float


TARGETS = (
    Target("compiled", "rust", datasets.SYNTHETIC_NAMES, OPS, 1.0),
    Target("compiled", "rust", ("wikipedia",), ("decode", "pg_json"), 0.7),
    Target("compiled", "pickle", ("wikipedia",), ("decode",), 0.8),
)


@dataclass(frozen=True)
class Contender:
    name: str
    source: str
    decode: Callable[[bytes], Any]
    encode: Callable[[Any], bytes]
    pg_json: Callable[[bytes], Any]


def _contender(name: str, decoder: ModuleType, encoder: ModuleType) -> Contender:
    return Contender(
        name=name,
        source=getattr(decoder, "__file__", "?"),
        decode=decoder.decode_zodb_record,
        encode=encoder.encode_zodb_record,
        pg_json=decoder.decode_zodb_record_for_pg_json,
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

    contenders = {"pickle": _contender("pickle", baseline, baseline)}
    notes = []
    if rust is not None:
        contenders["rust"] = _contender("rust", rust, rust)
    else:
        notes.append("rust: not timed (give --rust PATH_TO_SO)")
    try:
        contenders["compiled"] = _contender("compiled", *_impl.import_twin("cython"))
    except ImportError as exc:
        state = "installed but does not import" if _impl.compiled_installed() else "not built"
        notes.append(f"compiled: column omitted, the Cython twin is {state} ({exc})")
    contenders["pure"] = _contender("pure", *_impl.import_twin("python"))
    return contenders, notes


def load_sets(only: Optional[Sequence[str]], extra_fs: Sequence[str]) -> Dict[str, List[bytes]]:
    """Records of each set by label: the chosen built-in sets, then fs:NAME for each --fs."""
    sets = {name: datasets.load(name) for name in datasets.NAMES if not only or name in only}
    for path in extra_fs:
        sets["fs:" + os.path.basename(path)] = datasets.fs_records(path)
    return sets


# loop_size() and interleaved() are compare.py's, so the numbers are comparable with its runs.
def loop_size(fn: Callable[[], Any], budget: float) -> int:
    """Calls per timed loop so that one loop takes about budget/10 seconds."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 > budget / 10 or n >= 1 << 20:
            return n
        n *= 2


def interleaved(fns: Dict[str, Callable[[], Any]], budget: float, rounds: int = 15) -> Dict[str, float]:
    """Minimum seconds per call for each fn, timing them in alternation.

    Alternating the contenders within every round spreads the machine's
    noise evenly over them, so their ratio is steadier than their times.
    """
    sizes = {k: loop_size(f, budget) for k, f in fns.items()}
    best = {k: float("inf") for k in fns}
    order = list(fns)
    for r in range(rounds):
        for k in order[r % len(order):] + order[:r % len(order)]:
            f, n = fns[k], sizes[k]
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            best[k] = min(best[k], (time.perf_counter() - t0) / n)
    return best


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


def bench_sets(
    contenders: Dict[str, Contender], sets: Dict[str, List[bytes]], budget: float, rounds: int
) -> List[Dict[str, Any]]:
    """One row per set: "<contender>.<op>" seconds per record, and what was left out.

    Every contender is timed on the same records: those none of them fails
    on (pickle cannot load records whose classes are not importable, and the
    Rust codec rejects a few). "left_out" counts each contender's failures,
    "errors" gives its first message.
    """
    rows = []
    for label, all_items in sets.items():
        failures = {name: unreadable(c, all_items) for name, c in contenders.items()}
        failures = {name: failed for name, failed in failures.items() if failed}
        skipped = {i for failed in failures.values() for i in failed}
        items = [data for i, data in enumerate(all_items) if i not in skipped]
        row: Dict[str, Any] = {
            "set": label,
            "records": len(items),
            "scanned": len(all_items),
            "left_out": {name: len(failed) for name, failed in failures.items()},
            "errors": {name: next(iter(failed.values())) for name, failed in failures.items()},
        }
        if items:
            calls: Dict[str, Dict[str, Callable[[], Any]]] = {op: {} for op in OPS}
            for name, c in contenders.items():
                # Each contender encodes what it decoded itself.
                decoded = [c.decode(data) for data in items]
                calls["decode"][name] = lambda fn=c.decode, xs=items: [fn(x) for x in xs]
                calls["encode"][name] = lambda fn=c.encode, xs=decoded: [fn(x) for x in xs]
                calls["pg_json"][name] = lambda fn=c.pg_json, xs=items: [fn(x) for x in xs]
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


def times_tables(rows: List[Dict[str, Any]], names: Sequence[str], markdown: bool) -> List[str]:
    tables = []
    for op in OPS:
        lines = []
        for row in rows:
            timed, scanned = row["records"], row["scanned"]
            cells = [row["set"], str(timed) if timed == scanned else f"{timed} of {scanned}"]
            for name in names:
                secs = row.get(f"{name}.{op}")
                cells.append(f"{secs * 1e6:.2f} µs" if secs else "n/a")
            lines.append(cells)
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


def check_targets(rows: List[Dict[str, Any]], names: Sequence[str]) -> List[str]:
    """PASS or MISS per target and (set, op); n/a, with the reason, where it cannot be measured."""
    by_set = {row["set"]: row for row in rows}
    lines = []
    for target in TARGETS:
        ratio_name = f"{target.numerator}/{target.denominator}"
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
                if value is None:
                    lines.append(f"n/a   {what}: no record every contender reads")
                else:
                    lines.append(f"{'PASS' if value <= target.limit else 'MISS'}  {what}: {value:.2f}")
    return lines


def describe_run(contenders: Dict[str, Contender], budget: float, rounds: int) -> List[str]:
    lines = [
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()},"
        f" {os.cpu_count()} cores; budget {budget} s, {rounds} rounds"
    ]
    lines += [f"{name}: {c.source}" for name, c in contenders.items()]
    return lines


def print_report(rows: List[Dict[str, Any]], names: Sequence[str], markdown: bool) -> None:
    """The time and ratio tables, the records left out, and the targets' verdicts."""
    for table in times_tables(rows, names, markdown) + ratio_tables(rows, names, markdown):
        print(table)

    left_out = [row for row in rows if row["left_out"]]
    if left_out:
        title = "Records left out (every contender is timed on the same records)"
        print(f"**{title}**\n" if markdown else title)
        for row in left_out:
            print(f"- {row['set']}: timed {row['records']} of {row['scanned']} records")
            for name, count in row["left_out"].items():
                blame = " (ERROR: a bug of this codec)" if name in OURS else ""
                print(f"  - {name} fails on {count}{blame}, first: {row['errors'][name]}")
        print()

    target_lines = check_targets(rows, names)
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
    args = ap.parse_args(argv)
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
    names = list(contenders)
    for line in describe_run(contenders, args.budget, args.rounds) + notes:
        print(f"- {line}" if args.markdown else line)
    print()

    rows = bench_sets(contenders, load_sets(args.only, args.fs), args.budget, args.rounds)
    print_report(rows, names, args.markdown)

    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            run = {"python": sys.version, "budget": args.budget, "rounds": args.rounds}
            json.dump({**run, "contenders": {n: c.source for n, c in contenders.items()}, "rows": rows}, f, indent=1)
    # A twin failing on a record is a bug of this project: report it as an error.
    return 1 if any(name in OURS for row in rows for name in row["left_out"]) else 0


if __name__ == "__main__":
    sys.exit(main())
