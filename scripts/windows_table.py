#!/usr/bin/env python3
"""The table of docs/design.md "Where Python code can run", made from the compiled twins' own comments.

    python scripts/windows_table.py            # print the table
    python scripts/windows_table.py --write    # write it into docs/design.md
    python scripts/windows_table.py --check    # exit 1 if a window lacks its comment or the table is stale

A *window* is a function of a .pyx file that reads through a reference it does
not own or past a size it read earlier: a borrowed pointer (``PyList_GET_ITEM``,
``PyTuple_GET_ITEM``, ``PyDict_Next``, ``PyDict_GetItem``, a ``PyObject*`` argument or local
cast to an object, the dict walk's
``zjc_dict_*``, the decoder's ``_only_key``/``_only_value``, the encoder's
``_one_key_value``), an index into a ``list`` without a bounds check
(``boundscheck=False`` is the modules' default: a variable or attribute typed
``list``, or a ``(<list>x)[i]``), or a raw buffer (a ``str``'s or ``bytes``'
characters, the JSON reader's ``r.p``; not the writer's own buffer, which
nothing but the writer can free).  Each one says, in
a comment in its body, what it holds and why no Python code can run while it
does::

    # window: what is held | why that is safe
    #   (lines indented by two more spaces go on)

or names a kind defined once in its module (``# window kind NAME: held | safe``)
with ``# window: NAME``.  A kind that ``covers r.p`` (the JSON reader's text,
which every function of the reader reads) is the comment of each function
whose only window that is.  The scan is textual and errs on the side of finding
too much: a function it flags that holds nothing says so in its comment.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "src" / "zodb_json_codec"
DESIGN = ROOT / "docs" / "design.md"
BEGIN = "<!-- windows table: made by scripts/windows_table.py from the .pyx files; do not edit -->"
END = "<!-- end of the windows table -->"

BORROWED = re.compile(r"\b(PyList_GET_ITEM|PyTuple_GET_ITEM|zjc_dict_next|zjc_dict_run_next|zjc_dict_pair|"
                      r"PyDict_Next|PyDict_GetItem|_only_value|_only_key|_one_key_value)\(")
RAW = re.compile(r"\b(PyBytes_AS_STRING|PyUnicode_DATA|PyUnicode_1BYTE_DATA|zjc_ascii_chars|"
                 r"PyUnicode_AsUTF8AndSize|zjc_bytes_data)\(")
#: The JSON reader's text, a field every function of the reader reads: one kind covers them all.
READER_TEXT = re.compile(r"\br\.p\b")
LIST_ATTRIBUTE_INDEX = re.compile(r"\bctx\.(memo|stack|metastack|refs|watched)\[|\(<list>[\w.]+\)\[")
DEFINITION = re.compile(r"(?:cdef|cpdef|def)\s.*?(\w+)\s*\(")
ANNOTATION = re.compile(r"^\s*# window: (.*)$")
KIND = re.compile(r"^# window kind (\w+)(?: covers ([\w.]+))?: (.*)$")
CONTINUATION = re.compile(r"^\s*#   (.*)$")


@dataclass
class Function:
    module: str
    name: str
    line: int
    reads: List[str] = field(default_factory=list)
    note: Optional[str] = None  # the annotation's text, or a kind's name


def _comment_block(lines: List[str], i: int, first: str) -> str:
    """The annotation starting at lines[i] (its text first) with its continuation lines."""
    parts = [first.strip()]
    for line in lines[i + 1:]:
        more = CONTINUATION.match(line)
        if not more:
            break
        parts.append(more.group(1).strip())
    return " ".join(parts)


def scan(path: Path) -> Tuple[List[Function], Dict[str, str]]:
    """The windows of one .pyx file (with their annotations) and the kinds it defines."""
    lines = path.read_text(encoding="utf-8").splitlines()
    kinds: Dict[str, str] = {}
    covers: Dict[str, str] = {}  # a read ("r.p") -> the kind that says why it is safe wherever it is
    starts = []
    for i, line in enumerate(lines):
        kind = KIND.match(line)
        if kind:
            kinds[kind.group(1)] = _comment_block(lines, i, kind.group(3))
            if kind.group(2):
                covers[kind.group(2)] = kind.group(1)
        found = DEFINITION.match(line)
        if found and not line.startswith((" ", "\t")):
            starts.append((i, found.group(1)))
    windows = []
    for j, (start, name) in enumerate(starts):
        end = starts[j + 1][0] if j + 1 < len(starts) else len(lines)
        body = lines[start:end]
        code = "\n".join(line.split("#", 1)[0] for line in body)
        checked = start > 0 and "boundscheck(True)" in lines[start - 1]
        reads = sorted(set(BORROWED.findall(code)))
        pointers = set(re.findall(r"PyObject\s*\*\s*(\w+)", code))
        if any(re.search(r"<(?:object|str|list|dict|\w+)>\s*%s\b" % re.escape(v), code) for v in pointers):
            reads.append("PyObject* dereferenced")
        if RAW.search(code):
            reads.append("raw buffer")
        if READER_TEXT.search(code):
            reads.append("r.p")
        typed_lists = set(re.findall(r"\blist\s+(\w+)", code))
        if (any(re.search(r"(?<![.\w])%s\[" % re.escape(v), code) for v in typed_lists)
                or LIST_ATTRIBUTE_INDEX.search(code)):
            # A bounds-checked index is safe from memory errors, but says why its IndexError cannot be
            # taken for the input's (the table lists these too).
            reads.append("bounds-checked list index" if checked else "unchecked list index")
        note = None
        for k, line in enumerate(body):
            found = ANNOTATION.match(line)
            if found:
                note = _comment_block(body, k, found.group(1))
                break
        if note is None and reads and all(read in covers for read in reads):
            note = covers[reads[0]]
        if reads or note is not None:
            windows.append(Function(path.stem, name, start + 1, reads, note))
    return windows, kinds


def problems_and_rows() -> Tuple[List[str], List[Tuple[str, str, str]]]:
    problems: List[str] = []
    rows: Dict[Tuple[str, str], List[str]] = {}
    for path in sorted(SOURCES.glob("*.pyx")):
        windows, kinds = scan(path)
        used = set()
        for fn in windows:
            where = f"{path.name}:{fn.line} {fn.name}"
            if fn.note is None:
                problems.append(f"{where}: reads through {', '.join(fn.reads)} without a '# window:' comment")
                continue
            if not fn.reads:
                problems.append(f"{where}: a '# window:' comment, but the scan finds nothing it holds")
                continue
            text = fn.note
            if "|" not in text:
                if text not in kinds:
                    problems.append(f"{where}: '# window: {text}' names no kind of {path.name}")
                    continue
                used.add(text)
                text = kinds[text]
            held, _, safe = (part.strip() for part in text.partition("|"))
            if not held or not safe:
                problems.append(f"{where}: the comment needs 'what is held | why it is safe'")
                continue
            rows.setdefault((held, safe), []).append(f"{path.stem}.{fn.name}")
        for unused in sorted(set(kinds) - used):
            problems.append(f"{path.name}: the kind {unused!r} is used by no window")
    table = [(_where(names), held, safe) for (held, safe), names in rows.items()]
    return problems, table


def _where(names: List[str]) -> str:
    """`module`: `f`, `g`; `other`: `h`: the functions of a row, by module."""
    modules: Dict[str, List[str]] = {}
    for dotted in names:
        module, _, name = dotted.partition(".")
        modules.setdefault(module, []).append(f"`{name}`")
    return "; ".join(f"`{module}`: {', '.join(fns)}" for module, fns in modules.items())


def render(table: List[Tuple[str, str, str]]) -> str:
    out = [BEGIN, "", "| where | what is held | made safe by |", "|---|---|---|"]
    out += [f"| {where} | {held} | {safe} |" for where, held, safe in table]
    return "\n".join(out + ["", END])


def replaced(design: str, table_text: str) -> str:
    begin, end = design.index(BEGIN), design.index(END) + len(END)
    return design[:begin] + table_text + design[end:]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the table into docs/design.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when a comment is missing or the table stale")
    args = parser.parse_args(argv)
    problems, table = problems_and_rows()
    for problem in problems:
        print(problem, file=sys.stderr)
    text = render(table)
    design = DESIGN.read_text(encoding="utf-8")
    if args.write:
        DESIGN.write_text(replaced(design, text), encoding="utf-8")
    elif args.check:
        if replaced(design, text) != design:
            print("docs/design.md: the windows table is not what the .pyx files say "
                  "(python scripts/windows_table.py --write)", file=sys.stderr)
            return 1
    else:
        print(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
