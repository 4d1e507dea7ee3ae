"""The pickle baseline: what a Python program does without the codec, under the codec's function names."""

from __future__ import annotations

import io
import json
import pickle
from typing import Any, Tuple


class Unpickler(pickle.Unpickler):
    """The C unpickler; persistent references stay as their ids (ZODB would turn them into ghosts).

    A method of a subclass: CPython 3.13 no longer lets an instance's
    persistent_load be assigned.
    """

    def persistent_load(self, ref: Any) -> Any:
        return ref


def decode_zodb_record(data: bytes) -> Tuple[Any, Any]:
    """Both pickles of a record, loaded by the C unpickler as ZODB loads them."""
    unpickler = Unpickler(io.BytesIO(data))
    return unpickler.load(), unpickler.load()


def encode_zodb_record(pair: Tuple[Any, Any]) -> bytes:
    return pickle.dumps(pair[0], 3) + pickle.dumps(pair[1], 3)


def decode_zodb_record_for_pg_json(data: bytes) -> str:
    """The state as JSON text: load, then json.dumps with repr() for what JSON cannot spell."""
    _klass, state = decode_zodb_record(data)
    return json.dumps(state, default=repr)


# Loading is all pickle has to offer towards the codec's (module, name, state, refs).
decode_zodb_record_for_pg = decode_zodb_record
