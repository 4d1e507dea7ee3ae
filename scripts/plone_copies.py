"""Copy a real Plone site every way the command line can, and open each copy in Plone.

    python scripts/plone_copies.py SITE_DIR [--dsn DSN] [--work DIR]

Run inside the virtualenv ``scripts/check-plone-copies`` makes (Plone, this
package, zodb-pgjsonb); use that script.  SITE_DIR holds Data.fs and blobs/
(``scripts/make-plone-site`` builds one).  DSN names a PostgreSQL server
where the check may create and drop databases named ``plone_copies_*``;
without it, a throwaway server is started (tests/pgserver.py).

The copies (every revision, every blob, every transaction):

1. ``dump --all`` + ``load``: a new FileStorage and blob directory;
2. ``pg-export --all`` + ``pg-import``: the same, through zodb-pgjsonb's tables;
3. ``pg-export --all`` opened by zodb-pgjsonb's own storage (history-preserving).

Each copy must pass ``verify --against`` (1 and 2), and Zope started on each
copy (a process of its own, no web server) must show what it shows on the
original: the catalog's counts per type, the text of every Document, the bytes
of every Image and File, and the undo log (user and description of each
transaction; zodb-pgjsonb's log goes on past FileStorage's, which ends at a
transaction a pack went through).  Exit status 0 when every copy is the same,
1 otherwise; the differences are printed.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "tests"))  # the test suite's throwaway PostgreSQL and databases

from helpers import fresh_database  # noqa: E402

FS_CONF = """\
<filestorage>
    path {path}
    blob-dir {blobs}
  </filestorage>"""
PGJSONB_CONF = """\
<pgjsonb>
    dsn {dsn}
    history-preserving true
    blob-temp-dir {blobs}
    cache-warm-pct 0
  </pgjsonb>"""
ZOPE_CONF = """\
%define INSTANCE {work}
instancehome $INSTANCE
{imports}
<zodb_db main>
  {storage}
  mount-point /
