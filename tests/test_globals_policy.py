"""The globals policy (docs/security.md): what the encoders refuse to write, in both twins, through all four.

Every route by which JSON edited in a database could make ZODB call or
import what it should not, each refused (the same message in both twins);
the modes, allowlists and the environment; where a refusal says it stands;
and that the corpora need no allowlist in ``standard`` (the Plone site none in
``strict-calls`` either).  A record that gets through is loaded by a real
``ZODB.DB`` in test_a_refused_call_would_have_run, to show what the policy
stops.
"""

from __future__ import annotations

import base64
import json
import logging
import pickle
from typing import Any, Dict

import pytest

from zodb_json_codec import GlobalRefused, GlobalsPolicy, get_globals_policy, set_globals_policy
from zodb_json_codec._globals import (
    ALLOW_VARIABLE, CALL, CLASS, MODE_VARIABLE, VALUE, globals_named, policy_from_environment,
)

import corpus
from twinloader import load_twin

ENCODERS = ("encode_zodb_record", "encode_zodb_record_from_pg_json", "dict_to_pickle", "json_to_pickle")


@pytest.fixture(scope="module")
def twins():
    """Both twins; the Python twin alone where the Cython twin cannot be had (PyPy, no build)."""
    try:
        return load_twin("python"), load_twin("cython")
    except pytest.skip.Exception:
        return (load_twin("python"),)


def cls(module: str, name: str) -> Dict[str, Any]:
    return {"@cls": [module, name]}


def reduce(callable_: Any, *args: Any, **more: Any) -> Dict[str, Any]:
    return {"@reduce": {"callable": callable_, "args": {"@t": list(args)}, **more}}


def encode_all(twin, state: Any, klass=("myapp.content", "Page"), **kwargs) -> Dict[str, Any]:
    """Each of the four encoders on state (as a record's state, or the one value of a pickle): its bytes, or
    the ValueError it raised."""
    outcomes: Dict[str, Any] = {}
    record = {"@cls": list(klass), "@s": state}
    calls = {
        "encode_zodb_record": lambda: twin.encode_zodb_record(record, **kwargs),
        "encode_zodb_record_from_pg_json": lambda: twin.encode_zodb_record_from_pg_json(
            klass[0], klass[1], json.dumps(state), **kwargs),
        "dict_to_pickle": lambda: twin.dict_to_pickle({"v": state}, **kwargs),
        "json_to_pickle": lambda: twin.json_to_pickle(json.dumps({"v": state}), **kwargs),
    }
    for name, call in calls.items():
        try:
            outcomes[name] = call()
        except ValueError as exc:
            outcomes[name] = exc
    return outcomes


#: A compact reference's class is a global in a record only: dict_to_pickle and json_to_pickle write its id in
#: the verbose form, a list of two strings (docs/format.md, "References").
RECORD_ONLY = ("a reference's class",)


def refused_everywhere(twins, state: Any, global_name: str, role: str, encoders=ENCODERS, **kwargs) -> str:
    """state is refused by the encoders of both twins, naming global_name and role, with one message per
    encoder in both twins; the encode_zodb_record message."""
    messages = {}
    for twin in twins:
        for encoder, outcome in encode_all(twin, state, **kwargs).items():
            if encoder not in encoders:
                module, _, name = global_name.rpartition(".")
                assert type(outcome) is bytes and f"c{module}\n{name}\n".encode() not in outcome, outcome
                continue
            assert isinstance(outcome, GlobalRefused), (twin.name, encoder, outcome)
            assert f"'{global_name}'" in str(outcome) and f"as {role.upper()}" in str(outcome), str(outcome)
            messages.setdefault(encoder, set()).add(str(outcome))
    for encoder, texts in messages.items():
        assert len(texts) == 1, (encoder, texts)
    return next(iter(messages["encode_zodb_record"]))


# ---------------------------------------------------------------------------
# The routes
# ---------------------------------------------------------------------------

