#!/usr/bin/env python3
"""A hunt with the structure generator without libFuzzer: seeded records for a set time, findings shrunk.

    .venv/bin/python fuzz/hunt_structure.py [--seconds 600] [--seed N] [--collect] [--shrink 60] [--log FILE]

Records of tests/picklegen.py, from ``random.Random(seed)`` for seeds N,
N+1, ..., go through tests/recordoracle.py's ``check_record`` (both twins,
the direct lane, the round trips); with --collect, through each decoder of
the Cython twin and its direct lane while the collector empties the lists
made since the call began (``collected_outcome``).  The records are checked
in a worker process, so that a crash or a hang is a finding too (a fresh
worker then goes on).  No clang or atheris needed: the installed codec is
hunted (run it with the venv of the tree to hunt).

Each finding has a kind: its message without values and offsets (a crash:
the call it was in).  After the hunt, the first record of each kind is
shrunk for --shrink seconds: the generator's recorded answers are replayed
with parts removed or lowered (picklegen.replayed_choices) while the finding
keeps its kind, and the shortest record found is printed as a bytes literal,
with its answers for ``--replay``.  --log writes every finding (seconds into
the hunt, records checked, seed, kind, message, record) as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
#: No answer from the worker for this long: a hang (a record whose round trips write megabytes takes 15 s
#: of the oracle on an idle machine, longer on a busy one).
HANG_SECONDS = float(os.environ.get("HUNT_HANG_SECONDS", "180"))
#: The worker's address space (a runaway allocation is a MemoryError, not the machine's memory).
WORKER_MEMORY = int(os.environ.get("HUNT_WORKER_MB", "4096")) << 20
#: This tree's fidelity module: the oracle, whichever codec is hunted.
FIDELITY = HERE.parent / "src" / "zodb_json_codec" / "_db" / "fidelity.py"


def use_this_trees_oracle() -> None:
    """The tests' modules on the path, and this tree's fidelity in place of the hunted codec's.

    A hunt of another tree (PYTHONPATH=OTHER/src, e.g. an older commit) takes the generator and the oracle
    from here: an older fidelity's stand-ins may not load what the generator writes (SETITEM on an object)
    nor compare all it holds.  fidelity imports only the standard library.
    """
    import importlib.util
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import zodb_json_codec._db as db
    if Path(db.__file__).resolve().parent == FIDELITY.parent.resolve() or "zodb_json_codec._db.fidelity" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location("zodb_json_codec._db.fidelity", FIDELITY)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    db.fidelity = module


# ---------------------------------------------------------------------------
# The worker: records in, verdicts out (one JSON line each)
# ---------------------------------------------------------------------------

def worker(collect: bool) -> None:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
    use_this_trees_oracle()
    from picklegen import generate_record, random_choices, replayed_choices
    from recordoracle import RECORD_DECODERS, Failure, Twins, check_record, collected_outcome
    from twinloader import twin_functions

    python, cython = twin_functions("python"), twin_functions("cython")
    twins = Twins(python=python, cython=cython, lane=cython.decode_module._direct_lane_record)
    calls = [(name, getattr(cython, name)) for name in RECORD_DECODERS] + [("the direct lane", twins.lane)]
    for line in sys.stdin:
        job = json.loads(line)
        choices = replayed_choices(job["answers"]) if "answers" in job else random_choices(random.Random(job["seed"]))
        data = generate_record(choices)
        failure = None
        if collect:
            for (label, fn), after in zip(calls, collections_of(choices)):
                print(json.dumps({"calling": f"{label}, the lists emptied at collection {after}"}), flush=True)
                got = collected_outcome(fn, data, after)
                if got[0] == "raised" and not issubclass(got[1], ValueError):
                    failure = f"{label} raised {got[1].__name__} while the collector emptied lists: {got[2][:300]}"
                    break
        else:
            try:
                check_record(data, twins)
            except Failure as found:
                failure = str(found)
        print(json.dumps({"answers": choices.answers, "data": data.hex(), "failure": failure}), flush=True)


class Worker:
    """A worker process; ask() gives its verdict on a job, or the crash or hang it ended in."""

    def __init__(self, collect: bool) -> None:
        self.collect = collect
        self.proc: Optional[subprocess.Popen] = None
        self.buffer = b""

    def start(self) -> None:
        self.errors = tempfile.TemporaryFile()  # the worker's stderr: faulthandler's traceback of a crash
        args = [sys.executable, "-X", "faulthandler", __file__, "--worker"] + (["--collect"] if self.collect else [])
        env = dict(os.environ, PYTHONMALLOC="debug") if self.collect else None  # freed memory filled: crash sooner
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors,
                                     env=env, bufsize=0)
        self.buffer = b""

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            self.errors.close()

    def ask(self, job: dict) -> dict:
        if self.proc is None:
            self.start()
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        calling = "the record's generation or its check"
        while True:
            line = self._line()
            if line is None or line == "hang":
                ended = self._ended(line, calling)
                self.stop()
                return ended
            answer = json.loads(line)
            if "calling" in answer:
                calling = answer["calling"]
                continue
            return answer

    def _line(self) -> Optional[str]:
        """The worker's next line; None if it died, "hang" if none came in time."""
        deadline = time.monotonic() + HANG_SECONDS
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return "hang"
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def _ended(self, line: Optional[str], calling: str) -> dict:
        if line == "hang":
            return {"failure": f"hang: no verdict in {HANG_SECONDS:.0f} s, in {calling}"}
        code = self.proc.wait()
        self.errors.seek(0)
        frames = re.findall(r'File "([^"]+)", line \d+(?:, in| in) (\S+)', self.errors.read().decode(errors="replace"))
        where = frames[0][1] if frames else "?"
        return {"failure": f"crash: exit code {code} in {calling.split(',')[0]} (Python frame: {where})\n"
                           f"in {calling}"}


