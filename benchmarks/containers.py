"""How many objects the cycle collector tracks per decoded record, by type.

Counted with gc.get_objects() before and after decoding a whole set into
a list (the collector disabled meanwhile, the list of results itself not
counted), twice: right after decoding ("allocated": what the young
generation walks) and after one gc.collect() ("kept": what every later
full collection walks for as long as the results live). CPython tracks a
dict only once a container is put into it, and untracks tuples (and
dicts) that hold only atoms when a collection meets them. The counts are
exact but for the few objects of the counting itself (a Counter or two
per set, not per record).
"""

from __future__ import annotations

import gc
from collections import Counter
from typing import Any, Callable, Dict, Sequence

KINDS = ("dict", "list", "tuple", "other")


def _tracked_by_kind() -> Counter:
    kinds = Counter()
    for obj in gc.get_objects():
        name = type(obj).__name__
        kinds[name if name in KINDS else "other"] += 1
    return kinds


def tracked_per_record(decode: Callable[[bytes], Any], items: Sequence[bytes]) -> Dict[str, Dict[str, float]]:
    """{"allocated": {kind: per record}, "kept": {...}}, kind in KINDS plus "all"."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        before = _tracked_by_kind()
        results = [decode(x) for x in items]
        allocated = _tracked_by_kind() - before
        gc.collect()
        kept = _tracked_by_kind() - before
    finally:
        if was_enabled:
            gc.enable()
    # The results list itself is one tracked list, not part of any record.
    allocated["list"] -= 1
    kept["list"] -= 1
    assert len(results) == len(items)
    del results
    return {label: _per_record(counts, len(items)) for label, counts in (("allocated", allocated), ("kept", kept))}


def _per_record(counts: Counter, records: int) -> Dict[str, float]:
    out = {kind: counts[kind] / records for kind in KINDS}
    out["all"] = sum(counts[kind] for kind in KINDS) / records
    return out
