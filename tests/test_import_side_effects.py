"""Importing the codec, and calling it, changes no process-wide state.

A fresh interpreter per twin takes a snapshot of what a library must leave
alone (the recursion limit, the warnings filters, the locale, the signal
handlers), imports every module of the package, compares, calls the eight
functions on a value 1000 levels deep (the deepest the format allows) and
compares again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from twinloader import load_twin

CHILD = textwrap.dedent(
    """
    import json, locale, signal, sys, warnings

    def snapshot():
        handlers = {}
        for signum in sorted(signal.valid_signals()):
            try:
                handlers[int(signum)] = repr(signal.getsignal(signum))
            except (OSError, ValueError):  # signals Python cannot look at (SIGKILL on some systems)
                pass
        return {
            "recursion limit": sys.getrecursionlimit(),
            "warnings filters": [repr(f) for f in warnings.filters],
            "locale": locale.setlocale(locale.LC_ALL),
            "signal handlers": handlers,
        }

    def changes(before, after):
        return {key: [before[key], after[key]] for key in before if before[key] != after[key]}

    before = snapshot()
    import zodb_json_codec
    from zodb_json_codec import _impl, _jsonread, cli
    from zodb_json_codec._db import fidelity  # noqa: F401
    decoder, encoder = _impl.import_twin(zodb_json_codec.IMPLEMENTATION)
    after_import = snapshot()

    value = "leaf"
    for i in range(999):
        value = {"@d": [[i, value]]} if i % 3 == 0 else [value] if i % 3 == 1 else {"k": value}
    record = encoder.encode_zodb_record({"@cls": ["m", "C"], "@s": value})
    module, name, text, refs = decoder.decode_zodb_record_for_pg_json(record)
    assert encoder.encode_zodb_record({"@cls": [module, name], "@s": _jsonread.read_json(text)}) == record
    decoder.decode_zodb_record(record)
    decoder.decode_zodb_record_for_pg(record)
    single = encoder.dict_to_pickle({"v": value})
    assert encoder.json_to_pickle(decoder.pickle_to_json(single)) == single
    assert encoder.dict_to_pickle(decoder.pickle_to_dict(single)) == single
    after_calls = snapshot()

    print("RESULT:" + json.dumps({
        "implementation": zodb_json_codec.IMPLEMENTATION,
        "import": changes(before, after_import),
        "calls": changes(after_import, after_calls),
    }))
    """
)


@pytest.mark.parametrize("twin", ["python", "cython"])
def test_import_and_calls_change_no_process_wide_state(twin):
    load_twin(twin)  # skips, or fails, as the other tests decide for the Cython twin
    env = dict(os.environ, ZODB_JSON_CODEC_PURE_PYTHON="1" if twin == "python" else "0")
    env.pop("PURE_PYTHON", None)
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.split("RESULT:")[-1])
    assert result["implementation"] == twin
    assert result["import"] == {}, "importing the package changed process-wide state"
    assert result["calls"] == {}, "calling the codec changed process-wide state"

