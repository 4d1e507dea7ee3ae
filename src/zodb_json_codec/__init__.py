"""Convert ZODB records (class pickle + state pickle) to JSON and back."""

from ._impl import (
    IMPLEMENTATION,
    decode_zodb_record,
    decode_zodb_record_for_pg,
    decode_zodb_record_for_pg_json,
    dict_to_pickle,
    encode_zodb_record,
    encode_zodb_record_from_pg_json,
    json_to_pickle,
    pickle_to_dict,
    pickle_to_json,
)
from ._globals import GlobalRefused, GlobalsPolicy, get_globals_policy, set_globals_policy
from ._version import __version__

__all__ = [
    "GlobalRefused",
    "GlobalsPolicy",
    "IMPLEMENTATION",
    "__version__",
    "decode_zodb_record",
    "decode_zodb_record_for_pg",
    "decode_zodb_record_for_pg_json",
    "dict_to_pickle",
    "encode_zodb_record",
    "encode_zodb_record_from_pg_json",
    "get_globals_policy",
    "json_to_pickle",
    "pickle_to_dict",
    "pickle_to_json",
    "set_globals_policy",
]
