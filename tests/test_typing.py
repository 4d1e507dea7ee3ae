"""The public API's type stubs (``zodb_json_codec/__init__.pyi``, with ``py.typed``).

mypy --strict accepts the stubs of the installed package and code that uses
the API as documented, and refuses misuse (so the stubs are what it reads);
the stubs name the same functions and parameters as both twins.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import pytest

import zodb_json_codec
from zodb_json_codec import _impl

pytest.importorskip("mypy", reason="mypy is not installed (the test extra has it on CPython)")

STUB = Path(zodb_json_codec.__file__).with_name("__init__.pyi")

GOOD_USE = """
    from typing import Any, Dict, List, Literal

    import zodb_json_codec as codec

    record: bytes = codec.encode_zodb_record({"@cls": ["persistent.mapping", "PersistentMapping"], "@s": {}})
    doc: Dict[str, Any] = codec.decode_zodb_record(record)
    module, name, state, refs = codec.decode_zodb_record_for_pg(bytearray(record))
    module, name, state_json, refs = codec.decode_zodb_record_for_pg_json(memoryview(record))
    oids: List[int] = refs
    text: str = module + name + state_json
    value: Any = codec.pickle_to_dict(codec.dict_to_pickle({"k": [1, 2.5, None]}))
    pretty: str = codec.pickle_to_json(codec.json_to_pickle('{"a": 1}'))
    implementation: Literal["cython", "python"] = codec.IMPLEMENTATION
    policy = codec.GlobalsPolicy("strict-calls", allow=["call myapp.Color"])
    codec.set_globals_policy(policy)
    record = codec.encode_zodb_record_from_pg_json("m", "C", "{}", policy=codec.get_globals_policy())
    version: str = codec.__version__
    print(codec.__all__)
"""

# Each line is one mistake mypy must report, on that line.
MISUSE = [
    "codec.decode_zodb_record('not bytes')",
    "n: int = codec.pickle_to_json(b'')",
    "codec.json_to_pickle(b'{}')",
    "codec.encode_zodb_record([1, 2])",
    "flag: bool = codec.IMPLEMENTATION == 'rust' and codec.no_such_function()",
    "oids: List[str] = codec.decode_zodb_record_for_pg(b'')[3]",
    "codec.dict_to_pickle({}, policy='strict')",
]


def mypy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )


def test_stubs_pass_strict(tmp_path):
    assert STUB.exists(), f"no stubs installed beside {zodb_json_codec.__file__}"
    assert STUB.with_name("py.typed").exists()
    # By module name: mypy refuses to check a file path inside site-packages.
    proc = mypy(tmp_path, "-m", "zodb_json_codec")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_documented_use_passes_strict(tmp_path):
    (tmp_path / "use.py").write_text(textwrap.dedent(GOOD_USE))
    proc = mypy(tmp_path, "use.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_misuse_is_refused(tmp_path):
    header = "from typing import List\nimport zodb_json_codec as codec\n"
    (tmp_path / "misuse.py").write_text(header + "\n".join(MISUSE) + "\n")
    proc = mypy(tmp_path, "misuse.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines_with_errors = {int(line.split(":")[1]) for line in proc.stdout.splitlines() if ": error:" in line}
    first = header.count("\n") + 1
    assert lines_with_errors == set(range(first, first + len(MISUSE))), proc.stdout


def stub_signatures() -> Dict[str, List[str]]:
    """Parameter names (keyword-only ones too) of every codec function in the stubs."""
    tree = ast.parse(STUB.read_text())
    return {node.name: [a.arg for a in node.args.args + node.args.kwonlyargs] for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in _impl.DECODE_FUNCTIONS + _impl.ENCODE_FUNCTIONS}


@pytest.mark.parametrize("implementation", ["python", "cython"])
def test_stubs_match_both_twins(implementation):
    try:
        decode, encode = _impl.import_twin(implementation)
    except ImportError as exc:
        if implementation == "cython" and _impl.requested_mode() != _impl.CYTHON:
            pytest.skip(f"Cython twin not built: {exc}")
        raise
    runtime = {name: getattr(decode, name) for name in _impl.DECODE_FUNCTIONS}
    runtime.update({name: getattr(encode, name) for name in _impl.ENCODE_FUNCTIONS})
    assert stub_signatures() == {name: list(inspect.signature(f).parameters) for name, f in runtime.items()}
    stub_all = next(
        ast.literal_eval(node.value) for node in ast.parse(STUB.read_text()).body
        if isinstance(node, ast.Assign) and node.targets[0].id == "__all__"  # type: ignore[attr-defined]
    )
    assert stub_all == zodb_json_codec.__all__