ROUTES = {
    "a builtin called": (reduce(cls("builtins", "print"), "hi"), "builtins.print", CALL),
    "os.system called": ({"x": [1, reduce(cls("os", "system"), "true")]}, "os.system", CALL),
    "subprocess called": (reduce(cls("subprocess", "check_call"), {"@t": ["true"]}), "subprocess.check_call", CALL),
    "ZConfig's loader": (reduce(cls("ZConfig", "loadConfig"), "schema.xml", "x.conf"), "ZConfig.loadConfig", CALL),
    "FileStorage opened": (reduce(cls("ZODB.FileStorage", "FileStorage"), "/tmp/x.fs", True),
                           "ZODB.FileStorage.FileStorage", CALL),
    "@inst's callable": ({"@inst": {"@callable": cls("os", "system"), "@args": {"@t": ["true"]}, "@state": None}},
                         "os.system", CALL),
    "a class's call with @args (newobj false)": (
        {"@cls": ["os", "system"], "@s": {"@args": {"@t": ["true"]}, "@state": None}, "@newobj": False},
        "os.system", CALL),
    "_reconstructor's class": (
        {"@cls": ["copy_reg", "_reconstructor"],
         "@s": {"@args": {"@t": [cls("ZODB.FileStorage", "FileStorage"), cls("builtins", "object"), None]},
                "@state": {}}},
        "ZODB.FileStorage.FileStorage", CLASS),
    "__newobj__'s class": (reduce(cls("copyreg", "__newobj__"), cls("ZEO.ClientStorage", "ClientStorage")),
                           "ZEO.ClientStorage.ClientStorage", CLASS),
    "a NEWOBJ class": ({"@cls": ["ZODB.DB", "DB"], "@s": {}}, "ZODB.DB.DB", CLASS),
    "a reference's class": ({"r": {"@ref": ["0000000000000001", "ZODB.FileStorage.FileStorage"]}},
                            "ZODB.FileStorage.FileStorage", CLASS),
    "a generic reference's class": (
        {"r": {"@ref": {"@t": [{"@b": "AAAAAAAAAAE="}, cls("ZEO.ClientStorage", "ClientStorage")]}}},
        "ZEO.ClientStorage.ClientStorage", CLASS),
    "a value naming a loader": ({"f": cls("pickle", "loads")}, "pickle.loads", VALUE),
    "BUILD on a module": ({"@inst": {"@obj": cls("os", "path"), "@state": {"sep": "x"}}}, "os.path", CLASS),
    "BUILD on a class": ({"@inst": {"@obj": cls("myapp.content", "Page"), "@state": {"x": 1}}},
                         "myapp.content.Page", CLASS),
    "a dunder name": (reduce(cls("myapp", "__import__"), "os"), "myapp.__import__", CALL),
    "a dotted name": ({"f": cls("os", "path.join")}, "os.path.join", VALUE),
    "not an identifier": ({"f": cls("os;rm", "x")}, "os;rm.x", VALUE),
    "a call's result as the callable": (
        reduce(reduce(cls("myapp", "factory"), "x"), "y"), "<@reduce>", CALL),
    "a getattr of a loader": (
        reduce(reduce(cls("builtins", "getattr"), cls("ZConfig", "loader"), "loadConfig"), "x"),
        "ZConfig.loader.loadConfig", CALL),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_is_refused_by_every_encoder_of_both_twins(twins, route):
    state, name, role = ROUTES[route]
    message = refused_everywhere(twins, state, name, role, ENCODERS[:2] if route in RECORD_ONLY else ENCODERS)
    assert "@s" in message or route == "a NEWOBJ class", message  # says where it stands


OID_B64 = {"@b": "AAAAAAAAAAE="}
REFUSED_CLASS = cls("ZEO.ClientStorage", "ClientStorage")


@pytest.mark.parametrize("ref_id", [
    ["m", {"@t": ["other", OID_B64, REFUSED_CLASS]}],      # a multi-database reference
    ["w", {"@t": [OID_B64, REFUSED_CLASS]}],               # a weak reference with a class
    ["n", {"@t": ["other", OID_B64]}, [REFUSED_CLASS]],    # deeper, in a list
    {"@t": [{"@t": [OID_B64, "x" * 16, REFUSED_CLASS]}]},  # a text of an oid's length beside it
])
def test_the_classes_in_a_generic_reference_id_are_checked(twins, ref_id):
    refused_everywhere(twins, {"r": {"@ref": ref_id}}, "ZEO.ClientStorage.ClientStorage", CLASS)


def test_the_audit_gives_a_reference_id_s_classes_the_role_the_encoders_check():
    # One walk finds them for both (_globals.reference_class_markers): a class deep in a multi-database id is
    # a CLASS to the audit too, where it said VALUE.
    value = {"r": {"@ref": ["m", {"@t": ["other", OID_B64, REFUSED_CLASS]}]},
             "v": cls("ZEO.ClientStorage", "ClientStorage")}
    named = [(n.role, n.path, n.context) for n in globals_named(value) if n.module == "ZEO.ClientStorage"]
    assert named == [(CLASS, "$.r.@ref[1].@t[2]", "the class of a reference"),
                     (VALUE, "$.v", "a class or function kept as a value")]


@pytest.mark.parametrize("ref_id", [
    ["w", {"@t": [OID_B64]}], ["m", {"@t": ["other", OID_B64]}], {"@t": [OID_B64, None]}, ["w", {"@t": []}],
])
def test_generic_reference_ids_without_a_class_encode_alike(twins, ref_id):
    # The Cython twin skips the rules' walk for ids it can see hold no class (a weak reference's): what it
    # writes is the Python twin's, and the record loads.
    outcomes = [encode_all(twin, {"r": {"@ref": ref_id}}) for twin in twins]
    assert all(type(data) is bytes for data in outcomes[0].values()), outcomes[0]
    assert all(outcome == outcomes[0] for outcome in outcomes)


def test_a_malformed_compact_reference_is_refused_by_both_twins(twins):
    for ref_id in (["0000000000000001", {"@t": []}], ["0000000000000001", OID_B64]):
        for twin in twins:
            with pytest.raises(ValueError, match=r"malformed compact @ref"):
                twin.encode_zodb_record({"@cls": ["myapp", "Page"], "@s": {"r": {"@ref": ref_id}}})


def test_a_refusal_crosses_a_process_boundary():
    # The commands encode in worker processes, which send their errors back pickled.
    refusal = GlobalRefused(CALL, "os", "system", "a reason", "the callable of a @reduce", "call os.system",
                            "@s.x")
    again = pickle.loads(pickle.dumps(refusal))
    assert type(again) is GlobalRefused and str(again) == str(refusal) and again.where == "@s.x"


def test_the_record_class_is_a_class(twins):
    for twin in twins:
        with pytest.raises(GlobalRefused, match=r"'ZODB.FileStorage.FileStorage' refused as CLASS \(the record's "
                                                r"class\) at @cls"):
            twin.encode_zodb_record({"@cls": ["ZODB.FileStorage", "FileStorage"], "@s": {}})
        with pytest.raises(GlobalRefused, match="ZODB.FileStorage"):
            twin.encode_zodb_record_from_pg_json("ZODB.FileStorage", "FileStorage", "{}")


def pkl(data: bytes) -> Dict[str, str]:
    return {"@pkl": base64.b64encode(data).decode()}


@pytest.mark.parametrize("case", ["GLOBAL", "STACK_GLOBAL", "STACK_GLOBAL from the memo", "EXT1", "INST"])
def test_verbatim_pickles_are_scanned(twins, case):
    class_pickle = pickle.dumps(("myapp", "Page"), 3)
    body = {
        "GLOBAL": b"\x80\x03cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R.",
        "STACK_GLOBAL": b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R.",
        "STACK_GLOBAL from the memo": b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94h\x00h\x01\x93.",
        "EXT1": b"\x80\x03\x82\x01.",
        "INST": b"(X\x04\x00\x00\x00trueios\nsystem\n.",
    }[case]
    for twin in twins:
        with pytest.raises(GlobalRefused, match="inside a @pkl"):
            twin.encode_zodb_record({"@cls": ["myapp", "Page"], "@s": pkl(class_pickle + body)})
        with pytest.raises(GlobalRefused, match="inside a @pkl"):
            twin.dict_to_pickle(pkl(body))
    # A verbatim record of allowed names is written back as it was.
    allowed = class_pickle + pickle.dumps({"when": __import__("datetime").date(2024, 2, 29)}, 3)
    for twin in twins:
        assert twin.encode_zodb_record({"@cls": ["myapp", "Page"], "@s": pkl(allowed)}) == allowed


def test_allowed_shapes_still_encode(twins):
    """What CPython and the ecosystem write: getattr(zoneinfo.ZoneInfo, "_unpickle"), a functools.partial of a
    plain function as a callable, _reconstructor of an application class, the ecosystem's calls."""
    states = [
        reduce(reduce(cls("builtins", "getattr"), cls("zoneinfo", "ZoneInfo"), "_unpickle"), "Europe/Paris", 1),
        {"@reduce": {"callable": {"@reduce": {"callable": cls("functools", "partial"),
                                              "args": {"@t": [cls("myapp", "make")]},
                                              "state": {"@t": [cls("myapp", "make"), {"@t": []}, {}, None]}}},
                     "args": {"@t": []}}},
        {"@cls": ["copy_reg", "_reconstructor"],
         "@s": {"@args": {"@t": [cls("myapp", "Color"), cls("builtins", "object"), None]}, "@state": {"a": 1}}},
        reduce(cls("zope.component.globalregistry", "GAR"), cls("zope.component.globalregistry", "base"),
               "adapters"),
        reduce(cls("zope.i18nmessageid.message", "Message"), "label", "plone", None, {"n": 1}),
        {"e": cls("builtins", "ValueError"), "t": cls("builtins", "object"), "d": cls("datetime", "date")},
    ]
    for mode in ("standard", "strict-calls"):
        policy = GlobalsPolicy(mode, allow=["call myapp.make"])
        for state in states:
            outcomes = [encode_all(twin, state, policy=policy) for twin in twins]
            for outcome in outcomes:
                for encoder, result in outcome.items():
                    assert type(result) is bytes, (mode, encoder, state, result)
            assert all(o == outcomes[0] for o in outcomes)


def test_strict_calls_refuses_unlisted_calls_until_listed(twins, tmp_path):
    state = reduce(cls("myapp.colors", "Color"), "red")
    for twin in twins:
        assert type(twin.encode_zodb_record({"@cls": ["m", "C"], "@s": state})) is bytes  # standard
    message = refused_everywhere(twins, state, "myapp.colors.Color", CALL, policy=GlobalsPolicy("strict-calls"))
    assert "add the line 'call myapp.colors.Color' to an allowlist file" in message
    allow = tmp_path / "site.allow"
    allow.write_text("# our own\ncall myapp.colors.Color\nclass Products.*   # a pattern\n")
    listed = GlobalsPolicy("strict-calls", files=[str(allow)])
    for twin in twins:
        assert type(twin.encode_zodb_record({"@cls": ["m", "C"], "@s": state}, policy=listed)) is bytes
    # The ecosystem's calls are allowed with their arguments only.
    bad_gar = reduce(cls("zope.component.globalregistry", "GAR"), cls("zope.component.globalregistry", "base"),
                     "anything")
    refused_everywhere(twins, bad_gar, "zope.component.globalregistry.GAR", CALL,
                       policy=GlobalsPolicy("strict-calls"))


def test_strict_refuses_unlisted_classes_and_values(twins):
    strict = GlobalsPolicy("strict", allow=["class myapp.*"])
    for twin in twins:
        assert type(twin.encode_zodb_record({"@cls": ["myapp.content", "Page"], "@s": {}}, policy=strict)) is bytes
        assert type(twin.encode_zodb_record({"@cls": ["BTrees.OOBTree", "OOBucket"], "@s": None},
                                            policy=strict)) is bytes
    refused_everywhere(twins, {"@cls": ["other.app", "Thing"], "@s": {}}, "other.app.Thing", CLASS,
                       policy=strict)
    refused_everywhere(twins, {"v": cls("Missing", "V")}, "Missing.V", VALUE, policy=strict)


def test_warn_logs_once_and_refuses_only_the_hard_rules(twins, caplog):
    warn = GlobalsPolicy("warn")
    with caplog.at_level(logging.WARNING, logger="zodb_json_codec.globals"):
        for twin in twins:
            for _ in range(3):
                assert type(twin.encode_zodb_record({"@cls": ["other.app", "Thing"], "@s": {}}, policy=warn)) is bytes
    lines = [r.getMessage() for r in caplog.records if "other.app.Thing" in r.getMessage()]
    assert len(lines) == 1 and "class other.app.Thing" in lines[0], lines
    refused_everywhere(twins, reduce(cls("builtins", "eval"), "1"), "builtins.eval", CALL, policy=warn)


def test_unrestricted_only_from_code_and_with_a_warning(twins):
    with pytest.warns(RuntimeWarning, match="unrestricted"):
        anything = GlobalsPolicy("unrestricted")
    state = reduce(cls("os", "system"), "true")
    for twin in twins:
        assert b"cos\nsystem\n" in twin.encode_zodb_record({"@cls": ["m", "C"], "@s": state}, policy=anything)
    with pytest.raises(ValueError, match="only code can turn the globals check off"):
        policy_from_environment({MODE_VARIABLE: "unrestricted"})


def test_the_environment_picks_a_mode_and_adds_allowlists(tmp_path):
    one, two = tmp_path / "one.allow", tmp_path / "two.allow"
    one.write_text("call a.b\n")
    two.write_text("value c.*\n")
    policy = policy_from_environment({MODE_VARIABLE: "strict", ALLOW_VARIABLE: f"{one}:{two}"})
    assert policy.mode == "strict" and policy.entries["call"] == ("a.b",) and policy.entries["value"] == ("c.*",)
    assert policy_from_environment({}).mode == "standard"
    with pytest.raises(ValueError, match="unknown globals policy mode"):
        policy_from_environment({MODE_VARIABLE: "off"})
    bad = tmp_path / "bad.allow"
    bad.write_text("call\n")
    with pytest.raises(ValueError, match="bad.allow:1: an allowlist line is"):
        GlobalsPolicy(files=[str(bad)])


def test_the_process_default(twins):
    state = reduce(cls("myapp.colors", "Color"), "red")
    before = get_globals_policy()
    try:
        set_globals_policy(GlobalsPolicy("strict-calls"))
        for twin in twins:
            with pytest.raises(GlobalRefused):
                twin.encode_zodb_record({"@cls": ["m", "C"], "@s": state})
        set_globals_policy(None)
        assert get_globals_policy().mode == "standard"
        with pytest.raises(TypeError):
            set_globals_policy("strict")  # type: ignore[arg-type]
        for twin in twins:
            with pytest.raises(TypeError, match="argument 'policy'"):
                twin.encode_zodb_record({"@cls": ["m", "C"], "@s": {}}, policy="strict")
    finally:
        set_globals_policy(before)


def test_a_refused_call_would_have_run(twins, tmp_path):
    """The first route of the issue: a record whose @reduce names a function, loaded by a real ZODB.DB, runs
    it.  With strict-calls, no encoder writes that record."""
    import transaction
    import ZODB
    import ZODB.FileStorage

    from zodbapp import Item

    state = {"title": reduce(cls("zodbapp", "record_call"), "ran")}
    for twin in twins:
        refused_everywhere([twin], state, "zodbapp.record_call", CALL, policy=GlobalsPolicy("strict-calls"))
    db = ZODB.DB(ZODB.FileStorage.FileStorage(str(tmp_path / "Data.fs")))
    try:
        conn = db.open()
        conn.root()["item"] = Item()
        transaction.commit()
        record = twins[0].encode_zodb_record({"@cls": ["zodbapp", "Item"], "@s": state})  # standard allows it
        import zodbapp
        zodbapp.CALLS.clear()
        conn2 = db.open()
        conn2._reader.getState(record)  # what Connection.setstate unpickles
        assert zodbapp.CALLS == ["ran"]
        conn.close()
        conn2.close()
    finally:
        db.close()


# ---------------------------------------------------------------------------
# The corpora need no allowlist
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", corpus.SETS)
def test_standard_refuses_no_record_of_the_corpora(name):
    policies = {"standard": GlobalsPolicy("standard"), "strict-calls": GlobalsPolicy("strict-calls")}
    refused: Dict[str, list] = {mode: [] for mode in policies}
    from zodb_json_codec import decode_zodb_record
    for oid, data in corpus.records(name):
        try:
            record = decode_zodb_record(data)
        except ValueError:
            continue
        for named in globals_named(record["@s"], tuple(record["@cls"])):
            for mode, policy in policies.items():
                if policy.decision(named.role, named.module, named.name, named.args, named.method) is not None:
                    refused[mode].append((oid, named.role, f"{named.module}.{named.name}", named.path))
    assert refused["standard"] == []
    if name in ("plone", "wikipedia"):
        assert refused["strict-calls"] == []  # a real site's records: nothing to list


def test_the_one_pass_reader_names_a_reference_s_class_as_such():
    # encode_zodb_record_from_pg_json's one pass writes references and instances from the text itself; a
    # refusal there says which of the two it was, as the normative way does.
    cython = pytest.importorskip("zodb_json_codec._encode_cython")
    text = '{"r": {"@ref": ["0000000000000001", "ZODB.FileStorage.FileStorage"]}, "i": 1}'
    with pytest.raises(GlobalRefused, match=r"refused as CLASS \(the class of a reference\)"):
        cython._one_pass_record("myapp", "Page", text)
    text = '{"i": {"@cls": ["ZODB.DB", "DB"], "@s": {"a": 1}}}'
    with pytest.raises(GlobalRefused, match=r"refused as CLASS \(the class of an instance\)"):
        cython._one_pass_record("myapp", "Page", text)


def test_a_class_a_rule_checked_in_the_class_pickle_is_checked_again_in_the_state(twins):
    # The structure hunt's find: a decoded record whose one copy_reg._reconstructor dict is both the
    # callable of a call in the instance's @args (the class pickle: CALL, allowed) and a value in its state
    # (VALUE, refused in standard).  The Cython twin wrote both pickles with one writer and took the state's
    # as checked already; the state is another pickle, checked as the Python twin checks it, and as the
    # same record's JSON text (no shared dicts) is.
    shared = {"@cls": ["copy_reg", "_reconstructor"]}
    call = {"@reduce": {"callable": shared, "args": {"@t": [{"@cls": ["zodbapp", "Item"]},
                                                             {"@cls": ["__builtin__", "object"]}, None]}}}
    record = {"@cls": ["zodbapp", "Item"], "@s": {"@args": {"@t": [call]}, "@state": {"@d": [[1, shared]]}}}
    for twin in twins:
        for value in (record, json.loads(json.dumps(record))):
            with pytest.raises(GlobalRefused, match=r"copy_reg\._reconstructor' refused as VALUE.*at @s\.@state"):
                twin.encode_zodb_record(value)
