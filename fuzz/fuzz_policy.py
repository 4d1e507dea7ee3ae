#!/usr/bin/env python3
"""Harness: values naming globals in every role -> the four encoders of both twins, under a globals policy.

The bytes drive a generator (atheris.FuzzedDataProvider) of marker trees whose
markers name globals: the record's class, bare ``@cls`` values, instances
(NEWOBJ and ``"@newobj": false``), ``@reduce`` (plain callables, getattr and
functools.partial shapes, calls as callables), ``@inst``, references, the
``copyreg._reconstructor`` and ``__newobj__`` forms and ``@pkl`` records, with
names drawn from the standard library's value types, its dangerous functions,
builtins, the ecosystem, denied loaders, application names and malformed
names (dunders, dots, not identifiers).  A byte chooses the mode
(standard, strict-calls, strict) and an allowlist entry.

The oracle (docs/security.md):

1. both twins: only ValueError escapes; the same outcome (bytes identical, or
   the same message) for encode_zodb_record, encode_zodb_record_from_pg_json
   (of the state's JSON text), dict_to_pickle and json_to_pickle;
2. what they accept loads (``pickle.loads`` with an unpickler that gives each
   global a stand-in and records its name), and names only globals the policy
   allows in some role and that break no hard rule, besides the ones the
   encoders write for their own markers.
"""

from __future__ import annotations

import base64
import io
import json
import pickle

import functools

import atheris

import fuzzlib as F

with atheris.instrument_imports(include=[]):
    from zodb_json_codec import _globals
    from zodb_json_codec._db import fidelity

NAMES = [
    ("datetime", "date"), ("decimal", "Decimal"), ("collections", "OrderedDict"), ("copyreg", "_reconstructor"),
    ("copy_reg", "_reconstructor"), ("copyreg", "__newobj__"), ("builtins", "object"), ("builtins", "ValueError"),
    ("builtins", "getattr"), ("builtins", "eval"), ("builtins", "print"), ("__builtin__", "set"),
    ("os", "system"), ("subprocess", "Popen"), ("pickle", "loads"), ("importlib", "import_module"),
    ("functools", "partial"), ("zoneinfo", "ZoneInfo"), ("ZConfig", "loadConfig"),
    ("ZODB.FileStorage", "FileStorage"), ("ZEO.ClientStorage", "ClientStorage"), ("zope.dottedname.resolve", "resolve"),
    ("persistent.mapping", "PersistentMapping"), ("BTrees.OOBTree", "OOBucket"), ("Products.App", "Thing"),
    ("myapp.colors", "Color"), ("myapp", "make"), ("zope.component.globalregistry", "GAR"),
    ("zope.component.globalregistry", "base"), ("pytz", "_p"), ("Missing", "V"),
    ("myapp", "__import__"), ("os", "path.join"), ("os;rm", "x"), ("", "x"), ("myapp", ""), ("my app", "X"),
]
MODES = ("standard", "strict-calls", "strict")
ENTRIES = ("call myapp.colors.Color", "class Products.*", "value Missing.V", "call os.system", "class myapp.*")
#: What the two callable shapes CPython writes name (checked as the call they make: docs/security.md).
SHAPES = {("builtins", "getattr"), ("__builtin__", "getattr"), ("functools", "partial")}
#: Globals the encoders write for their own markers (never the JSON's choice).
OWN = {("builtins", "set"), ("builtins", "frozenset"), ("builtins", "bytearray"), ("datetime", "datetime"),
       ("datetime", "date"), ("datetime", "time"), ("datetime", "timedelta"), ("datetime", "timezone"),
       ("decimal", "Decimal"), ("uuid", "UUID"), ("copyreg", "__newobj_ex__"), ("pytz", "_p"), ("pytz", "_UTC")}


