"""How many objects the cycle collector tracks per decoded record, by type.

Counted with gc.get_objects() before and after decoding a whole set into
a list (the collector disabled meanwhile, the list of results itself not
counted), twice: right after decoding ("allocated": what the young
generation walks) and after one gc.collect() ("kept": what every later
full collection walks for as long as the results live), and the objects
that collection freed as unreachable: cycles a decoder left behind. CPython tracks a
dict only once a container is put into it, and untracks tuples (and
dicts) that hold only atoms when a collection meets them. The objects of the
counting itself are left out.
"""

from __future__ import annotations

import gc
from collections import Counter
from typing import Any, Callable, Dict, Sequence

KINDS = ("dict", "list", "tuple", "other")


def _tracked_by_kind() -> Counter:
    """Tracked objects by kind; what this makes is made after the snapshot, so it counts none of it."""
    names = [type(obj).__name__ for obj in gc.get_objects()]
    return Counter(name if name in KINDS else "other" for name in names)


def tracked_per_record(decode: Callable[[bytes], Any], items: Sequence[bytes]) -> Dict[str, Any]:
    """{"allocated": {kind: per record}, "kept": {...}, "garbage": per record}, kind in KINDS plus "all".

    "garbage" is what the collection found unreachable (reference cycles the
    decoding left behind), per record."""
    was_enabled = gc.isenabled()
    _tracked_by_kind()  # a first call leaves objects behind (the ABC caches Counter consults)
    gc.collect()
    gc.disable()
    try:
        before = _tracked_by_kind()
        results = [decode(x) for x in items]
        allocated = _tracked_by_kind() - before
        garbage = gc.collect()
        kept = _tracked_by_kind() - before
    finally:
        if was_enabled:
            gc.enable()
    # Not part of any record: the results list, and the Counters of the earlier snapshots.
    for counts, earlier_counters in ((allocated, 1), (kept, 2)):
        counts["list"] -= 1
        counts["other"] -= earlier_counters
    assert len(results) == len(items)
    del results
    out = {label: _per_record(counts, len(items)) for label, counts in (("allocated", allocated), ("kept", kept))}
    out["garbage"] = garbage / len(items)
    return out


def _per_record(counts: Counter, records: int) -> Dict[str, float]:
    out = {kind: counts[kind] / records for kind in KINDS}
    out["all"] = sum(counts[kind] for kind in KINDS) / records
    return out
