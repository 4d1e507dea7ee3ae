"""The Cython twins' opcode enum (_opcodes.pxd) lists exactly pickletools' opcodes, valued as in pickle."""

from __future__ import annotations

import pickle
import pickletools
import re
from pathlib import Path
from typing import Dict, List

import pytest

SOURCE_PXD = Path(__file__).resolve().parent.parent / "src" / "zodb_json_codec" / "_opcodes.pxd"


def _installed_pxd() -> Path:
    import zodb_json_codec

    return Path(zodb_json_codec.__file__).resolve().parent / "_opcodes.pxd"


def pxd_copies() -> List[Path]:
    """The source tree's copy and the installed package's (when it is another file): both are checked."""
    found = []
    for path in (SOURCE_PXD, _installed_pxd()):
        if path.exists() and all(not path.samefile(p) for p in found):
            found.append(path)
    return found


def expected() -> Dict[str, int]:
    """Every opcode pickletools knows, valued as the pickle module spells it (pickletools' code where it has none)."""
    want = {}
    for op in pickletools.opcodes:
        constant = getattr(pickle, op.name, None)
        code = constant if isinstance(constant, bytes) else op.code.encode("latin-1")
        assert len(code) == 1, (op.name, code)
        want[op.name] = code[0]
    return want


_ENUM_START = re.compile(r"^cdef\s+enum\s+Opcode\s*:\s*(#.*)?$")
_MEMBER = re.compile(r"^\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*0x([0-9A-Fa-f]{2})\s*(#.*)?$")


def parse_enum(text: str) -> Dict[str, int]:
    """The members of ``cdef enum Opcode:``; a line in its body that is not ``NAME = 0xNN`` is an error.

    Strict on purpose: a decimal value, a trailing comma, a duplicated name
    would each change what the Cython twins compare bytes against.
    """
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _ENUM_START.match(line)]
    if len(starts) != 1:
        raise ValueError(f"expected one 'cdef enum Opcode:' line, found {len(starts)}")
    members: Dict[str, int] = {}
    for number, line in enumerate(lines[starts[0] + 1:], starts[0] + 2):
        if not line.strip() or line.strip().startswith("#"):
            continue
        if not line[0].isspace():
            break  # the enum's body ended
        m = _MEMBER.match(line)
        if m is None:
            raise ValueError(f"line {number}: not 'NAME = 0xNN': {line!r}")
        name, value = m.group(1), int(m.group(2), 16)
        if name in members:
            raise ValueError(f"line {number}: {name} listed twice")
        members[name] = value
    return members


def problems(members: Dict[str, int]) -> List[str]:
    want = expected()
    found = [f"missing: {name} = 0x{want[name]:02X}" for name in want if name not in members]
    found += [f"not a pickle opcode: {name} = 0x{members[name]:02X}" for name in members if name not in want]
    found += [f"{name} = 0x{members[name]:02X}, but pickle.{name} is 0x{want[name]:02X}"
              for name in members if name in want and members[name] != want[name]]
    return found


def test_the_pxd_is_there():
    # Not skipped when missing: the design has both Cython twins cimport it.
    assert pxd_copies(), f"no _opcodes.pxd at {SOURCE_PXD} nor in the installed package"


@pytest.mark.parametrize("path", pxd_copies(), ids=lambda p: "source" if p == SOURCE_PXD else "installed")
def test_the_enum_lists_exactly_the_pickle_opcodes(path: Path):
    members = parse_enum(path.read_text(encoding="utf-8"))
    assert problems(members) == []
    assert len(members) == len(pickletools.opcodes)


def test_the_expected_table_is_the_pickle_modules():
    # Spot checks that expected() reads pickle's constants, not some other table.
    want = expected()
    assert want["BININT"] == pickle.BININT[0] == 0x4A
    assert want["STOP"] == 0x2E and want["MARK"] == 0x28 and want["FRAME"] == 0x95
    assert len(want) == len(pickletools.opcodes) >= 68


ENUM = """\
# cython: language_level=3
cdef enum Opcode:
    STOP = 0x2E
    MARK = 0x28  # a comment
"""


def test_the_check_finds_missing_extra_and_wrong_values():
    members = parse_enum(ENUM)
    assert members == {"STOP": 0x2E, "MARK": 0x28}
    found = problems({**members, "BININT": 0x4B, "TRUE": 0x88})
    assert "BININT = 0x4B, but pickle.BININT is 0x4A" in found
    assert "not a pickle opcode: TRUE = 0x88" in found
    assert "missing: FRAME = 0x95" in found
    assert not any(p.split(": ")[-1].split()[0] in ("STOP", "MARK") for p in found)


@pytest.mark.parametrize("body", ["    BININT = 74", "    BININT = 0x4A,", "    BININT: 0x4A",
                                  "    STOP = 0x2E\n    STOP = 0x2E"])
def test_the_parser_refuses_what_it_cannot_read(body: str):
    with pytest.raises(ValueError):
        parse_enum("cdef enum Opcode:\n" + body + "\n")


def test_the_parser_needs_the_enum():
    with pytest.raises(ValueError):
        parse_enum("cdef enum Other:\n    STOP = 0x2E\n")