class Gen:
    def __init__(self, fdp: atheris.FuzzedDataProvider) -> None:
        self.fdp = fdp

    def pick(self, options):
        return options[self.fdp.ConsumeIntInRange(0, len(options) - 1)]

    def cls(self):
        module, name = self.pick(NAMES)
        return {"@cls": [module, name]}

    def text(self):
        return self.pick(["x", "adapters", "_unpickle", "true", "", "@cls"])

    def args(self, depth):
        return {"@t": [self.value(depth + 1) for _ in range(self.fdp.ConsumeIntInRange(0, 3))]}

    def value(self, depth=0):
        if depth > 4:
            return self.text()
        k = self.fdp.ConsumeIntInRange(0, 13)
        if k == 0:
            return self.cls()
        if k == 1:
            module, name = self.pick(NAMES)
            state = {"@args": self.args(depth), "@state": self.value(depth + 1)} if self.fdp.ConsumeBool() else {}
            instance = {"@cls": [module, name], "@s": state}
            if self.fdp.ConsumeBool():
                instance["@newobj"] = False
            return instance
        if k == 2:
            inner = {"callable": self.callable(depth), "args": self.args(depth)}
            if self.fdp.ConsumeBool():
                inner["newobj"] = self.fdp.ConsumeBool()
            if self.fdp.ConsumeBool():
                inner["state"] = self.value(depth + 1)
            return {"@reduce": inner}
        if k == 3:
            if self.fdp.ConsumeBool():
                return {"@inst": {"@obj": self.value(depth + 1), "@state": self.value(depth + 1)}}
            return {"@inst": {"@callable": self.callable(depth), "@args": self.args(depth), "@state": None}}
        if k == 4:
            module, name = self.pick(NAMES)
            return {"@ref": ["00000000000000%02x" % self.fdp.ConsumeIntInRange(0, 255), f"{module}.{name}"]}
        if k == 5:
            return {"@ref": {"@t": [{"@b": "AAAAAAAAAAE="}, self.cls()]}}
        if k == 6:
            return {"@cls": ["copy_reg", "_reconstructor"],
                    "@s": {"@args": {"@t": [self.cls(), self.cls(), None]}, "@state": self.value(depth + 1)}}
        if k == 7:
            return {"@reduce": {"callable": {"@cls": ["copyreg", "__newobj__"]}, "args": {"@t": [self.cls()]}}}
        if k == 8:
            return [self.value(depth + 1) for _ in range(self.fdp.ConsumeIntInRange(0, 3))]
        if k == 9:
            return {self.text() or "k": self.value(depth + 1), "n": self.fdp.ConsumeIntInRange(-5, 5)}
        if k == 10:
            return {"@t": [self.value(depth + 1)]}
        if k == 11:
            return {"@dt": "2024-02-29T12:00:00"}
        if k == 12:
            return {"@set": [1, 2]}
        return self.text()

    def callable(self, depth):
        k = self.fdp.ConsumeIntInRange(0, 4)
        if k == 0:
            return {"@reduce": {"callable": {"@cls": ["builtins", "getattr"]},
                                "args": {"@t": [self.cls(), self.text()]}}}
        if k == 1:
            function = self.cls()
            return {"@reduce": {"callable": {"@cls": ["functools", "partial"]}, "args": {"@t": [function]},
                                "state": {"@t": [function, {"@t": []}, {}, None]}}}
        if k == 2:
            return self.value(depth + 1)
        return self.cls()

    def pkl(self):
        module, name = self.pick(NAMES)
        body = b"\x80\x03c" + module.encode("utf-8", "replace") + b"\n" + name.encode("utf-8", "replace") + b"\n)R."
        return {"@pkl": base64.b64encode(pickle.dumps(("m", "C"), 3) + body).decode()}


class Recording(fidelity.Loader):
    """verify's loader (stand-ins for all but the value types), recording each global's name."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data), encoding="bytes")
        self.names = []

    def find_class(self, module, name):
        self.names.append((fidelity._text(module), fidelity._text(name)))
        return super().find_class(module, name)


def names_loaded(data: bytes, pickles: int):
    """The globals the record's pickles name as an unpickler meets them.  A pickle that is not one is a
    finding; a call the stand-ins or value types refuse (datetime.date("x")) is the data's, not a finding."""
    loader = Recording(data)
    try:
        for _ in range(pickles):
            loader.load()
    except (pickle.UnpicklingError, EOFError) as exc:  # a call that refuses its arguments raises anything else
        raise F.Finding(f"an accepted record is not a pickle: {type(exc).__name__}: {str(exc)[:200]}"
                        f"\n  {data[:300]!r}") from None
    except Exception:  # noqa: BLE001 - a call at load refused its arguments: the names met so far stand
        pass
    return loader.names


def check_names(label: str, policy, data: bytes, pickles: int) -> None:
    for module, name in names_loaded(data, pickles):
        if (module, name) in OWN or (module, name) in SHAPES:
            continue
        if _globals.hard_rule(module, name) is not None:
            raise F.Finding(f"{label}: wrote {module}.{name}, which breaks a hard rule\n  {data[:300]!r}")
        if all(policy.decision(role, module, name) is not None for role in _globals.ROLES):
            raise F.Finding(f"{label}: wrote {module}.{name}, which {policy.mode} allows in no role\n  {data[:300]!r}")


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    gen = Gen(fdp)
    mode = gen.pick(MODES)
    policy = _globals.GlobalsPolicy(mode, allow=[gen.pick(ENTRIES)] if fdp.ConsumeBool() else [])
    module, name = gen.pick(NAMES)
    state = gen.pkl() if fdp.ConsumeIntInRange(0, 15) == 0 else gen.value()
    record = {"@cls": [module, name], "@s": state}
    as_dict = state if isinstance(state, dict) else {"v": state}
    text = json.dumps(state)
    for fn, args, pickles, value in (
            ("encode_zodb_record", (record,), 2, state),
            ("dict_to_pickle", (as_dict,), 1, as_dict),
            ("json_to_pickle", (json.dumps(as_dict),), 1, as_dict),
            ("encode_zodb_record_from_pg_json", (module, name, text), 2, state)):
        py = both(fn, policy, *args)
        if py[0] == "ok" and not F.verbatim(value):
            check_names(fn, policy, py[1], pickles)


def both(name: str, policy, *args) -> tuple:
    """fuzzlib.both with policy=: both twins' outcomes agree, only ValueError escapes; the Python twin's."""
    label = f"policy {policy.mode} {name}"
    py = F.call_py(label, functools.partial(getattr(F.PY, name), policy=policy), *args)
    cy = F.call_cy(label, functools.partial(getattr(F.CY, name), policy=policy), *args)
    F.allowed(label, "cython", cy)
    F.allowed(label, "python", py)
    F.same_outcome(label, py, cy)
    return py


if __name__ == "__main__":
    F.main(TestOneInput)
