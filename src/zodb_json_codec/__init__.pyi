# Types of the public API (both twins have the same signatures).  Values in
# the marker format are JSON-like trees of dicts, lists, str, int, float,
# bool and None, plus native Python values the encoders accept: Any.
from typing import Any, Dict, Iterable, List, Literal, Optional, Tuple, Union

_Bytes = Union[bytes, bytearray, memoryview]

__version__: str
IMPLEMENTATION: Literal["cython", "python"]

def decode_zodb_record(data: _Bytes) -> Dict[str, Any]: ...
def decode_zodb_record_for_pg(data: _Bytes) -> Tuple[str, str, Any, List[int]]: ...
def decode_zodb_record_for_pg_json(data: _Bytes) -> Tuple[str, str, str, List[int]]: ...
def pickle_to_dict(data: _Bytes) -> Any: ...
def pickle_to_json(data: _Bytes) -> str: ...
def encode_zodb_record(obj: Dict[str, Any], *, policy: Optional[GlobalsPolicy] = None) -> bytes: ...
def encode_zodb_record_from_pg_json(class_mod: str, class_name: str, state_json: Union[str, _Bytes], *,
                                    policy: Optional[GlobalsPolicy] = None) -> bytes: ...
def dict_to_pickle(obj: Dict[Any, Any], *, policy: Optional[GlobalsPolicy] = None) -> bytes: ...
def json_to_pickle(json_str: str, *, policy: Optional[GlobalsPolicy] = None) -> bytes: ...

class GlobalsPolicy:
    mode: str
    entries: Dict[str, Tuple[str, ...]]
    def __init__(self, mode: str = "standard", allow: Iterable[str] = (), files: Iterable[str] = ()) -> None: ...
    def check(self, role: str, module: str, name: str, context: str, args: Any = None,
              attribute: Optional[str] = None) -> None: ...
    def decision(self, role: str, module: str, name: str, args: Any = None) -> Optional[str]: ...

class GlobalRefused(ValueError):
    role: str
    module: str
    name: str
    reason: str
    context: str
    where: str
    allow_line: Optional[str]

def get_globals_policy() -> GlobalsPolicy: ...
def set_globals_policy(policy: Optional[GlobalsPolicy]) -> None: ...

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
