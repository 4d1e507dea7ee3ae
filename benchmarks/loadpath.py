"""The load path of a PostgreSQL storage: a row's jsonb text back to a ZODB record, three ways.

A storage laid out as zodb-pgjsonb's object_state loads an object from
(class_mod, class_name, state). The ways timed, per row:

- (a) old: the driver's json.loads of the jsonb column, then
  unsanitize_from_pg (the storage's walk turning ``{"@ns": base64}`` dicts
  back into strings), then the Rust codec's encode_zodb_record;
- (b) json.loads, then this codec's encode_zodb_record, which reads @ns
  itself (compiled and Python twin);
- (c) this codec's encode_zodb_record_from_pg_json(class_mod, class_name,
  state_json) (compiled and Python twin), which parses the text itself. Until
  a twin has it, its column says "not yet".

The text is what PostgreSQL gives back for the jsonb column (for the Cython
twin's decode_zodb_record_for_pg_json text), or, without a server, that
text itself, in the form a driver hands it over: psycopg 3 gives a jsonb
loader the column's UTF-8 ``bytes`` (its default loader json.loads them, as
(a) and (b) do; an identity loader, docs/api.md, gives them to (c)), and a
``state::text`` cast gives a ``str`` ("(c) ... str").
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # pgserver, pgjsonb

#: The new function of issue 13, looked up in each twin's modules.
NEW_FUNCTION = "encode_zodb_record_from_pg_json"
NOT_YET = "not yet"



class Row(NamedTuple):
    module: str
    name: str
    data: bytes  # the state's JSON text as psycopg hands a jsonb loader: UTF-8 bytes
    text: str  # the same as a state::text cast gives it
    state: Any  # json.loads of it


def unsanitize_from_pg(value: Any) -> Any:
    """Each one-key {"@ns": base64} dict turned back into its (UTF-8) string; unchanged containers kept.

    What zodb-pgjsonb does to every loaded state before handing it to the
    Rust codec, which does not read @ns: a recursive walk over dicts and
    lists, copying a container only when something in it changed.
    """
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("@ns"), str):
            return base64.b64decode(value["@ns"]).decode("utf-8")
        return _with_items_unsanitized(value, value.items())
    if isinstance(value, list):
        return _with_items_unsanitized(value, enumerate(value))
    return value


def _with_items_unsanitized(container: Any, slots: Iterable[Tuple[Any, Any]]) -> Any:
    """container itself if no item changed, else a copy with the changed items (slots: (key or index, item))."""
    copy = None
    for slot, item in slots:
        new = unsanitize_from_pg(item)
        if new is not item:
            if copy is None:
                copy = container.copy()
            copy[slot] = new
    return container if copy is None else copy


def old_path(rust_encode: Callable[[Any], bytes]) -> Callable[[Row], bytes]:
    """(a): json.loads + unsanitize_from_pg + the Rust codec's encode_zodb_record."""
    return lambda row: rust_encode({"@cls": [row.module, row.name], "@s": unsanitize_from_pg(json.loads(row.data))})


def dict_path(encode: Callable[[Any], bytes]) -> Callable[[Row], bytes]:
    """(b): json.loads + encode_zodb_record."""
    return lambda row: encode({"@cls": [row.module, row.name], "@s": json.loads(row.data)})


def text_path(from_pg_json: Callable[[str, str, Any], bytes], as_str: bool = False) -> Callable[[Row], bytes]:
    """(c): the new function, straight from the text (bytes, or the str of a ::text cast)."""
    if as_str:
        return lambda row: from_pg_json(row.module, row.name, row.text)
    return lambda row: from_pg_json(row.module, row.name, row.data)


def parts() -> Dict[str, Callable[[Row], Any]]:
    """The pieces of (a) before the codec: the driver's parse, and the walk over an already parsed state."""
    return {"json.loads": lambda row: json.loads(row.data), "walk": lambda row: unsanitize_from_pg(row.state)}


def state_texts(records: Sequence[bytes], pg_json: Callable[[bytes], tuple], dsn: Optional[str]) -> List[Row]:
    """Rows for records: the codec's text, through a jsonb column and back when dsn is given."""
    decoded = [pg_json(data)[:3] for data in records]
    texts = [text for _module, _name, text in decoded]
    if dsn is not None:
        from pgjsonb import jsonb_texts

        texts = jsonb_texts(dsn, texts)
    return [Row(module, name, text.encode("utf-8"), text, json.loads(text))
            for (module, name, _), text in zip(decoded, texts)]


def fresh_rows(rows: Sequence[Row]) -> List[Row]:
    """The rows with new bytes and str objects of the same texts, as a driver hands them over: no UTF-8 form kept
    in the str (CPython keeps a str's UTF-8 once asked for it, so a second pass over the same texts would not pay
    for it)."""
    return [row._replace(data=(row.data + b" ")[:-1], text=(row.text + " ")[:-1]) for row in rows]


def differences(fn: Callable[[Row], bytes], reference: Callable[[Row], bytes], rows: Sequence[Row]) -> int:
    """How many rows fn turns into other bytes than reference (the new function must match (b) exactly)."""
    return sum(1 for row in rows if fn(row) != reference(row))