# ---------------------------------------------------------------------------
# Kinds of findings
# ---------------------------------------------------------------------------

def kind_of(failure: str) -> str:
    """The finding without its values: what broke and where (which decoder or path, which twin)."""
    first = failure.splitlines()[0]
    first = re.sub(r"\(Python frame: [^)]*\)", "", first) if first.startswith("crash") else first
    first = re.sub(r"(the twins differ|holds itself|not the same objects|does not load|refuses it|"
                   r"the expansion budget|raised \w+|is not|wrote other bytes|not JSON|cannot be compared"
                   r"|no verdict).*", r"\1", first)
    return re.sub(r"\d+", "N", first)


# ---------------------------------------------------------------------------
# The hunt and the shrinking
# ---------------------------------------------------------------------------

def hunt(args: argparse.Namespace) -> Dict[str, dict]:
    """Records from consecutive seeds until the time is up: the first finding of each kind."""
    worker = Worker(args.collect)
    found: Dict[str, dict] = {}
    log = open(args.log, "w") if args.log else None
    started = time.monotonic()
    seed, checked = args.seed, 0
    try:
        while time.monotonic() - started < args.seconds:
            verdict = worker.ask({"seed": seed})
            checked += 1
            if verdict["failure"]:
                if "answers" not in verdict:
                    verdict["answers"] = answers_of(seed, args.collect)
                    verdict["data"] = record_of(verdict["answers"]).hex()
                kind = kind_of(verdict["failure"])
                entry = dict(verdict, seed=seed, kind=kind, seconds=round(time.monotonic() - started, 1),
                             checked=checked)
                if log:
                    log.write(json.dumps(entry) + "\n")
                    log.flush()
                if kind not in found:
                    found[kind] = dict(entry, count=0)
                    print(f"[{entry['seconds']:7.1f} s, {checked} records] new: {kind}", flush=True)
                found[kind]["count"] += 1
            seed += 1
    finally:
        worker.stop()
    print(f"hunted {time.monotonic() - started:.0f} s: {checked} records (seeds {args.seed}-{seed - 1}), "
          f"{len(found)} kinds of finding", flush=True)
    return found


