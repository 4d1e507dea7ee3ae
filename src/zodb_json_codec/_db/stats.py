"""What a database holds: records per class, with their pickle and JSON sizes."""

from __future__ import annotations

from typing import IO, Dict, List, Optional, Sequence, Tuple

import zodb_json_codec as codec

from .parallel import map_records
from .progress import Progress
from .storage import Part, open_storage, records

UNDECODABLE = "(not decodable)"
Sizes = Dict[str, List[int]]  # class -> [records, pickle bytes, JSON bytes]


def size_batch(batch: Sequence[Tuple[bytes, bytes, bytes]]) -> Sizes:
    """The sizes of a batch of records, summed by class (a small answer for a big batch)."""
    sizes: Sizes = {}
    for _, _, data in batch:
        try:
            module, name, state_json, _ = codec.decode_zodb_record_for_pg_json(data)
        except Exception:  # noqa: BLE001 - counted apart; verify says why
            key, json_size = UNDECODABLE, 0
        else:
            key, json_size = f"{module}.{name}", len(state_json.encode("utf-8", "surrogatepass"))
        entry = sizes.get(key)
        if entry is None:
            sizes[key] = [1, len(data), json_size]
        else:
            entry[0] += 1
            entry[1] += len(data)
            entry[2] += json_size
    return sizes


def stats(source: Optional[str], *, out: IO[str], err: IO[str], jobs: int = 1, part: Optional[Part] = None,
          all_revisions: bool = False) -> int:
    """A table of the classes in the FileStorage source, most records first, and a total line."""
    totals: Sizes = {}
    progress = Progress("stats", err)
    with open_storage(source) as storage:
        try:
            for sizes in map_records(records(storage, all_revisions, part), size_batch, jobs, progress):
                for key, (count, pickle_size, json_size) in sizes.items():
                    entry = totals.setdefault(key, [0, 0, 0])
                    entry[0] += count
                    entry[1] += pickle_size
                    entry[2] += json_size
        finally:
            progress.close()
    rows = sorted(totals.items(), key=lambda item: (-item[1][0], item[0]))
    total = [sum(entry[i] for _, entry in rows) for i in range(3)]
    print(f"{'records':>10} {'pickle bytes':>14} {'JSON bytes':>14}  class", file=out)
    for key, (count, pickle_size, json_size) in rows:
        print(f"{count:>10} {pickle_size:>14} {json_size:>14}  {key}", file=out)
    what = "record revisions" if all_revisions else "objects"
    print(f"{total[0]:>10} {total[1]:>14} {total[2]:>14}  total: {len(rows)} classes, {what}", file=out)
    return 1 if UNDECODABLE in totals else 0
