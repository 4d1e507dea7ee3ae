"""Time and memory of the command line (dump, load, pg-export, pg-import, stats, verify) on big FileStorages.

    python benchmarks/bigdb.py PATH.fs [PATH.fs ...] [--jobs 1,2] [--commands dump,verify,...]
                               [--workdir DIR] [--json OUT] [--interval SECONDS]
    python benchmarks/bigdb.py --make 3500 /work/big/half.fs --make 7000 /work/big/big.fs
    python benchmarks/bigdb.py --quick                 # smoke test on tests/data/public.fs, a few seconds

A standalone script: not collected by pytest (not test_*.py), not run by CI.
Needs ZODB, psycopg and PostgreSQL server binaries (for the pg-* commands;
a throwaway server is started with tests/pgserver.py).

For each database, command and --jobs value it runs ``python -m
zodb_json_codec COMMAND ...`` as a subprocess and measures:

- wall time, and records per second.  Records are the database's objects
  (``len(storage)``) for the commands that handle current revisions (dump,
  load, pg-export, pg-import, stats), and its record revisions with data
  for verify, which checks every revision.  The count a command reports
  (or, for dump, the lines it writes) is checked against these;
- memory, from /proc every --interval seconds (50 ms) in a thread, over the
  command's process and all its descendants (the worker processes of
  --jobs N and multiprocessing's resource tracker):
  * largest process: the highest VmHWM (the kernel's own record of a
    process's peak RSS) of any process of the tree; exact but for growth in
    the last interval of a process's life;
  * process tree: the highest sum of VmRSS over the tree in one sample
    (pages shared between processes, such as libraries, count once per
    process, so this overstates the real footprint a little);
  * main VmHWM: the peak RSS of the command's main process alone.
  The PostgreSQL server is not part of the tree: its memory is not counted.

Commands run in the order dump, load, pg-export, pg-import, stats, verify,
each with every --jobs value in turn (so the runs that are compared are
close in time).  load reads the first dump's output and pg-import the first
pg-export's table; when dump or pg-export is not among the commands, they
are made beforehand, untimed.  Every other output (JSON Lines, FileStorages,
tables) is deleted right after its run.  Timings on a shared 2-core machine
are noisy: compare runs of one invocation rather than across invocations.

Prints a markdown table (and, with --json, writes the runs as JSON); the
exit status is 1 if any run failed or reported the wrong count.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
QUICK_DATABASE = REPO / "tests" / "data" / "public.fs"

# Run order: load needs a dump, pg-import a table that pg-export wrote.
COMMANDS = ("dump", "load", "pg-export", "pg-import", "stats", "verify")
PG_COMMANDS = frozenset({"pg-export", "pg-import"})
# What each command prints about how many records it handled (dump is counted from its output).
REPORTED = {
    "load": re.compile(r"^load: (\d+) records", re.M),
    "pg-export": re.compile(r"^pg-export: (\d+) objects", re.M),
    "pg-import": re.compile(r"^pg-import: (\d+) records", re.M),
    "stats": re.compile(r"^\s*(\d+)\s+\d+\s+\d+\s+total:", re.M),
    "verify": re.compile(r"^verify: (\d+) records", re.M),
}
STDERR_SHOWN = 2000
KB_PER_MB = 1024

MEMORY_NOTE = (
    "Memory is the RSS of the command's process and all its descendants (workers), from /proc every "
    "{interval:g} s: 'largest process' is the highest VmHWM (kernel-kept peak RSS) of any one process, "
    "'process tree' the highest sum of VmRSS in one sample (shared pages count once per process), "
    "'main VmHWM' the main process alone. The PostgreSQL server's memory is not counted (not in the tree)."
)


# ---------------------------------------------------------------------------
# Memory of a process tree, from /proc
# ---------------------------------------------------------------------------


def _children() -> Dict[int, List[int]]:
    """pid -> child pids, for every process (/proc/PID/task/*/children needs a kernel option this may lack)."""
    children: Dict[int, List[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        ppid = int(stat.rpartition(b")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def process_tree(root: int) -> List[int]:
    """root and all its descendants, breadth first."""
    children = _children()
    tree = [root]
    for pid in tree:  # the list grows as it is walked
        tree.extend(children.get(pid, ()))
    return tree


def memory_kb(pid: int) -> Tuple[int, int]:
    """(VmRSS, VmHWM) of a process in kB; zeros for one that is gone or a zombie."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith(b"VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


class TreeMemory(threading.Thread):
    """Samples the memory of a process and its descendants until stopped."""

    def __init__(self, pid: int, interval: float) -> None:
        super().__init__(name=f"memory of {pid}", daemon=True)
        self.pid = pid
        self.interval = interval
        self.peak_tree_kb = 0
        self.peak_hwm_kb: Dict[int, int] = {}  # pid -> the highest VmHWM seen
        self.most_processes = 0
        self.samples = 0
        self._stopped = threading.Event()

    def run(self) -> None:
        while True:
            self.sample()
            if self._stopped.wait(self.interval):
                return

    def sample(self) -> None:
        tree = process_tree(self.pid)
        total = 0
        for pid in tree:
            rss, hwm = memory_kb(pid)
            total += rss
            if hwm > self.peak_hwm_kb.get(pid, 0):
                self.peak_hwm_kb[pid] = hwm
        self.peak_tree_kb = max(self.peak_tree_kb, total)
        self.most_processes = max(self.most_processes, len(tree))
        self.samples += 1

    def stop(self) -> None:
        self._stopped.set()
        self.join()


# ---------------------------------------------------------------------------
# One measured run
# ---------------------------------------------------------------------------


@dataclass
class Run:
    database: str
    records: int
    command: str
    jobs: int
    seconds: float
    exit_status: int
    largest_process_mb: float
    process_tree_mb: float
    main_hwm_mb: float
    most_processes: int
    samples: int
    reported: Optional[int]  # the records the command says it handled (dump: lines written)
    problem: str  # why the run is wrong (exit status and stderr, or a wrong count); empty when all is well

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


@dataclass
class Outcome:
    seconds: float
    exit_status: int
    stdout: str
    stderr: str
    memory: TreeMemory


def measure(argv: Sequence[str], interval: float, scratch: Path) -> Outcome:
    """Run argv to its end, timing it and sampling its process tree's memory."""
    # Output goes to files: a pipe the child fills while we only wait would block it.
    with open(scratch / "stdout", "w+b") as out, open(scratch / "stderr", "w+b") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        memory = TreeMemory(proc.pid, interval)
        memory.start()
        try:
            status = proc.wait()
            seconds = time.perf_counter() - start
        except BaseException:  # interrupted: leave no command running
            proc.kill()
            proc.wait()
            raise
        finally:
            memory.stop()
        out.seek(0)
        err.seek(0)
        stdout, stderr = (stream.read().decode(errors="replace") for stream in (out, err))
        return Outcome(seconds, status, stdout, stderr, memory)


def count_lines(path: Path) -> int:
    lines = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            lines += chunk.count(b"\n")
    return lines


def remove_storage(path: Path) -> None:
    for suffix in ("", ".index", ".lock", ".tmp"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


# ---------------------------------------------------------------------------
# The runs of one database
# ---------------------------------------------------------------------------


def count_records(path: Path) -> Tuple[int, int]:
    """(objects, record revisions with data) of a FileStorage."""
    from ZODB.FileStorage import FileStorage

    storage = FileStorage(str(path), read_only=True)
    try:
        revisions = sum(1 for txn in storage.iterator() for rec in txn if rec.data)
        return len(storage), revisions
    finally:
        storage.close()


class Bench:
    """Runs the commands over databases; owns the scratch directory and the PostgreSQL tables it makes."""

    def __init__(self, workdir: Path, dsn: Optional[str], interval: float) -> None:
        self.workdir = workdir
        self.dsn = dsn
        self.interval = interval
        self._serial = 0
        # Per database: the JSON Lines load reads and the table pg-import reads.
        self.dump: Optional[Path] = None
        self.table: Optional[str] = None

    def fresh(self, stem: str) -> str:
        self._serial += 1
        return f"{stem}{self._serial}"

    def codec(self, *args: object) -> List[str]:
        return [sys.executable, "-m", "zodb_json_codec", *map(str, args)]

    def drop_table(self, table: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))

    def prepare(self, argv: List[str]) -> None:
        """An untimed run that makes the input of a later command."""
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"bigdb: preparing with {' '.join(argv[3:])} failed:\n{proc.stderr[-STDERR_SHOWN:]}")

    def database(self, path: Path, commands: Sequence[str], jobs_values: Sequence[int]) -> Iterator[Run]:
        log(f"{path}: counting records")
        objects, revisions = count_records(path)
        log(f"{path}: {objects} objects, {revisions} record revisions")
        self.dump = None
        self.table = None
        try:
            for command in COMMANDS:
                if command not in commands:
                    continue
                for jobs in jobs_values:
                    if command == "load" and self.dump is None:
                        self.dump = self.workdir / f"{self.fresh('dump')}.jsonl"
                        self.prepare(self.codec("dump", path, "-o", self.dump, "--jobs", max(jobs_values)))
                    if command == "pg-import" and self.table is None:
                        self.table = self.fresh("bench_")
                        self.prepare(self.codec("pg-export", path, "--dsn", self.dsn, "--table", self.table,
                                                "--jobs", max(jobs_values)))
                    log(f"{path.name}: {command} --jobs {jobs} ...")
                    run = self.run(command, path, jobs, revisions if command == "verify" else objects)
                    log(f"{path.name}: {command} --jobs {jobs}: {run.seconds:.1f} s, largest process "
                        f"{run.largest_process_mb:.0f} MB, tree {run.process_tree_mb:.0f} MB"
                        + (f"; PROBLEM: {run.problem.splitlines()[0]}" if run.problem else ""))
                    yield run
        finally:
            if self.dump is not None:
                self.dump.unlink(missing_ok=True)
            if self.table is not None:
                self.drop_table(self.table)

    def run(self, command: str, path: Path, jobs: int, records: int) -> Run:
        """One measured run; the first dump and pg-export table are kept for load and pg-import."""
        output: Optional[Path] = None  # a file or FileStorage the run writes
        table: Optional[str] = None  # a table the run writes
        if command == "dump":
            output = self.workdir / f"{self.fresh('dump')}.jsonl"
            argv = self.codec("dump", path, "-o", output, "--jobs", jobs)
        elif command == "load":
            output = self.workdir / f"{self.fresh('load')}.fs"
            argv = self.codec("load", self.dump, output, "--jobs", jobs)
        elif command == "pg-export":
            table = self.fresh("bench_")
            argv = self.codec("pg-export", path, "--dsn", self.dsn, "--table", table, "--jobs", jobs)
        elif command == "pg-import":
            output = self.workdir / f"{self.fresh('pgimport')}.fs"
            argv = self.codec("pg-import", output, "--dsn", self.dsn, "--table", self.table, "--jobs", jobs)
        else:  # stats, verify
            argv = self.codec(command, path, "--jobs", jobs)

        outcome = measure(argv, self.interval, self.workdir)
        reported: Optional[int] = None
        problem = ""
        if outcome.exit_status:
            problem = f"exit status {outcome.exit_status}; stderr:\n{outcome.stderr[-STDERR_SHOWN:].strip()}"
        else:
            if command == "dump" and output is not None:
                reported = count_lines(output)
            else:
                match = REPORTED[command].search(outcome.stdout)
                reported = int(match.group(1)) if match else None
            if reported != records:
                problem = (f"expected {records} records, the command reports {reported}; "
                           f"stdout:\n{outcome.stdout[-STDERR_SHOWN:]}")

        if command == "dump" and self.dump is None and not outcome.exit_status:
            self.dump = output
        elif output is not None:
            remove_storage(output)
        if command == "pg-export" and self.table is None and not outcome.exit_status:
            self.table = table
        elif table is not None:
            self.drop_table(table)

        memory = outcome.memory
        return Run(
            database=str(path), records=records, command=command, jobs=jobs,
            seconds=round(outcome.seconds, 3), exit_status=outcome.exit_status,
            largest_process_mb=round(max(memory.peak_hwm_kb.values(), default=0) / KB_PER_MB, 1),
            process_tree_mb=round(memory.peak_tree_kb / KB_PER_MB, 1),
            main_hwm_mb=round(memory.peak_hwm_kb.get(memory.pid, 0) / KB_PER_MB, 1),
            most_processes=memory.most_processes, samples=memory.samples, reported=reported, problem=problem,
        )


# ---------------------------------------------------------------------------
# Report and command line
# ---------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"bigdb: {message}", file=sys.stderr, flush=True)


def markdown(runs: Sequence[Run]) -> str:
    header = ("database", "records", "command", "jobs", "seconds", "records/s",
              "largest process MB", "process tree MB", "main VmHWM MB")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * 3 + ["---:"] * (len(header) - 3)) + "|"]
    for run in runs:
        rate = "FAILED" if run.exit_status else f"{run.records_per_second:,.0f}"
        cells = (Path(run.database).name, f"{run.records:,}", run.command, str(run.jobs), f"{run.seconds:.1f}",
                 rate, f"{run.largest_process_mb:.0f}", f"{run.process_tree_mb:.0f}", f"{run.main_hwm_mb:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def make_database(make_corpus: Optional[Path], scale: int, out: Path, seed: int) -> None:
    if make_corpus is None or not make_corpus.is_file():
        raise SystemExit(f"bigdb: no {make_corpus}; name make_corpus.py with --make-corpus")
    if out.exists():
        # make_corpus.py would silently replace it.
        raise SystemExit(f"bigdb: {out} exists; pass it as a PATH to measure it, or remove it to --make it anew")
    log(f"making {out} (scale {scale}, seed {seed}) ...")
    start = time.perf_counter()
    subprocess.run([sys.executable, str(make_corpus), str(out), "--seed", str(seed), "--scale", str(scale)],
                   check=True, stdout=subprocess.DEVNULL)
    log(f"made {out}: {out.stat().st_size:,} bytes in {time.perf_counter() - start:.0f} s")


def rechunk_database(source: Path, out: Path, per_transaction: int) -> None:
    """Copy every revision of source into out with at most per_transaction records per transaction.

    make_corpus.py writes almost the whole site in one transaction; a real
    site's history is many small ones.  ZODB's memory while it builds the
    index on open, and FileStorage's while it writes a transaction, follow
    the largest transaction: copies with small transactions show what grows
    with the database and what does not.  New tids follow the source's first.
    """
    from ZODB.Connection import TransactionMetaData
    from ZODB.FileStorage import FileStorage

    if out.exists():
        raise SystemExit(f"bigdb: {out} exists; pass it as a PATH to measure it, or remove it to --rechunk it anew")
    log(f"copying {source} into {out}, {per_transaction} records per transaction ...")
    src = FileStorage(str(source), read_only=True)
    dst = FileStorage(str(out), create=True)
    try:
        tid = None
        txn = None
        count = 0
        for source_txn in src.iterator():
            for record in source_txn:
                if not record.data:
                    continue
                if txn is None:
                    tid = (int.from_bytes(tid, "big") + 1).to_bytes(8, "big") if tid else source_txn.tid
                    txn = TransactionMetaData()
                    dst.tpc_begin(txn, tid)
                dst.restore(record.oid, tid, record.data, "", None, txn)
                count += 1
                if count % per_transaction == 0:
                    dst.tpc_vote(txn)
                    dst.tpc_finish(txn)
                    txn = None
        if txn is not None:
            dst.tpc_vote(txn)
            dst.tpc_finish(txn)
    finally:
        src.close()
        dst.close()
    for suffix in (".index", ".lock", ".tmp"):  # measured as found: without an index, like the others
        Path(f"{out}{suffix}").unlink(missing_ok=True)
    log(f"made {out}: {out.stat().st_size:,} bytes")


def _names(text: str) -> List[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in COMMANDS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"not commands: {unknown or text!r} (choose from {','.join(COMMANDS)})")
    return names


def _numbers(text: str) -> List[int]:
    try:
        numbers = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        numbers = []
    if not numbers or min(numbers) < 1:
        raise argparse.ArgumentTypeError(f"not a list of numbers of processes: {text!r}")
    return numbers


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH.fs", help="FileStorages to measure")
    p.add_argument("--make", nargs=2, action="append", default=[], metavar=("SCALE", "OUT.fs"),
                   help="first build OUT.fs with make_corpus.py --scale SCALE (OUT.fs must not exist); repeatable")
    p.add_argument("--rechunk", nargs=3, action="append", default=[], metavar=("N", "SOURCE.fs", "OUT.fs"),
                   help="first copy SOURCE.fs into OUT.fs with at most N records per transaction; repeatable")
    p.add_argument("--make-corpus", type=Path, metavar="PY",
                   help="the corpus generator script for --make (make_corpus.py, not part of this repository)")
    p.add_argument("--seed", type=int, default=7, help="make_corpus.py --seed for --make (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help=f"smoke test on {QUICK_DATABASE.relative_to(REPO)} (no PATH)")
    p.add_argument("--commands", type=_names, default=list(COMMANDS), metavar="C,C",
                   help="the commands to run, e.g. dump,verify (default: all: %s)" % ",".join(COMMANDS))
    p.add_argument("--jobs", type=_numbers, default=[1, 2], metavar="N,N",
                   help="--jobs values to run each command with (default: 1,2)")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()),
                   help="where the outputs go while a run needs them, in a temporary directory "
                   "(default: %(default)s; needs about twice the database's size free)")
    p.add_argument("--interval", type=float, default=0.05, metavar="SECONDS",
                   help="memory sampling interval (default: %(default)s)")
    p.add_argument("--json", type=Path, metavar="OUT", help="also write the runs as JSON to OUT")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick and (args.paths or args.make or args.rechunk):
        raise SystemExit("bigdb: --quick measures the small test database; give it no PATH or --make")
    for scale, out in args.make:
        make_database(args.make_corpus, int(scale), Path(out), args.seed)
    for per_transaction, source, out in args.rechunk:
        rechunk_database(Path(source), Path(out), int(per_transaction))
    paths: List[Path] = [QUICK_DATABASE] if args.quick else [
        *args.paths, *(Path(out) for _, out in args.make), *(Path(out) for _, _, out in args.rechunk)]
    if not paths:
        raise SystemExit("bigdb: nothing to measure: give PATHs, --make or --quick")
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"bigdb: no such file: {path}")

    server = None
    if PG_COMMANDS & set(args.commands):
        sys.path.insert(0, str(REPO / "tests"))
        from pgserver import PgServer

        server = PgServer.start()
        log(f"PostgreSQL at {server.dsn}")
    workdir = Path(tempfile.mkdtemp(prefix="bigdb-", dir=args.workdir))
    runs: List[Run] = []
    try:
        bench = Bench(workdir, server.dsn if server else None, args.interval)
        for path in paths:
            runs.extend(bench.database(path.resolve(), args.commands, args.jobs))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if server is not None:
            server.stop()

    note = MEMORY_NOTE.format(interval=args.interval)
    print(markdown(runs))
    print()
    print(f"{note} Python {platform.python_version()}, {os.cpu_count()} CPUs; timings on a shared machine are noisy.")
    problems = [run for run in runs if run.problem]
    for run in problems:
        print(f"\nPROBLEM: {Path(run.database).name} {run.command} --jobs {run.jobs}: {run.problem}")
    if args.json:
        meta = {"python": sys.version, "platform": platform.platform(), "cpus": os.cpu_count(), "note": note}
        args.json.write_text(json.dumps({"meta": meta, "runs": [
            {**asdict(run), "records_per_second": round(run.records_per_second, 1)} for run in runs]}, indent=1) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
