"""Copy the reference vectors of the shared corpus into tests/data, keeping only what the tests use.

    python scripts/slim_vectors.py --shared DIR

Reads DIR/corpus/public.reference.jsonl and wikipedia.reference.jsonl.gz
(DIR: the directory that holds the Rust codec's outputs for the corpus,
which is not part of this repository) and writes
tests/data/public.vectors.jsonl.gz and tests/data/wikipedia.vectors.jsonl.gz:
one compact JSON line per record with oid, tid, record (base64), dict and
pg_json (the reference codec's outputs) and its lossless / pg_lossless
labels.  The output is reproducible byte for byte (gzip mtime 0).
"""

import argparse
import gzip
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("oid", "tid", "record", "dict", "pg_json", "lossless", "pg_lossless")
CORPORA = {
    "public": "public.reference.jsonl",
    "wikipedia": "wikipedia.reference.jsonl.gz",
}


def slim(source: Path, target: Path) -> int:
    opener = gzip.open if source.suffix == ".gz" else open
    n = 0
    with opener(source, "rt", encoding="utf-8") as src, open(target, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            for line in src:
                row = json.loads(line)
                slim_row = {field: row.get(field) for field in FIELDS}
                gz.write(json.dumps(slim_row, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
                n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, required=True, metavar="DIR",
                    help="the directory with corpus/public.reference.jsonl and corpus/wikipedia.reference.jsonl.gz")
    args = ap.parse_args()
    out_dir = ROOT / "tests" / "data"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, filename in CORPORA.items():
        target = out_dir / f"{name}.vectors.jsonl.gz"
        n = slim(args.shared / "corpus" / filename, target)
        print(f"{target.relative_to(ROOT)}: {n} records, {target.stat().st_size} bytes")


if __name__ == "__main__":
    main()
