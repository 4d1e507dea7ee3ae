#!/usr/bin/env python3
"""Harness: bytes -> the choices of tests/picklegen.py's record generator -> tests/recordoracle.py's check_record.

Byte mutations of a pickle rarely keep it a pickle whose containers are
fetched from the memo before they are filled, filled late, hold themselves,
are shared, or whose keys are spelled by other opcodes.  Here libFuzzer's
bytes answer the generator's questions (``picklegen.fuzzed_choices`` of an
``atheris.FuzzedDataProvider``: each answer a ConsumeIntInRange, the lowest
answer, the simplest, once the bytes are used up), so every input is a
record pickle's own unpickler loads, and the fuzzer steers which shapes it
holds by the Cython twin's coverage.  For each record:

1. check_record: the three record decoders of both twins (only ValueError,
   the same outcome strictly, no value that holds itself or outweighs the
   expansion budget), the Cython twin's direct lane (declines, or the Python
   twin's text), and each decoded value back through both twins' encoders to
   a record that loads to the same objects as the input (fidelity), or to
   the very bytes where the decoder gave the record verbatim (@pkl); the
   Cython twin's calls in the small-stack thread and timed (fuzzlib);
2. for one input in eight (the byte after the record's answers decides), one
   Cython decoder again while the collector runs at every allocation and, at
   a collection the next answer chooses, a __del__ empties every list made
   since the call began (recordoracle.collected_outcome: docs/design.md,
   "Where Python code can run"): it may raise ValueError, nothing else, and
   ASan sees any read of a freed item.

Run it through scripts/fuzz (or fuzz/run.sh fuzz_structure [libFuzzer args]).
To see an input's record: ``generate_record(fuzzed_choices(atheris.FuzzedDataProvider(data)))``
with tests/ on sys.path, or ``FUZZ_SHOW=1 bash fuzz/run.sh fuzz_structure FILE`` (its opcodes on stderr).
"""

from __future__ import annotations

import os
import sys

import atheris

import fuzzlib as F  # (puts tests/ on sys.path and imports the instrumented copy's codec)
from picklegen import disassembly, fuzzed_choices, generate_record  # noqa: E402
from recordoracle import RECORD_DECODERS, Failure, Twins, check_record, collected_outcome  # noqa: E402

TWINS = Twins(python=F.PY, cython=F.CY, lane=F.LANE)
COLLECTED = [(name, getattr(F.CY, name)) for name in RECORD_DECODERS] + ([("the direct lane", F.LANE)] if F.LANE else [])
SHOW = os.environ.get("FUZZ_SHOW", "") not in ("", "0")


def call(twin: str, label: str, fn, *args):
    """recordoracle's calls through fuzzlib: timed, the Cython twin's in its small stack."""
    return F.call_py(label, fn, *args) if twin == "python" else F.call_cy(label, fn, *args)


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    record = generate_record(fuzzed_choices(fdp))
    if SHOW:
        print(f"the record ({len(record)} bytes): {record!r}\n{disassembly(record)}", file=sys.stderr, flush=True)
    try:
        check_record(record, TWINS, call)
    except Failure as failure:
        raise F.Finding(f"{failure}\n  the record ({len(record)} bytes): {record[:3000]!r}") from None
    if fdp.ConsumeIntInRange(0, 7) == 7:
        label, fn = COLLECTED[fdp.ConsumeIntInRange(0, len(COLLECTED) - 1)]
        after = fdp.ConsumeIntInRange(0, 150)
        got = collected_outcome(fn, record, after)
        if got[0] == "raised" and not issubclass(got[1], ValueError):
            raise F.Finding(f"{label} [cython] raised {got[1].__module__}.{got[1].__qualname__} while the "
                            f"collector emptied the lists made since the call began (collection {after}): "
                            f"{got[2][:300]}\n  the record ({len(record)} bytes): {record[:3000]!r}")


if __name__ == "__main__":
    F.main(TestOneInput)
