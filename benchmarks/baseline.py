"""The pickle baseline: what a Python program does without the codec, under the codec's function names."""

from __future__ import annotations

import io
import json
import pickle
from typing import Any, Tuple


def decode_zodb_record(data: bytes) -> Tuple[Any, Any]:
    """Both pickles of a record, loaded by the C unpickler as ZODB loads them."""
    unpickler = pickle.Unpickler(io.BytesIO(data))
    # Persistent references stay as their ids: ZODB would turn them into ghosts.
    unpickler.persistent_load = lambda ref: ref
    return unpickler.load(), unpickler.load()


def encode_zodb_record(pair: Tuple[Any, Any]) -> bytes:
    return pickle.dumps(pair[0], 3) + pickle.dumps(pair[1], 3)


def decode_zodb_record_for_pg_json(data: bytes) -> str:
    """The state as JSON text: load, then json.dumps with repr() for what JSON cannot spell."""
    _klass, state = decode_zodb_record(data)
    return json.dumps(state, default=repr)


# Loading is all pickle has to offer towards the codec's (module, name, state, refs).
decode_zodb_record_for_pg = decode_zodb_record