</zodb_db>
"""


def facts_of(conf: str) -> dict:
    """What Zope started on conf shows (run in a process of its own: Zope starts once per process)."""
    from plone_site import quiet_logs, start_zope

    quiet_logs()
    app = start_zope(conf)
    site = app.Plone
    catalog = site.portal_catalog
    counts = {kind: len(catalog.unrestrictedSearchResults(portal_type=kind))
              for kind in catalog.uniqueValuesFor("portal_type")}
    texts, blobs = {}, {}
    for brain in catalog.unrestrictedSearchResults(portal_type=["Document", "News Item", "Image", "File"]):
        obj = brain._unrestrictedGetObject()
        path = brain.getPath()
        text = getattr(obj, "text", None)
        if text is not None:
            texts[path] = text.raw
        for field in ("image", "file"):
            value = getattr(obj, field, None)
            if value is not None:
                blobs[path + "/" + field] = hashlib.sha256(value.data).hexdigest()
    undo = [[entry["user_name"].decode("utf-8", "replace") if isinstance(entry["user_name"], bytes)
             else entry["user_name"],
             entry["description"].decode("utf-8", "replace") if isinstance(entry["description"], bytes)
             else entry["description"]]
            for entry in app._p_jar.db().undoLog(0, 100000)]
    return {"catalog": counts, "texts": texts, "blobs": blobs, "undo": undo}


def write_conf(work: str, name: str, storage: str, imports: str = "") -> str:
    directory = os.path.join(work, name, "etc")
    os.makedirs(os.path.join(directory, "chameleon-cache"), exist_ok=True)
    conf = os.path.join(directory, "zope.conf")
    with open(conf, "w") as f:
        f.write(ZOPE_CONF.format(work=os.path.join(work, name), imports=imports, storage=storage))
    return conf


def facts(conf: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--facts", conf], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"Zope on {conf} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.splitlines()[-1])


def cli(*args: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "zodb_json_codec", *args], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"zodb-json-codec {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    said = (proc.stdout.strip() or proc.stderr.strip() or "(nothing said)").splitlines()[-1]
    print(f"  {args[0]}: {time.perf_counter() - started:.1f} s: {said}")
    return time.perf_counter() - started


def compare(name: str, want: dict, got: dict) -> list:
    problems = []
    for key in ("catalog", "texts", "blobs"):
        if got[key] != want[key]:
            unlike = sorted(k for k in set(want[key]) | set(got[key]) if want[key].get(k) != got[key].get(k))
            problems.append(f"{name}: {key} differs at {len(unlike)} entries, e.g. {unlike[:3]}")
    if got["undo"][:len(want["undo"])] != want["undo"]:
        problems.append(f"{name}: the undo log differs")
    elif len(got["undo"]) != len(want["undo"]) and not name.startswith("zodb-pgjsonb"):
        problems.append(f"{name}: the undo log has {len(got['undo'])} entries, the original {len(want['undo'])}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", nargs="?")
    parser.add_argument("--dsn")
    parser.add_argument("--work")
    parser.add_argument("--facts", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.facts:
        print(json.dumps(facts_of(args.facts)))
        return 0
    if not args.site:
        parser.error("give SITE_DIR")
    if args.dsn is None:  # a throwaway server of the test suite's, for this run
        from pgserver import PgServer

        server = PgServer.start()
        try:
            return check(args.site, server.dsn, args.work)
        finally:
            server.stop()
    return check(args.site, args.dsn, args.work)


def check(site: str, base_dsn: str, work: str) -> int:
    data_fs, blobs = os.path.join(site, "Data.fs"), os.path.join(site, "blobs")
    work = work or tempfile.mkdtemp(prefix="plone-copies-")
    print(f"work directory: {work}")
    original = write_conf(work, "original", FS_CONF.format(path=os.path.abspath(data_fs),
                                                           blobs=os.path.abspath(blobs)))
    want = facts(original)
    print(f"original: catalog {sum(want['catalog'].values())} objects, {len(want['texts'])} texts, "
          f"{len(want['blobs'])} images and files, {len(want['undo'])} undo log entries")

    copies = {}
    print("dump --all + load")
    dump = os.path.join(work, "site.jsonl")
    cli("dump", data_fs, "--all", "--blob-dir", blobs, "-o", dump)
    copies["dump + load"] = (os.path.join(work, "loaded.fs"), os.path.join(work, "loaded-blobs"))
    cli("load", dump, *copies["dump + load"][:1], "--blob-dir", copies["dump + load"][1])
    print("pg-export --all + pg-import")
    dsn = fresh_database(base_dsn, "plone_copies_hp")
    cli("pg-export", data_fs, "--dsn", dsn, "--all", "--blob-dir", blobs)
    copies["pg-export + pg-import"] = (os.path.join(work, "imported.fs"), os.path.join(work, "imported-blobs"))
    cli("pg-import", copies["pg-export + pg-import"][0], "--dsn", dsn, "--blob-dir", copies["pg-export + pg-import"][1])

    problems = []
    for name, (path, copy_blobs) in copies.items():
        proc = subprocess.run([sys.executable, "-m", "zodb_json_codec", "verify", path, "--against", data_fs,
                               "--all", "--blob-dir", copy_blobs, "--original-blob-dir", blobs],
                              capture_output=True, text=True)
        print(f"  verify ({name}): {proc.stdout.strip()}")
        if proc.returncode:
            problems.append(f"{name}: verify --against: exit {proc.returncode}\n{proc.stderr}")
        conf = write_conf(work, name.replace(" ", "").replace("+", "_"),
                          FS_CONF.format(path=path, blobs=copy_blobs))
        problems += compare(name, want, facts(conf))
    conf = write_conf(work, "pgjsonb", PGJSONB_CONF.format(dsn=dsn, blobs=os.path.join(work, "pgjsonb-tmp")),
                      imports="%import zodb_pgjsonb")
    problems += compare("zodb-pgjsonb on pg-export", want, facts(conf))
    for problem in problems:
        print(problem)
    print("every copy the same in Plone" if not problems else f"{len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
