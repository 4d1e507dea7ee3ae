#!/usr/bin/env python3
"""Sorts the findings of a hunt (fuzz/hunt_structure.py --log) into the kinds of fault commit 4a1ca41 fixed.

    PYTHONPATH=OLD/src python fuzz/review_kinds.py HUNT.jsonl [HUNT-COLLECT.jsonl ...]

Run it with the codec the hunt ran against (the findings are checked again
with it); the generator and the oracle come from this tree (as in the hunt).
The kinds (the review before 4a1ca41; tests/test_sharing.py has a test of each):

1. the Cython twin takes a fetched one-key dict {"@cls": x} for a class
   marker: a value that holds itself (or a MemoryError, a hang walking it)
   where the Python twin gives @pkl, or one past the expansion budget where
   it refuses it;
2. class markers weighed after the value was found cyclic: the twins differ,
   one @pkl, the other a ValueError (or both ValueErrors at other offsets);
3. an index after code that can run: a crash of the Cython twin while a
   __del__ empties the decoder's lists (a hunt with --collect);
4. a key spelled with protocol 0 UNICODE escapes loses its escaping: the
   finding goes away when the record's UNICODE texts are written without
   the escapes pickle does not need;
5. a user dict that becomes marker-shaped after it was filled ({"@cls": L},
   L filled later through the memo) read back as an instance: the record
   fills a "@cls" list late and a round trip loses objects;
(6, documents, no generator finds.)  Anything else is "other" (on e96945c:
faults fixed in other commits, such as escaped-key look-alikes, c7d66ea).

Prints, for each kind, the first finding (seconds into the hunt, records
checked, seed) and how many; --show prints the first record of each kind.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hunt_structure import use_this_trees_oracle  # noqa: E402

use_this_trees_oracle()
from picklegen import generate_described, replayed_choices  # noqa: E402
import pickleops  # noqa: E402
from recordoracle import Failure, Twins, check_record  # noqa: E402
from twinloader import twin_functions  # noqa: E402

PYTHON, CYTHON = twin_functions("python"), twin_functions("cython")
TWINS = Twins(python=PYTHON, cython=CYTHON, lane=CYTHON.decode_module._direct_lane_record)


def failure_of(data: bytes):
    try:
        check_record(data, TWINS)
    except Failure as found:
        return str(found)
    return None


def without_optional_escapes(answers: list) -> bytes:
    """The record of these answers, its UNICODE texts written with only the escapes pickle needs."""
    escaping = pickleops.unicode_line
    pickleops.unicode_line = lambda value, escaped=(): escaping(value, ())
    try:
        return generate_described(replayed_choices(answers))[0]
    finally:
        pickleops.unicode_line = escaping


def kind(entry: dict) -> str:
    failure = entry["failure"]
    first = failure.splitlines()[0]
    data = bytes.fromhex(entry["data"])
    if failure.startswith("crash") or "while the collector emptied" in failure:
        return "3" if "crash" in failure else "other"
    if "[cython] returned a value that holds itself" in first:
        return "1"
    if ("[cython] raised builtins.MemoryError" in first or first.startswith("hang")
            or "[cython] returned a value of weight over" in first):
        try:
            state = PYTHON.decode_zodb_record(data)["@s"]
        except ValueError as exc:
            return "1" if "expansion budget" in str(exc) else "other"
        return "1" if type(state) is dict and list(state) == ["@pkl"] else "other"
    if "the twins differ" in first:
        lines = failure.splitlines()
        py = next((line for line in lines if line.strip().startswith("python:")), "")
        cy = next((line for line in lines if line.strip().startswith("cython:")), "")
        py_pkl, cy_pkl = "'@pkl'" in py or '\\"@pkl\\"' in py or '"@pkl"' in py, "'@pkl'" in cy or '"@pkl"' in cy
        py_raised, cy_raised = "raised" in py, "raised" in cy
        if py_pkl and not cy_pkl and not cy_raised:
            return "1"
        if "expansion budget" in py and not cy_raised:
            return "1"
        if (py_pkl and cy_raised) or (cy_pkl and py_raised) or (py_raised and cy_raised):
            return "2"
        return "other"
    if b"V" in data:
        plain = without_optional_escapes(entry["answers"])
        if plain != data and failure_of(plain) is None:
            return "4"
    features = generate_described(replayed_choices(entry["answers"]))[1]
    if "names filled late" in features and ("not the same objects" in first or "does not load" in first
                                            or "refuses it" in first):
        return "5"
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--show", action="store_true", help="print the first record of each kind")
    args = parser.parse_args()
    for log in args.logs:
        firsts, counts = {}, {}
        for line in open(log):
            entry = json.loads(line)
            k = kind(entry)
            counts[k] = counts.get(k, 0) + 1
            firsts.setdefault(k, entry)
        print(f"== {log}")
        for k in sorted(firsts):
            e = firsts[k]
            print(f"kind {k}: first after {e['seconds']} s, {e['checked']} records (seed {e['seed']}), "
                  f"{counts[k]} findings: {e['failure'].splitlines()[0][:160]}")
            if args.show:
                print(f"   record: {bytes.fromhex(e['data'])[:1500]!r}\n   answers: {json.dumps(e['answers'])}")


if __name__ == "__main__":
    main()
