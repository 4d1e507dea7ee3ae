"""How much of the load path's (c) is turning a str into UTF-8, which report.py's rounds hide.

    python benchmarks/textcache.py [SET]      (default: wikipedia)

encode_zodb_record_from_pg_json reads a str through its UTF-8 form, which
CPython computes once and keeps in the str.  report.py's load part hands the
same row texts to every round, so from the second round on (c) reads a kept
UTF-8 form; a storage gets a new str from the driver for every row.  This
times the Cython twin's (c) on the same texts ("kept") and on fresh copies
made before each round, outside the timing ("fresh"), beside (b), json.loads
+ encode_zodb_record, on fresh copies; texts are the codec's own pg_json
text; minimum of 9 rounds each, alternating.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import datasets  # noqa: E402
from zodb_json_codec import _impl  # noqa: E402

Row = Tuple[str, str, str]


def rows_of(name: str, pg_json: Callable[[bytes], tuple]) -> List[Row]:
    rows = []
    for data in datasets.load(name):
        try:
            module, klass, text, _refs = pg_json(data)
        except ValueError:
            continue
        rows.append((module, klass, text))
    return rows


def fresh(rows: List[Row]) -> List[Row]:
    """The rows with new str objects of the same text (no UTF-8 form kept in them)."""
    return [(module, klass, (text + " ")[:-1]) for module, klass, text in rows]


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "wikipedia"
    decoder, encoder = _impl.import_twin("cython")
    rows = rows_of(name, decoder.decode_zodb_record_for_pg_json)
    from_text, encode = encoder.encode_zodb_record_from_pg_json, encoder.encode_zodb_record
    def text_way(row: Row) -> bytes:
        return from_text(*row)

    def dict_way(row: Row) -> bytes:
        return encode({"@cls": [row[0], row[1]], "@s": json.loads(row[2])})

    # label -> (way, whether each round gets fresh copies of the texts)
    ways: Dict[str, Tuple[Callable[[Row], bytes], bool]] = {
        "(c) kept": (text_way, False), "(c) fresh": (text_way, True), "(b) fresh": (dict_way, True),
    }
    best = {label: float("inf") for label in ways}
    for _ in range(9):
        for label, (way, new_texts) in ways.items():
            texts = fresh(rows) if new_texts else rows
            start = time.perf_counter()
            for row in texts:
                way(row)
            best[label] = min(best[label], time.perf_counter() - start)
    per = {label: secs / len(rows) * 1e6 for label, secs in best.items()}
    print(f"{name}: {len(rows)} records, µs per record: "
          + ", ".join(f"{label} {us:.2f}" for label, us in per.items()))
    print(f"(c)/(b): kept {per['(c) kept'] / per['(b) fresh']:.2f}, fresh {per['(c) fresh'] / per['(b) fresh']:.2f}")


if __name__ == "__main__":
    main()
