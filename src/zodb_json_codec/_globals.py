"""Which globals a record the encoders write may name: the globals policy (docs/security.md).

Everything the encoders turn back into a record, ZODB unpickles in every Zope
process: it imports each global the record names and, for some, calls it.
JSON from a database may have been edited by anyone with SQL, so the
encoders check each global a value names against a policy, by the *role* the
marker that names it gives it:

* ``CALL``: called at load with arguments from the record (a ``@reduce``
  callable, ``@inst``'s ``@callable``, an instance rebuilt by ``REDUCE``,
  every name inside a ``@pkl`` record);
* ``CLASS``: a class the load makes an instance of, without calling it with the
  record's arguments (the record's class, ``@cls`` with ``@s``, ``NEWOBJ``,
  a reference's class, the class given to ``copyreg._reconstructor`` or
  ``__newobj__``);
* ``VALUE``: a bare ``{"@cls": [module, name]}``, imported and kept as a
  value (nothing runs at load).

Globals the encoders write for their own markers (``@dt``, ``@dec``, ``@set``,
...) are not checked.  The rules live here once; both twins call
``GlobalsPolicy.check`` where they write a global, and a decided name is a
dict lookup (the Cython twin keeps its own table of names already allowed).
"""

from __future__ import annotations

import builtins
import logging
import os
import pickletools
import sys
import warnings
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from ._common import CodecError
from ._known import MAX_MARKER_KEYS, global_name, marker_kind, tuple_items

CALL, CLASS, VALUE = "call", "class", "value"
ROLES = (CALL, CLASS, VALUE)

MODES = ("standard", "strict-calls", "strict", "warn", "unrestricted")
#: The environment: the mode (any of MODES but unrestricted), and allowlist files added to every policy
#: built from it (os.pathsep between them).
MODE_VARIABLE = "ZODB_JSON_CODEC_GLOBALS"
ALLOW_VARIABLE = "ZODB_JSON_CODEC_GLOBALS_ALLOW"

log = logging.getLogger("zodb_json_codec.globals")

# ---------------------------------------------------------------------------
# The lists
# ---------------------------------------------------------------------------

#: Standard-library names a record may name, by role: the value types pickle and ZODB write.  Any other
#: standard-library name is refused in every mode (os.system, subprocess.*, importlib.*, pickle.loads...).
_STDLIB_VALUE_TYPES = [
    "datetime.datetime", "datetime.date", "datetime.time", "datetime.timedelta", "datetime.timezone",
    "datetime.tzinfo", "decimal.Decimal", "fractions.Fraction", "uuid.UUID", "zoneinfo.ZoneInfo",
    "collections.OrderedDict", "collections.defaultdict", "collections.deque", "collections.Counter",
    "collections.UserDict", "collections.UserList", "collections.UserString", "UserDict.UserDict",
    "UserDict.IterableUserDict", "UserList.UserList",
    "array.array", "ipaddress.IPv4Address", "ipaddress.IPv6Address", "ipaddress.IPv4Network",
    "ipaddress.IPv6Network", "ipaddress.IPv4Interface", "ipaddress.IPv6Interface", "time.struct_time",
    "enum.Enum", "enum.IntEnum", "enum.Flag", "enum.IntFlag", "email.message.Message",
    "types.SimpleNamespace", "argparse.Namespace",
]
STANDARD_NAMES: Dict[str, frozenset] = {
    CALL: frozenset(_STDLIB_VALUE_TYPES + [
        "copyreg._reconstructor", "copy_reg._reconstructor", "copyreg.__newobj__", "copyreg.__newobj_ex__",
        "copy_reg.__newobj__", "array._array_reconstructor", "_codecs.encode", "codecs.encode",
        "zoneinfo.ZoneInfo._unpickle", "re._compile", "functools.partial",
    ]),
    CLASS: frozenset(_STDLIB_VALUE_TYPES),
    VALUE: frozenset(_STDLIB_VALUE_TYPES),
}
#: builtins (and Python 2's __builtin__): value types and exceptions only, in every role.
BUILTIN_VALUE_TYPES = frozenset({
    "object", "int", "float", "complex", "str", "bytes", "bytearray", "bool", "list", "tuple", "dict", "set",
    "frozenset", "range", "slice", "unicode", "long", "basestring", "NoneType", "Ellipsis", "NotImplemented",
})
_BUILTIN_MODULES = ("builtins", "__builtin__", "exceptions")

