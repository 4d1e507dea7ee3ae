"""The load path's (c) on the same str texts every round against fresh copies of them.

    python benchmarks/textcache.py [SET]      (default: wikipedia)

A str keeps its UTF-8 form once CPython has made it, so a benchmark that
hands every round the same texts can time something no storage sees (a
driver gives a new str for every row).  encode_zodb_record_from_pg_json
reads a str without that form (it writes the UTF-8 into a buffer of its
own), so the two should time alike.  This times the Cython twin's (c) on the same
texts ("kept") and on fresh copies made before each round, outside the
timing ("fresh"), beside (b), json.loads + encode_zodb_record, on fresh
copies; texts are the codec's own pg_json text; minimum of 9 rounds each,
alternating.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import datasets  # noqa: E402
import loadpath  # noqa: E402
from zodb_json_codec import _impl  # noqa: E402

def decodable(records: List[bytes], pg_json: Callable[[bytes], tuple]) -> List[bytes]:
    """The records pg_json takes (the public corpus holds a few it refuses)."""
    def ok(data: bytes) -> bool:
        try:
            pg_json(data)
        except ValueError:
            return False
        return True
    return [data for data in records if ok(data)]


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "wikipedia"
    decoder, encoder = _impl.import_twin("cython")
    pg_json = decoder.decode_zodb_record_for_pg_json
    rows = loadpath.state_texts(decodable(datasets.load(name), pg_json), pg_json, None)
    text_way = loadpath.text_path(encoder.encode_zodb_record_from_pg_json)
    dict_way = loadpath.dict_path(encoder.encode_zodb_record)
    # label -> (way, whether each round gets fresh copies of the texts)
    ways: Dict[str, Tuple[Callable[[loadpath.Row], bytes], bool]] = {
        "(c) kept": (text_way, False), "(c) fresh": (text_way, True), "(b) fresh": (dict_way, True),
    }
    best = {label: float("inf") for label in ways}
    for _ in range(9):
        for label, (way, new_texts) in ways.items():
            texts = loadpath.fresh_rows(rows) if new_texts else rows
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
