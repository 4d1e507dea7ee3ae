"""How long ``import zodb_json_codec`` takes, per interpreter environment, timed the same way for each.

    python benchmarks/import_time.py [--rounds N] LABEL=PYTHON[:NAME=VALUE,...] ...

Each contender is a Python executable (typically a virtualenv holding one
wheel) and optional environment settings, e.g.::

    python benchmarks/import_time.py cython=/tmp/ours/bin/python \\
        python=/tmp/ours/bin/python:ZODB_JSON_CODEC_PURE_PYTHON=1 rust=/tmp/rust/bin/python

Per round, every contender runs ``python -X importtime -c "import
zodb_json_codec"`` in a fresh process (contenders alternating, the order
rotating), and the cumulative time CPython reports for ``zodb_json_codec``
is kept; the table gives the minimum and the median over the rounds, and
what else the import brought in (modules not imported by ``python -c pass``).
``--preload json,re,typing`` imports those modules first, as an application
that already uses them has: the time left is the codec's own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List

CODE = "import zodb_json_codec"


@dataclass
class Contender:
    label: str
    python: str
    env: Dict[str, str]
    times_us: List[int] = field(default_factory=list)

    def run(self, code: str) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ZODB_JSON_CODEC_PURE_PYTHON")}
        env.update(self.env)
        proc = subprocess.run([self.python, "-X", "importtime", "-c", code], env=env,
                              capture_output=True, text=True, check=True)
        return proc.stderr


def parse(spec: str) -> Contender:
    label, _, rest = spec.partition("=")
    python, _, settings = rest.partition(":")
    env = dict(item.split("=", 1) for item in settings.split(",") if item)
    return Contender(label, python, env)


def cumulative_us(importtime: str, module: str) -> int:
    for line in importtime.splitlines():
        # "import time:   self [us] | cumulative | imported package"
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1])
    raise ValueError(f"{module} not in -X importtime output:\n{importtime}")


def modules(importtime: str) -> List[str]:
    return [line.split("|")[2].strip() for line in importtime.splitlines()[1:] if line.count("|") == 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--preload", default="", metavar="MODULES", help="comma-separated modules imported first")
    ap.add_argument("contenders", nargs="+", type=parse)
    args = ap.parse_args()
    contenders: List[Contender] = args.contenders
    preload = "".join(f"import {m}; " for m in args.preload.split(",") if m)
    code, baseline = preload + CODE, preload + "pass"
    for r in range(args.rounds):
        shift = r % len(contenders)
        for c in contenders[shift:] + contenders[:shift]:
            c.times_us.append(cumulative_us(c.run(code), "zodb_json_codec"))
    print("| contender | min | median | modules it imports |")
    print("|---|---:|---:|---|")
    for c in contenders:
        extra = sorted(set(modules(c.run(code))) - set(modules(c.run(baseline))))
        print(f"| {c.label} | {min(c.times_us) / 1000:.2f} ms | {statistics.median(c.times_us) / 1000:.2f} ms "
              f"| {len(extra)}: {', '.join(m.strip() for m in extra)} |")
    print(f"\n{args.rounds} rounds{', preloaded: ' + args.preload if args.preload else ''}")


if __name__ == "__main__":
    main()