#: Modules outside the standard library that load code, configuration or other pickles from what they
#: are given, or write files: refused in every mode.  No such list is complete: a storage should run
#: strict-calls (docs/security.md).
DENIED_MODULES = (
    "ZConfig", "zope.dottedname", "zope.configuration", "ZODB.broken", "ZODB.FileStorage", "ZODB.DB",
    "ZODB.config", "ZODB.serialize", "ZODB.Connection", "ZEO", "zodbpickle", "relstorage", "ZODB.blob",
    "pkg_resources", "setuptools", "distutils", "pip", "dill", "cloudpickle", "joblib", "yaml", "ruamel",
    "jsonpickle", "numpy", "pandas", "torch", "Products.PythonScripts", "Products.ExternalMethod",
    "RestrictedPython", "AccessControl.ZopeGuards", "App.Extensions", "Zope2.Startup", "Zope2.utilities",
    "plone.recipe", "zc.buildout", "jinja2", "mako", "IPython", "celery", "fabric", "invoke", "paramiko",
    "pexpect", "sh", "plumbum", "_testcapi", "zodb_json_codec",
)
#: As a CLASS (an instance made without calling the class with the record's arguments, its state set
#: afterwards), a site stores objects of many of these (a PythonScript, an ExternalMethod): refused are
#: only the modules whose classes open files, databases or connections when so made.
DENIED_CLASS_MODULES = ("ZConfig", "ZODB.FileStorage", "ZODB.DB", "ZODB.Connection", "ZEO", "relstorage",
                        "zodb_json_codec", "_testcapi")
#: The class ZODB.blob.Blob is every site's; the rest of ZODB.blob is not a class a record names.
_DENIED_EXCEPTIONS = frozenset({"ZODB.blob.Blob"})

#: CALLs outside the standard library that strict-calls allows without a list: the ecosystem's own,
#: each with the arguments it is called with in a record (a predicate on the JSON args value).
def _names_only(args: Any) -> bool:
    items = tuple_items(args)
    return items is not None and all(global_name(x) is not None for x in items)


def _texts_and_ints(args: Any) -> bool:
    items = tuple_items(args)
    return items is not None and all(type(x) in (str, int) for x in items)


def _registry_name(args: Any) -> bool:
    """GAR(parent, "adapters" | "utilities"): the parent a name (zope.component.globalregistry.base)."""
    items = tuple_items(args)
    return (items is not None and len(items) == 2 and global_name(items[0]) is not None
            and items[1] in ("adapters", "utilities"))


def _message_arguments(args: Any) -> bool:
    """Message(text, domain, default, mapping, msgid_plural, default_plural, number): texts, None, a dict."""
    items = tuple_items(args)
    return items is not None and 1 <= len(items) <= 7 and all(
        x is None or type(x) in (str, int) or (type(x) is dict and marker_kind(x) is None) for x in items)


ECOSYSTEM_CALLS = {
    "zope.interface.declarations.Provides": _names_only,
    "zope.interface.declarations.ProvidesClass": _names_only,
    "zope.component.globalregistry.GAR": _registry_name,
    "zope.component.globalregistry.GlobalAdapterRegistry": _registry_name,
    "pytz._p": _texts_and_ints,
    "pytz._UTC": lambda args: tuple_items(args) == [],
    "zope.i18nmessageid.message.Message": _message_arguments,
    "persistent.mapping.PersistentMapping": lambda args: True,
    "persistent.list.PersistentList": lambda args: True,
    "DateTime.DateTime.DateTime": lambda args: True,
}
#: Patterns strict allows for CLASS and VALUE without a list.
STRICT_PATTERNS = ("persistent.*", "BTrees.*", "ZODB.blob.Blob", "zope.interface.*", "pytz.*", "DateTime.*")


# ---------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------

class GlobalRefused(CodecError):
    """A record would name a global the policy does not allow in that role (a ValueError).

    ``module``, ``name``, ``role``, ``where`` (the marker's path in the JSON, or "" when not known),
    ``allow_line`` (the allowlist line that would allow it, or None: a hard rule no list lifts)."""

    def __init__(self, role: str, module: str, name: str, reason: str, context: str,
                 allow_line: Optional[str], where: str = "") -> None:
        self.role, self.module, self.name, self.reason, self.context = role, module, name, reason, context
        self.allow_line, self.where = allow_line, where
        dotted = f"{module}.{name}" if module else name
        at = f" at {where}" if where else ""
        remedy = (f"; to allow it, add the line {allow_line!r} to an allowlist file ({ALLOW_VARIABLE})"
                  if allow_line else "; no allowlist lifts this")
        super().__init__(f"invalid pickle data: global {dotted!r} refused as {role.upper()} "
                         f"({context}){at}: {reason}{remedy}")

    def __reduce__(self) -> Tuple[Any, tuple]:  # pickled from a worker process to the command's own
        return GlobalRefused, (self.role, self.module, self.name, self.reason, self.context, self.allow_line,
                               self.where)

    def located(self, where: str) -> "GlobalRefused":
        return GlobalRefused(self.role, self.module, self.name, self.reason, self.context, self.allow_line, where)


def _identifier_path(module: str) -> bool:
    return bool(module) and all(part.isidentifier() for part in module.split("."))


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


_DUNDERS_ALLOWED = frozenset({("copyreg", "__newobj__"), ("copyreg", "__newobj_ex__"),
                              ("copy_reg", "__newobj__")})


