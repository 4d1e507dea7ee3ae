"""Instructions per record of one twin's operation on a set, counted by callgrind.

    python benchmarks/instructions.py SET OP [--twin cython|python] [--repeat N]

OP is decode, pg_json, encode or from_pg_json (encode_zodb_record_from_pg_json
of the record's pg_json text, as the UTF-8 bytes psycopg hands a jsonb loader).  Wall-clock timings on shared 2-core
machines move by 5-10% from run to run; callgrind's instruction count does
not, so small changes to a hot loop (a call saved, a list not built) are
compared by it: run this in two trees (PYTHONPATH=<tree>/src) and compare.
It counts instructions, not time (cache misses and branch mispredictions are
not in it): confirm a change that matters with benchmarks/report.py.

The count is the difference between a run that works through the set 2N times
and one that works through it N times, divided by the N passes' records, so
start-up, import and what only the first calls do (a lazy import, a cache
filled) are not in it: against a run that only loads the set, such one-time
work added up to 10 instructions a record to the one-record sets.  Needs
valgrind.
"""

import argparse
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _records(name, op, twin):
    import datasets

    records = list(datasets.load(name))
    if op in ("decode", "pg_json"):
        return records
    decoder = importlib.import_module(f"zodb_json_codec._decode_{twin}")
    if op == "from_pg_json":
        rows = [decoder.decode_zodb_record_for_pg_json(r)[:3] for r in records]
        return [(module, name, text.encode("utf-8")) for module, name, text in rows]
    return [decoder.decode_zodb_record(r) for r in records]


def operation(op, twin):
    """The twin's function of op, taking one of _records' items."""
    side = "decode" if op in ("decode", "pg_json") else "encode"
    module = importlib.import_module(f"zodb_json_codec._{side}_{twin}")
    function = {"decode": "decode_zodb_record", "pg_json": "decode_zodb_record_for_pg_json",
                "encode": "encode_zodb_record", "from_pg_json": "encode_zodb_record_from_pg_json"}[op]
    f = getattr(module, function)
    if op == "from_pg_json":
        return lambda row: f(*row)  # (module, name, state_json)
    return f


def _work(name, op, twin, repeat):
    """The inner run (under callgrind): the set's records through op, repeat times."""
    records = _records(name, op, twin)
    f = operation(op, twin)
    for _ in range(repeat):
        for r in records:
            f(r)
    return len(records)


def _count(args, repeat):
    """Instructions of a callgrind run of this script doing repeat rounds."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
               args.set, args.op, "--twin", args.twin, "--repeat", str(repeat), "--inner"]
    env = dict(os.environ, PYTHONHASHSEED="0")  # str hashes, and so dict probing, the same in every run
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    found = re.search(r"refs:\s+([\d,]+)", done.stderr)
    if not found:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("set")
    parser.add_argument("op", choices=("decode", "pg_json", "encode", "from_pg_json"))
    parser.add_argument("--twin", choices=("cython", "python"), default="cython")
    parser.add_argument("--repeat", type=int, default=0, help="rounds (default: about 1000 records' worth)")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        _work(args.set, args.op, args.twin, args.repeat)
        return
    count = len(_records(args.set, args.op, args.twin))
    repeat = args.repeat or max(1, 1000 // count)
    per_record = (_count(args, 2 * repeat) - _count(args, repeat)) / (repeat * count)
    print(f"{args.set} {args.op} ({args.twin} twin): {per_record:,.0f} instructions per record")


if __name__ == "__main__":
    main()
