"""Fixtures of the benchmark suites: ``twin`` (pickle or one twin), ``dataset``, ``records`` and ``time_each``."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, List, Sequence

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # datasets, baseline
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # twinloader, as the tests load twins

import baseline  # noqa: E402
import datasets  # noqa: E402
from twinloader import load_twin  # noqa: E402

# The functions the suites time, by their public names.
TIMED_FUNCTIONS = (
    "decode_zodb_record",
    "decode_zodb_record_for_pg",
    "decode_zodb_record_for_pg_json",
    "encode_zodb_record",
)

# Short loops for the one-record shapes (thousands of rounds even so) keep the
# whole run within a few minutes; scans get at least five whole passes.
SYNTHETIC_TIMING = pytest.mark.benchmark(max_time=0.5)
SCAN_TIMING = pytest.mark.benchmark(max_time=1.0, min_rounds=5)


@pytest.fixture(scope="session", params=["pickle", "python", "cython"])
def twin(request: pytest.FixtureRequest) -> SimpleNamespace:
    """The pickle baseline or one twin (skipped or failed as tests/twinloader.load_twin decides)."""
    if request.param == "pickle":
        return SimpleNamespace(name="pickle", **{name: getattr(baseline, name) for name in TIMED_FUNCTIONS})
    return load_twin(request.param)


@pytest.fixture(
    scope="session",
    params=[pytest.param(name, id=name, marks=SYNTHETIC_TIMING) for name in datasets.SYNTHETIC_NAMES]
    + [pytest.param(name, id=name, marks=SCAN_TIMING) for name in datasets.FS_NAMES + datasets.GENERATED_NAMES],
)
def dataset(request: pytest.FixtureRequest) -> List[bytes]:
    """The records of one dataset: a synthetic shape (one record) or a whole FileStorage scan (or generated one)."""
    return datasets.load(request.param)


@pytest.fixture
def records(twin: SimpleNamespace, dataset: List[bytes]) -> List[bytes]:
    """The dataset, once the contender is known to read it.

    The C unpickler must import every class a record names; where the
    corpus's application classes are not importable (public.fs), the pickle
    baseline is skipped with the reason, rather than timed on something else.
    """
    if twin.name == "pickle":
        try:
            for data in dataset:
                baseline.decode_zodb_record(data)
        except (ImportError, AttributeError) as exc:
            pytest.skip(f"pickle cannot load these records without their classes: {exc}")
    return dataset


def _each(function: Callable[[Any], Any], items: Sequence[Any]) -> List[Any]:
    return [function(item) for item in items]


@pytest.fixture
def time_each(benchmark) -> Callable[[Callable[[Any], Any], Sequence[Any]], List[Any]]:
    """time_each(function, items): benchmark one pass of function over all items, and return its results.

    A pass is the unit timed, so a scan's time is per scan; extra_info's
    ``records`` gives the time per record (mean / records).
    """

    def run(function: Callable[[Any], Any], items: Sequence[Any]) -> List[Any]:
        benchmark.extra_info["records"] = len(items)
        results = benchmark(_each, function, items)
        assert len(results) == len(items)
        return results

    return run
