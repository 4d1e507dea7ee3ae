"""Generated records whose values share their parts: both twins agree, and what decodes encodes back.

Records written opcode by opcode (tests/picklegen.py: containers fetched
from the memo before they are filled, filled late, holding themselves, keys
spelled by every protocol, marker look-alikes, chains that double...) go
through every record decoder of the twin, the Cython twin's next to the
Python twin's and its direct lane, and back through the encoders
(tests/recordoracle.py says what must hold).  The same generator drives
fuzz/fuzz_structure.py; fuzz/hunt_structure.py runs it for a set time and
shrinks what it finds.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import MAX_EXAMPLES
from picklegen import disassembly, generate_record, hypothesis_choices, random_choices
from recordoracle import Failure, Twins, check_record
from twinloader import load_twin

HERE = Path(__file__).resolve().parent

# The same records each run (derandomize): the suite shows what a change breaks; fuzz/hunt_structure.py and
# fuzz/fuzz_structure.py explore (and found what is still open: fuzz/README.md, "Open findings").
SETTINGS = settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def generated_records(draw) -> bytes:
    return generate_record(hypothesis_choices(draw))


def twins_of(impl) -> Twins:
    """The Python twin alone for [python]; for [cython] the Cython twin beside it, and its direct lane."""
    if impl.name == "python":
        return Twins(python=impl, cython=None, lane=None)
    return Twins(python=load_twin("python"), cython=impl, lane=impl.decode_module._direct_lane_record)


def checked(data: bytes, twins: Twins) -> None:
    """check_record, its failure shown with the record (a bytes literal) and its opcodes."""
    try:
        check_record(data, twins)
    except Failure as failure:
        listing = "\n".join(disassembly(data).splitlines()[:150])
        raise Failure(f"{failure}\n\nthe record ({len(data)} bytes): {data!r}\n{listing}") from None


@SETTINGS
@given(data=generated_records())
def test_generated_records_decode_alike_and_round_trip(impl, data):
    checked(data, twins_of(impl))


def test_every_profile_and_shape_is_generated():
    # The generator reaches what it is for: records in each profile, containers filled after they were
    # fetched, marker keys spelled with protocol 0 escapes, long records; and pickle loads every one.
    from zodb_json_codec._db import fidelity
    seen = set()
    for seed in range(400):
        data = generate_record(random_choices(random.Random(seed)))
        fidelity.load_record(data)
        seen.add("unicode escape" if b"V\\u0040" in data else None)
        seen.add("late fill" if b"h\x01a" in data or b"h\x01(" in data else None)
        seen.add("protocol 4" if data.startswith(b"\x80\x04") else None)
        seen.add("protocol 0" if data[:1] in (b"c", b"(") else None)
        seen.add("long" if len(data) > 2048 else None)
    assert seen >= {"unicode escape", "late fill", "protocol 4", "protocol 0", "long"}, seen


# ---------------------------------------------------------------------------
# A collector that empties the decoder's own lists
# ---------------------------------------------------------------------------

#: Records of each run (a child process): 18-27 s on the busy 2-core machine (each of the four calls runs with
#: the collector at every allocation); fuzz/hunt_structure.py --collect runs longer searches.
COLLECTED_RECORDS = 2 * MAX_EXAMPLES

COLLECTED = textwrap.dedent('''
    import random, sys
    sys.path.insert(0, {tests!r})
    from picklegen import generate_record, random_choices
    from recordoracle import RECORD_DECODERS, collected_outcome
    from twinloader import twin_functions
    cython = twin_functions("cython")
    calls = [(name, getattr(cython, name)) for name in RECORD_DECODERS]
    calls.append(("the direct lane", cython.decode_module._direct_lane_record))
    for seed in range({first}, {first} + {count}):
        rnd = random.Random(seed)
        data = generate_record(random_choices(rnd))
        for label, fn in calls:
            after = rnd.randrange(150)
            print(seed, after, label, flush=True)
            got = collected_outcome(fn, data, after)
            if got[0] == "raised" and not issubclass(got[1], ValueError):
                print("raised", got[1].__name__, got[2][:300], flush=True)
    print("survived")
''')


def test_collections_that_empty_the_decoders_lists():
    # docs/design.md, "Where Python code can run": a __del__ run by a collection inside a decode may reach
    # the decoder's own lists through gc.get_objects().  Here one empties every list made since the call
    # began, at a collection the record's seed chooses, while the collector runs at every allocation: the
    # Cython twin must not crash (and raise nothing but ValueError).  In a child process, which a crash
    # ends; the seeds start at a random number, shown when something is found.
    load_twin("cython")  # skips, saying why, where the Cython twin cannot be had (PyPy, no build)
    first = random.SystemRandom().randrange(2**32)
    script = COLLECTED.format(tests=str(HERE), first=first, count=COLLECTED_RECORDS)
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", script], capture_output=True, text=True,
                          timeout=600)
    lines = done.stdout.splitlines()
    if done.returncode == 0 and lines[-1:] == ["survived"] and not any(l.startswith("raised") for l in lines):
        return
    last = [line for line in lines if not line.startswith("raised")][-1]
    seed, after, label = last.split(" ", 2)
    data = generate_record(random_choices(random.Random(int(seed))))
    pytest.fail(f"{label} of the Cython twin, the collector emptying the lists made since the call began at "
                f"collection {after}: exit code {done.returncode}\n{done.stdout[-600:]}\n{done.stderr[-3000:]}\n"
                f"the record (seed {seed}): {data!r}\n" + "\n".join(disassembly(data).splitlines()[:100]),
                pytrace=False)