def hard_rule(module: str, name: str) -> Optional[str]:
    """Why no policy may allow module.name (a GLOBAL's two lines), or None."""
    if type(module) is not str or type(name) is not str:
        return "module and name must be strings"
    if not _identifier_path(module):
        return "the module is not a dotted path of identifiers"
    if "." in name:
        return "the name has a dot (an attribute of an attribute)"
    if not name.isidentifier():
        return "the name is not an identifier"
    if _dunder(name) and (module, name) not in _DUNDERS_ALLOWED:
        return "a dunder name"
    if module in _BUILTIN_MODULES and not _builtin_value(name):
        return "builtins only for value types and exceptions"
    return None


def _builtin_value(name: str) -> bool:
    if name in BUILTIN_VALUE_TYPES:
        return True
    found = getattr(builtins, name, None)
    return isinstance(found, type) and issubclass(found, BaseException)


def _stdlib(module: str) -> bool:
    top = module.split(".", 1)[0]
    if top in _BUILTIN_MODULES or top in ("copy_reg", "_codecs"):
        return True
    names = getattr(sys, "stdlib_module_names", None)
    if names is not None:
        return top in names
    return top in _STDLIB_FALLBACK


# CPython 3.9 has no sys.stdlib_module_names: the modules a record could name to harm.
_STDLIB_FALLBACK = frozenset("""
os posix nt sys subprocess shutil importlib pickle marshal code codeop runpy ctypes socket ssl http urllib
ftplib smtplib telnetlib webbrowser multiprocessing threading _thread signal pty tty pdb bdb trace inspect
types builtins io tempfile glob pathlib zipfile tarfile zipimport pkgutil site sysconfig platform
datetime decimal fractions uuid zoneinfo collections array ipaddress time enum email copyreg functools
operator itertools re json base64 binascii codecs _codecs string random math cmath struct logging
""".split())