def collections_of(choices) -> List[int]:
    """After the record, the collection at which the lists are emptied in each of the four calls."""
    return [choices.integer(0, 150) for _ in range(4)]


def record_of(answers: List[int]) -> bytes:
    """The record the generator writes from these answers (as the worker does)."""
    use_this_trees_oracle()
    from picklegen import generate_record, replayed_choices
    return generate_record(replayed_choices(answers))


def answers_of(seed: int, collect: bool) -> List[int]:
    """The answers the worker's generator drew for the seed (to replay a record whose worker died)."""
    use_this_trees_oracle()
    from picklegen import generate_record, random_choices
    choices = random_choices(random.Random(seed))
    generate_record(choices)
    if collect:
        collections_of(choices)
    return choices.answers


def shrink(entry: dict, collect: bool, seconds: float) -> dict:
    """entry's record shrunk: answers removed or lowered while the finding keeps its kind."""
    worker = Worker(collect)
    best = dict(entry, data=record_of(entry["answers"]).hex())
    deadline = time.monotonic() + seconds

    def better(answers: List[int]) -> bool:
        nonlocal best
        if time.monotonic() > deadline:
            return False
        data = record_of(answers).hex()
        if (len(data), sum(answers)) >= (len(best["data"]), sum(best["answers"])):
            return False
        verdict = worker.ask({"answers": answers})
        if not verdict.get("failure") or kind_of(verdict["failure"]) != entry["kind"]:
            return False
        best = dict(best, failure=verdict["failure"], answers=answers, data=data)
        return True

    try:
        improved = True
        while improved and time.monotonic() < deadline:
            improved = False
            answers = best["answers"]
            size = max(1, len(answers) // 2)
            while size >= 1 and time.monotonic() < deadline:
                i = 0
                while i < len(best["answers"]) and time.monotonic() < deadline:
                    trial = best["answers"][:i] + best["answers"][i + size:]
                    if better(trial):
                        improved = True
                    else:
                        i += size
                size //= 2
            for i in range(len(best["answers"])):
                for lower in (0, best["answers"][i] // 2, best["answers"][i] - 1):
                    if i < len(best["answers"]) and 0 <= lower < best["answers"][i]:
                        trial = list(best["answers"])
                        trial[i] = lower
                        if better(trial):
                            improved = True
                            break
    finally:
        worker.stop()
    return best


def report(found: Dict[str, dict], args: argparse.Namespace) -> None:
    for kind, entry in sorted(found.items(), key=lambda item: item[1]["seconds"]):
        small = shrink(entry, args.collect, args.shrink) if args.shrink > 0 else entry
        data = bytes.fromhex(small["data"]) if small.get("data") else b""
        print(f"\n=== {kind}\n  first after {entry['seconds']} s ({entry['checked']} records, seed {entry['seed']}), "
              f"{entry['count']} in all; shrunk to {len(data)} bytes (from {len(entry.get('data', '')) // 2}):")
        print("  " + "\n  ".join(small["failure"].splitlines()[:12]))
        print(f"  record: {data!r}")
        print(f"  answers (--replay): {json.dumps(small['answers'])}", flush=True)


def replay(args: argparse.Namespace) -> None:
    verdict = Worker(args.collect).ask({"answers": json.loads(args.replay)})
    print(json.dumps(verdict, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600, help="how long to hunt (default 600)")
    parser.add_argument("--seed", type=int, default=None, help="the first seed (default: a random one)")
    parser.add_argument("--collect", action="store_true", help="the collector empties the decoder's lists")
    parser.add_argument("--shrink", type=float, default=60, help="seconds to shrink each kind's first record")
    parser.add_argument("--log", help="write every finding to this file (JSON lines)")
    parser.add_argument("--replay", help="check the record of these answers (a JSON list) and print the verdict")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.collect)
    if args.replay:
        return replay(args)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**32)
    report(hunt(args), args)


if __name__ == "__main__":
    main()