def _matches(dotted: str, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        if pattern.endswith(".*"):
            if dotted.startswith(pattern[:-1]):
                return True
        elif dotted == pattern:
            return True
    return False


def _denied(role: str, dotted: str) -> bool:
    if dotted in _DENIED_EXCEPTIONS:
        return False
    return any(dotted.startswith(m + ".") for m in (DENIED_CLASS_MODULES if role == CLASS else DENIED_MODULES))


# ---------------------------------------------------------------------------
# The policy
# ---------------------------------------------------------------------------

class GlobalsPolicy:
    """A mode and allowlist entries; immutable once made, so decisions are kept.

    ``GlobalsPolicy("strict-calls", allow=["call myapp.Color"], files=["site.allow"])``.
    Modes: ``standard`` (the default), ``strict-calls``, ``strict``, ``warn`` (strict's decisions logged
    once per name, nothing refused but the hard rules), ``unrestricted`` (nothing checked: only from
    code, and it warns).  An entry is ``ROLE PATTERN``: ``call myapp.Color``, ``class Products.*``,
    ``value Missing.V`` (a pattern is a dotted name or a prefix ending in ``.*``).
    """

    __slots__ = ("mode", "entries", "_decided", "_warned", "_pickles", "__weakref__")

    def __init__(self, mode: str = "standard", allow: Iterable[str] = (), files: Iterable[str] = ()) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown globals policy mode {mode!r} (one of {', '.join(MODES)})")
        entries: Dict[str, List[str]] = {CALL: [], CLASS: [], VALUE: []}
        for where, line in [("allow", entry) for entry in allow] + list(_file_lines(files)):
            role, pattern = _entry(line, where)
            if role is not None:
                entries[role].append(pattern)
        self.mode = mode
        self.entries = {role: tuple(patterns) for role, patterns in entries.items()}
        self._decided: Dict[Tuple[str, str, str], Optional[Tuple[str, Optional[str]]]] = {}
        self._warned: set = set()
        self._pickles: set = set()  # verbatim pickles found allowed (check_pickle_globals)
        if mode == "unrestricted":
            warnings.warn("zodb_json_codec: an unrestricted globals policy: the encoders write records that "
                          "may name any global, which ZODB imports and calls at load", RuntimeWarning,
                          stacklevel=2)

    def __repr__(self) -> str:
        listed = sum(len(p) for p in self.entries.values())
        return f"GlobalsPolicy({self.mode!r}, {listed} allowlist entries)"

    def check(self, role: str, module: str, name: str, context: str, args: Any = None,
              attribute: Optional[str] = None) -> bool:
        """True (the name alone decided) or False (its arguments did) if the policy allows module.name in role;
        else GlobalRefused.  args: a CALL's arguments (the JSON value), which the ecosystem's calls
        strict-calls allows are checked against; attribute: the method ``getattr(module.name, attribute)``
        gives (CPython's pickle of a class's method)."""
        key = (role, module, name, attribute)
        decided = self._decided.get(key, False)
        if decided is False:
            decided = self._decide(role, module, name, attribute)
            if len(self._decided) < 100_000:  # names a database has: a few thousand at most
                self._decided[key] = decided
        if decided is None:
            return True
        reason, allow_line = decided
        if attribute is not None:
            name = f"{name}.{attribute}"
        if reason == _SHAPE:
            if ECOSYSTEM_CALLS[f"{module}.{name}"](args):
                return False
            reason = "its arguments are not the shape the ecosystem calls it with"
        raise GlobalRefused(role, module, name, reason, context, allow_line)

    def decision(self, role: str, module: str, name: str, args: Any = None, method: bool = False) -> Optional[str]:
        """None when allowed, else the reason (for the audit).  method: name is "Class.method", a getattr call."""
        try:
            attribute = None
            if method:
                name, attribute = _method(name)
            self.check(role, module, name, "", args, attribute)
        except GlobalRefused as refusal:
            return refusal.reason
        return None

    def _decide(self, role: str, module: str, name: str, attribute: Optional[str]
                ) -> Optional[Tuple[str, Optional[str]]]:
        if self.mode == "unrestricted":
            return None
        broken = hard_rule(module, name)
        if broken is None and attribute is not None and (not attribute.isidentifier() or _dunder(attribute)):
            broken = "the method is not an identifier, or a dunder name"
        if broken is not None:
            return broken, None
        dotted = f"{module}.{name}" if attribute is None else f"{module}.{name}.{attribute}"
        line = f"{role} {dotted}"
        if _matches(dotted, self.entries[role]):
            return None
        if _stdlib(module):
            if module in _BUILTIN_MODULES or dotted in STANDARD_NAMES[role]:
                return None
            return "a standard-library name that is not one of the value types records hold", line
        if _denied(role, dotted):
            return "a module that loads code, configuration or pickles, or writes files", None
        strict = self.mode in ("strict", "warn")
        if role == CALL and self.mode in ("strict-calls", "strict", "warn"):
            if dotted in ECOSYSTEM_CALLS:
                return _SHAPE, line
            return self._warned_or("a call outside the standard library that no allowlist lists", line)
        if strict and role != CALL and not _matches(dotted, STRICT_PATTERNS):
            return self._warned_or(f"a {role} that no allowlist lists", line)
        return None

    def _warned_or(self, reason: str, line: str) -> Optional[Tuple[str, Optional[str]]]:
        if self.mode != "warn":
            return reason, line
        if line not in self._warned:
            self._warned.add(line)
            log.warning("zodb_json_codec: strict would refuse %s (%s); allow it with %r", line, reason, line)
        return None


_SHAPE = "shape"  # a decision that depends on the call's arguments


def _method(name: str) -> Tuple[str, Optional[str]]:
    """(name, attribute) of "Class.method" (the audit's spelling of a getattr call), else (name, None)."""
    head, dot, tail = name.partition(".")
    return (head, tail) if dot else (name, None)


def _entry(line: str, where: str) -> Tuple[Optional[str], str]:
    text = line.split("#", 1)[0].strip()
    if not text:
        return None, ""
    parts = text.split()
    if len(parts) != 2 or parts[0] not in ROLES:
        raise ValueError(f"{where}: an allowlist line is 'call|class|value NAME' (NAME: a dotted name or "
                         f"a prefix ending in .*), not {line.strip()!r}")
    pattern = parts[1]
    stem = pattern[:-2] if pattern.endswith(".*") else pattern
    if not _identifier_path(stem):
        raise ValueError(f"{where}: {pattern!r} is not a dotted name (or one ending in .*)")
    return parts[0], pattern


def _file_lines(files: Iterable[str]) -> Iterator[Tuple[str, str]]:
    for path in files:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                yield f"{path}:{number}", line


# ---------------------------------------------------------------------------
# The process default
# ---------------------------------------------------------------------------

#: [the process default, or None until it is first asked for]: a list the Cython twin reads without a call.
DEFAULT: List[Optional[GlobalsPolicy]] = [None]


def policy_from_environment(environ: Optional[Dict[str, str]] = None) -> GlobalsPolicy:
    """The policy the environment asks for: ZODB_JSON_CODEC_GLOBALS (a mode; not unrestricted, which only
    code can ask for) and the allowlist files of ZODB_JSON_CODEC_GLOBALS_ALLOW."""
    environ = os.environ if environ is None else environ
    mode = environ.get(MODE_VARIABLE, "").strip() or "standard"
    if mode == "unrestricted":
        raise ValueError(f"{MODE_VARIABLE}=unrestricted: only code can turn the globals check off "
                         f"(set_globals_policy(GlobalsPolicy('unrestricted')))")
    files = [f for f in environ.get(ALLOW_VARIABLE, "").split(os.pathsep) if f.strip()]
    return GlobalsPolicy(mode, files=files)


def get_globals_policy() -> GlobalsPolicy:
    """The policy the encoders use when called without ``policy=``."""
    policy = DEFAULT[0]
    if policy is None:
        policy = DEFAULT[0] = policy_from_environment()
    return policy


def set_globals_policy(policy: Optional[GlobalsPolicy]) -> None:
    """Make policy the process default (None: the environment's again)."""
    if policy is not None and type(policy) is not GlobalsPolicy:
        raise TypeError(f"expected a GlobalsPolicy, not {type(policy).__name__}")
    DEFAULT[0] = policy


def policy_argument(policy: Any) -> GlobalsPolicy:
    """The policy an encoder runs with: its ``policy=`` argument, else the process default."""
    if policy is None:
        return get_globals_policy()
    if type(policy) is not GlobalsPolicy:
        raise TypeError(f"argument 'policy': expected GlobalsPolicy, not {type(policy).__name__}")
    return policy


# ---------------------------------------------------------------------------
# Roles of the markers the encoders read (both twins call these where they write)
# ---------------------------------------------------------------------------

_RECONSTRUCTORS = frozenset({("copyreg", "_reconstructor"), ("copy_reg", "_reconstructor")})
_NEWOBJ_FUNCTIONS = frozenset({("copyreg", "__newobj__"), ("copy_reg", "__newobj__"), ("copyreg", "__newobj_ex__")})
_GETATTR = frozenset({("builtins", "getattr"), ("__builtin__", "getattr")})


def class_argument_markers(module: str, name: str, args: Any) -> List[dict]:
    """The bare ``@cls`` markers among a call's arguments that stand for a class the call instantiates (the
    first two of copyreg._reconstructor, the first of __newobj__ and __newobj_ex__): CLASS, not VALUE."""
    if (module, name) not in _RECONSTRUCTORS and (module, name) not in _NEWOBJ_FUNCTIONS:
        return []
    items = tuple_items(args) if type(args) is dict else args if type(args) is list else None
    if not items:
        return []
    count = 2 if (module, name) in _RECONSTRUCTORS else 1
    return [x for x in items[:count] if global_name(x) is not None]


def check_callable(policy: GlobalsPolicy, callable_: Any, args: Any, role: str, context: str) -> List[dict]:
    """A ``@reduce``/``@inst`` callable: a plain name (or CPython's ``getattr(class, "name")``, or a
    ``functools.partial`` of a plain name), checked in role with the class markers of its arguments; the
    markers checked here (and the inner ``@reduce`` of those two shapes), which the walk then writes without
    checking them again."""
    if policy.mode == "unrestricted":
        return []
    names = global_name(callable_)
    checked: List[dict] = []
    if names is None:
        function = _partial_shape(callable_)
        if function is not None:
            module, name = global_name(function)
            policy.check(role, module, name, f"{context}, through functools.partial", args)
            return [callable_, function, callable_["@reduce"]["callable"]] + _partial_state_markers(callable_)
        getattr_call = _getattr_shape(callable_)
        if getattr_call is None:
            raise GlobalRefused(role, "", _describe(callable_), "a callable must be a plain name, not the "
                                "result of a call or another value", context, None)
        cls_marker, getattr_marker, attribute = getattr_call
        module, name = global_name(cls_marker)
        policy.check(role, module, name, context, args, attribute)
        return [callable_, cls_marker, getattr_marker]
    module, name = names
    policy.check(role, module, name, context, args)
    checked.append(callable_)
    for marker in class_argument_markers(module, name, args):
        cls_module, cls_name = global_name(marker)
        policy.check(CLASS, cls_module, cls_name, f"the class given to {module}.{name}")
        checked.append(marker)
    return checked


def _getattr_shape(value: Any) -> Optional[Tuple[dict, dict, str]]:
    """(class marker, getattr marker, attribute) of ``{"@reduce": {"callable": builtins.getattr, "args":
    {"@t": [{"@cls": ...}, "attribute"]}}}``: how protocol 3 pickles a class's method."""
    if type(value) is not dict or len(value) != 1 or type(value.get("@reduce")) is not dict:
        return None
    inner = value["@reduce"]
    if set(inner) != {"callable", "args"} or global_name(inner["callable"]) not in _GETATTR:
        return None
    items = tuple_items(inner["args"])
    if items is None or len(items) != 2 or global_name(items[0]) is None or type(items[1]) is not str:
        return None
    return items[0], inner["callable"], items[1]


def _partial_state_markers(value: dict) -> List[dict]:
    state = tuple_items(value["@reduce"].get("state"))
    return [state[0]] if state and global_name(state[0]) is not None else []


def _partial_shape(value: Any) -> Optional[dict]:
    """The function F of ``functools.partial(F)`` built as a callable (``{"@reduce": {"callable":
    functools.partial, "args": [F], "state": [F, args, kwargs, dict]}}``): calling the partial calls F, whose
    name is then the CALL; else None."""
    if type(value) is not dict or len(value) != 1 or type(value.get("@reduce")) is not dict:
        return None
    inner = value["@reduce"]
    if not set(inner) <= {"callable", "args", "state"} or global_name(inner.get("callable")) != _PARTIAL:
        return None
    items = tuple_items(inner.get("args"))
    state = tuple_items(inner.get("state")) if "state" in inner else [None]
    if not items or global_name(items[0]) is None or state is None or not state:
        return None
    if state[0] is not None and state[0] != items[0]:
        return None  # a state naming another function: not the shape partial's own pickle has
    return items[0]


_PARTIAL = ("functools", "partial")


def _describe(value: Any) -> str:
    if type(value) is dict:
        kind = marker_kind(value) if len(value) <= MAX_MARKER_KEYS else None
        return f"<{kind or 'a dict'}>"
    return f"<{type(value).__name__}>"


def check_instance_class(policy: GlobalsPolicy, module: str, name: str, args: Any, reduced: bool) -> List[dict]:
    """An instance's class (``{"@cls": ..., "@s": ...}``): CLASS when NEWOBJ makes it, CALL when REDUCE
    calls it with its ``@args`` (``"@newobj": false``, copyreg's _reconstructor); the class markers among
    those arguments that stand for a class, checked as CLASS and returned."""
    policy.check(CALL if reduced else CLASS, module, name, "the class of an instance", args)
    checked = []
    for marker in class_argument_markers(module, name, args):
        cls_module, cls_name = global_name(marker)
        policy.check(CLASS, cls_module, cls_name, f"the class given to {module}.{name}")
        checked.append(marker)
    return checked


def reference_class_markers(ref_id: Any) -> List[dict]:
    """The classes in a reference's id in its generic form (``(oid, class)``, a multi-database
    ``["m", (database, oid, class)]``...), as the encoders and the audit find them: the bare ``@cls`` markers
    among its lists' and tuples' first 8 items, any depth, 64 waiting at most."""
    found = []
    stack = [ref_id]
    while stack:
        v = stack.pop()
        if type(v) is list:
            items = v
        elif type(v) is not dict or len(v) != 1:
            continue
        elif "@cls" in v:  # (most ids hold none: a weak reference's is ["w", {"@t": [oid]}])
            if global_name(v) is not None:
                found.append(v)
            continue
        else:
            items = tuple_items(v)
        if items is not None and len(stack) < 64:
            stack.extend(items[:8])
    return found


def check_reference_classes(policy: GlobalsPolicy, ref_id: Any) -> List[dict]:
    """The classes in a reference's id in its generic form (reference_class_markers): ZODB's class factory
    makes an instance of each, so CLASS; the markers checked."""
    found = reference_class_markers(ref_id)
    for marker in found:
        module, name = marker["@cls"]
        policy.check(CLASS, module, name, _REF_CONTEXT)
    return found


def check_class_pickle(policy: GlobalsPolicy, first: Any) -> List[dict]:
    """The class pickle of an object record (``{"@cls": ["", ""], "@s": {"@obj": first, ...}}``): the class,
    alone or first in a ``(class, args)`` tuple, as ZODB's class factory reads it: CLASS."""
    items = tuple_items(first)
    marker = items[0] if items else first
    names = global_name(marker)
    if names is None:
        return []
    policy.check(CLASS, names[0], names[1], "the record's class")
    return [marker]


def check_build_target(policy: GlobalsPolicy, obj: Any, context: str) -> None:
    """BUILD (``@inst``'s ``@obj``) sets attributes on what it is given: never a class or module."""
    names = global_name(obj)
    if names is not None and policy.mode != "unrestricted":
        raise GlobalRefused(CLASS, names[0], names[1], "BUILD would set attributes on a class or module",
                            context, None)


def check_pickle_globals(policy: GlobalsPolicy, data: bytes, context: str) -> None:
    """Every global a verbatim record (``@pkl``) names, checked as a CALL.  Records kept verbatim are few and
    come back again and again: the pickles found allowed are kept (a few, of moderate size), not scanned
    again (pickletools' scan is slow: 20 us for 70 bytes)."""
    if policy.mode == "unrestricted" or data in policy._pickles:
        return
    for module, name in pickle_globals(data, context):
        policy.check(CALL, module, name, context)
    if len(data) <= 1 << 16:
        if len(policy._pickles) >= 512:
            policy._pickles.clear()
        policy._pickles.add(data)


_OPCODES = {op.code.encode("latin-1")[0]: op for op in pickletools.opcodes}
_TEXTS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"}
_MEMO_ONLY = {"MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "FRAME"}  # they leave the pushed strings in place


def pickle_globals(data: bytes, context: str = "a name inside a @pkl") -> Iterator[Tuple[str, str]]:
    """(module, name) of each global the pickles of data name: their GLOBAL and INST lines (UTF-8, as
    pickle reads them), and the STACK_GLOBAL of two literal strings just before it.  An extension code, or a
    STACK_GLOBAL of names that are not literal, is a GlobalRefused (no policy can know what they name); what
    is not a pickle a CodecError.  The opcodes are walked by their argument sizes (pickletools' table)."""
    pos, end = 0, len(data)
    texts: List[Any] = []
    while pos < end:
        op = _OPCODES.get(data[pos])
        if op is None:
            raise CodecError(f"invalid pickle data: @pkl is not a pickle (opcode {data[pos]:#x} at {pos})")
        pos, arg = _argument(data, pos + 1, op)
        if op.name in ("GLOBAL", "INST"):
            yield _line_names(arg)
        elif op.name == "STACK_GLOBAL":
            if len(texts) < 2 or texts[-1] is None or texts[-2] is None:
                raise GlobalRefused(CALL, "", "<STACK_GLOBAL>", "its names are not literal strings", context, None)
            yield texts[-2], texts[-1]
        elif op.name.startswith("EXT"):
            raise GlobalRefused(CALL, "", f"<extension code {int.from_bytes(arg, 'little')}>",
                                "extension codes name globals the record does not spell", context, None)
        if op.name in _TEXTS:
            texts.append(arg.decode("raw-unicode-escape") if op.name == "UNICODE"
                         else arg.decode("utf-8", "surrogatepass"))
        elif op.name not in _MEMO_ONLY:
            texts.append(None)
        if op.name == "STOP":
            texts = []


def _argument(data: bytes, pos: int, op: Any) -> Tuple[int, bytes]:
    """The offset after an opcode's argument at pos, and the argument's bytes (a text's, a line's)."""
    spec = op.arg
    if spec is None:
        return pos, b""
    n = spec.n
    if n >= 0:
        start, pos = pos, pos + n
    elif n == pickletools.UP_TO_NEWLINE:
        lines = 2 if op.name in ("GLOBAL", "INST") else 1
        start = pos
        for _ in range(lines):
            newline = data.find(b"\n", pos)
            if newline < 0:
                raise CodecError("invalid pickle data: @pkl is not a pickle (a line without its end)")
            pos = newline + 1
        return pos, data[start:pos - 1]
    else:
        width = {pickletools.TAKEN_FROM_ARGUMENT1: 1, pickletools.TAKEN_FROM_ARGUMENT4: 4,
                 pickletools.TAKEN_FROM_ARGUMENT4U: 4, pickletools.TAKEN_FROM_ARGUMENT8U: 8}[n]
        size = int.from_bytes(data[pos:pos + width], "little", signed=n == pickletools.TAKEN_FROM_ARGUMENT4)
        if size < 0:
            raise CodecError("invalid pickle data: @pkl is not a pickle (a negative length)")
        start, pos = pos + width, pos + width + size
    if pos > len(data):
        raise CodecError("invalid pickle data: @pkl is not a pickle (it ends in an argument)")
    return pos, data[start:pos]


def _line_names(arg: bytes) -> Tuple[str, str]:
    """GLOBAL's "module\nname" as pickle reads them (UTF-8); names that are not UTF-8 name no global."""
    module, _, name = arg.partition(b"\n")
    try:
        return module.decode("utf-8"), name.decode("utf-8")
    except UnicodeDecodeError:
        return "", repr(arg)  # the hard rules refuse it


# ---------------------------------------------------------------------------
# Every global a value names, with its role and path (the audit, and where a refusal stands)
# ---------------------------------------------------------------------------

class Named(NamedTuple):
    """A global a value names: its role, names, the path of its marker, the call's arguments (CALL), the
    context the encoders name in a refusal, and whether name is "Class.method" (a getattr call)."""
    role: str
    module: str
    name: str
    path: str
    args: Any
    context: str
    method: bool = False


_VALUE_CONTEXT = "a class or function kept as a value"
_REF_CONTEXT = "the class of a reference"


def globals_named(value: Any, record_class: Optional[Tuple[str, str]] = None) -> Iterator[Named]:
    """Each global a value names, as the encoders give them roles: the record's class (if given), then the
    value's markers, depth first without recursion."""
    if record_class is not None:
        yield Named(CLASS, record_class[0], record_class[1], "@cls", None, "the record's class")
    # (value, path, (role, context) a bare @cls there has, or None: a value's)
    stack: List[Tuple[Any, str, Optional[Tuple[str, str]]]] = [(value, "@s" if record_class else "$", None)]
    ref_classes: Dict[int, dict] = {}  # the classes in generic reference ids, by identity, as the encoders mark them
    while stack:
        v, path, given = stack.pop()
        if type(v) is list:
            stack.extend((x, f"{path}[{i}]", None) for i, x in reversed(list(enumerate(v))))
            continue
        if type(v) is not dict:
            continue
        kind = marker_kind(v) if len(v) <= MAX_MARKER_KEYS else None
        if kind == "@cls":
            role, context = (CLASS, _REF_CONTEXT) if id(v) in ref_classes else given or (VALUE, _VALUE_CONTEXT)
            yield Named(role, v["@cls"][0], v["@cls"][1], path, None, context)
            continue
        if kind == "@ref":
            ref_classes.update((id(m), m) for m in reference_class_markers(v["@ref"]))
        found, children = _marker_globals(v, kind, path)
        yield from found
        stack.extend(reversed(children))


def _marker_globals(v: dict, kind: Optional[str], path: str) -> Tuple[List[Named], list]:
    """The globals a marker names itself, and its children to walk (with the role a bare @cls among them has)."""
    if kind == "instance":
        module, name = v["@cls"]
        state = v.get("@s")
        args = state["@args"] if (type(state) is dict and len(state) == 2 and "@args" in state
                                  and "@state" in state) else None
        reduced = v.get("@newobj", True) is False or (module, name) in _RECONSTRUCTORS
        found = [Named(CALL if reduced else CLASS, module, name, f"{path}.@cls", args, "the class of an instance")]
        return found, _children(v, path, class_argument_markers(module, name, args), f"{module}.{name}", skip="@cls")
    if kind in ("@reduce", "@newobj"):
        inner = v[kind]
        at = f"{path}.{kind}"
        kwargs = reduce_kwargs(v, kind)
        role = CLASS if kind == "@newobj" or inner.get("newobj") is True or kwargs else CALL
        return _callable_globals(inner.get("callable"), inner.get("args"), role, f"{at}.callable",
                                 "the callable of a @reduce", inner, at)
    if kind == "@inst" and type(v["@inst"]) is dict:
        inner = v["@inst"]
        at = f"{path}.@inst"
        if "@callable" in inner:
            return _callable_globals(inner["@callable"], inner.get("@args"), CALL, f"{at}.@callable",
                                     "the @callable of an @inst", inner, at)
        children = [(x, f"{at}.{k}", (CLASS, "the object of an @inst") if k == "@obj" else None)
                    for k, x in inner.items()]
        return [], children
    if kind == "@ref":
        ref = v["@ref"]
        if type(ref) is list and len(ref) == 2 and type(ref[0]) is str and type(ref[1]) is str:
            module, _, name = ref[1].rpartition(".")
            return [Named(CLASS, module, name, f"{path}.@ref", None, _REF_CONTEXT)], []
        return [], [(ref, f"{path}.@ref", None)]  # its classes: CLASS by globals_named's ref_classes
    return [], [(x, f"{path}.{k}", None) for k, x in v.items()]


def reduce_kwargs(v: dict, kind: str) -> bool:
    """Whether a @reduce/@newobj is the NEWOBJ_EX form (its callable then a class)."""
    inner = v[kind]
    args = inner.get("args")
    return "kwargs" in inner or (type(args) is dict and set(args) == {"@args", "@kwargs"})


def _callable_globals(callable_: Any, args: Any, role: str, at: str, context: str, inner: dict,
                      base: str) -> Tuple[List[Named], list]:
    names = global_name(callable_)
    marked: List[dict] = []
    skip = {"callable", "@callable"}
    if names is not None:
        found = [Named(role, names[0], names[1], at, args, context)]
        marked = class_argument_markers(names[0], names[1], args)
        owner = f"{names[0]}.{names[1]}"
    else:
        function = _partial_shape(callable_)
        shape = _getattr_shape(callable_) if function is None else None
        owner = ""
        if function is not None:
            module, name = global_name(function)
            found = [Named(role, module, name, at, args, f"{context}, through functools.partial")]
        elif shape is not None:
            module, name = global_name(shape[0])
            found = [Named(role, module, f"{name}.{shape[2]}", at, args, context, True)]
        else:
            found = [Named(role, "", _describe(callable_), at, args, context)]
            skip = set()
    children = []
    for key, x in inner.items():
        if key in skip:
            continue
        if key in ("args", "@args") and marked:
            items = tuple_items(x) if type(x) is dict else x if type(x) is list else []
            children += [(item, f"{base}.{key}.@t[{i}]",
                          (CLASS, f"the class given to {owner}") if any(item is m for m in marked) else None)
                         for i, item in enumerate(items)]
        else:
            children.append((x, f"{base}.{key}", None))
    return found, children


def _children(v: dict, path: str, marked: List[dict], owner: str, skip: str) -> list:
    """A marker's values to walk; the class markers among an instance's @args that stand for a class."""
    children = []
    for key, x in v.items():
        if key == skip:
            continue
        if key == "@s" and marked and type(x) is dict and "@args" in x:
            args = x["@args"]
            items = tuple_items(args) if type(args) is dict else args if type(args) is list else []
            children += [(item, f"{path}.@s.@args.@t[{i}]",
                          (CLASS, f"the class given to {owner}") if any(item is m for m in marked) else None)
                         for i, item in enumerate(items)]
            children.append((x.get("@state"), f"{path}.@s.@state", None))
        else:
            children.append((x, f"{path}.{key}", None))
    return children


def located(refusal: GlobalRefused, value: Any, record_class: Optional[Tuple[str, str]] = None) -> GlobalRefused:
    """The refusal with the path of the first marker naming its global in its role, if one is found."""
    if refusal.where:
        return refusal
    for named in globals_named(value, record_class):
        if ((named.role, named.module, named.name) == (refusal.role, refusal.module, refusal.name)
                and named.context == refusal.context):
            return refusal.located(named.path)
    return refusal


def located_in_record(refusal: GlobalRefused, record: Any) -> GlobalRefused:
    """``located`` for encode_zodb_record's argument ``{"@cls": [module, name], "@s": state}``."""
    if refusal.where or type(record) is not dict:
        return refusal
    cls = record.get("@cls")
    if refusal.context == "the record's class":
        return refusal.located("@cls")
    record_class = tuple(cls) if type(cls) is list and len(cls) == 2 and all(type(x) is str for x in cls) else None
    return located(refusal, record.get("@s"), record_class)
