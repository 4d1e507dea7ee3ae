"""Generated FileStorages of Plone-like content dominated by large texts (deterministic, seeded).

    python benchmarks/largetext.py          # build both into the cache and describe them

Two sets, written by ZODB itself (persistent objects and BTrees committed to
a real FileStorage, classes from benchmarks/plonelike.py):

- ``plone_large_text``: a site of documents, news items and events with
  rich-text bodies from 3 KB to 1 MB of HTML, each with title, description,
  Zope DateTimes, timezone-aware datetimes (events), references to other
  documents, a workflow history (PersistentMapping), folders holding their
  children in OOBTrees, and a catalog-like OOBTree of metadata tuples large
  enough to split into OOBucket records. About 3 MB of pickles.
- ``large_strings``: eight File objects, each holding one string of 50 KB to
  1 MB in one of five flavours (ASCII prose, HTML with accents, CJK-heavy,
  escape-heavy, and HTML with one U+0000, which the PostgreSQL form writes as
  an ``@ns`` marker). About 3 MB of pickles; for the load path.

The texts mix accented Latin, Greek and Cyrillic words, CJK, emoji (with
joiners, modifiers and flags) and what JSON must escape: quotes,
backslashes, control characters; plus U+2028 and U+2029, which JSON allows
raw but JavaScript does not. Everything comes from one random.Random(SEED),
DateTimes and datetimes from fixed instants with explicit zones, so the
records are the same bytes on every machine and run. Each FileStorage is
built once into datasets.CACHE, named by VERSION and SEED.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))  # plonelike, for the records' class names

import plonelike  # noqa: E402

SEED = 20240501
#: Part of the cached files' names: bump it whenever the generated records change.
VERSION = 1

# Word pools, each with the weights of the flavours below.
ASCII_WORDS = (
    "the of and to in is that for it as with was on be by this are from at or an have not which "
    "Plone Zope content page site portal workflow catalog member folder document image news event "
    "search index review state publish private editor author title description summary archive"
).split()
ACCENTED_WORDS = (
    "café naïve façade Straße Müller über señor año crème brûlée Ångström smörgåsbord déjà Þingvellir "
    "Łódź Dvořák český Ελληνικά αλφάβητο Русский текст Ærø Köln Zürich São Paulo Besançon élève"
).split()
CJK_WORDS = "日本語 中文 한국어 東京 文字化け テキスト 漢字 北京 서울 ウェブサイト 内容管理 文書 검색".split()
EMOJI = ["🙂", "🚀", "📄", "👍🏽", "🇩🇪", "👩‍💻", "✨", "🎉", "❤️"]
ESCAPES = [
    '"quoted"', "l'apostrophe", "C:\\Program Files\\Plone", "back\\slash", "a\\u0041b", "tab\there",
    "line\nbreak", "crlf\r\n", "bell\x07", "esc\x1b[0m", "form\x0cfeed", "unit\x1fsep", "del\x7f",
    "line\u2028separator", "para\u2029separator", "</script>", "{\"json\": [1, 2]}",
]
POOLS = (ASCII_WORDS, ACCENTED_WORDS, CJK_WORDS, EMOJI, ESCAPES)

#: Weights over POOLS, by flavour.
FLAVOURS: Dict[str, Tuple[float, ...]] = {
    "ascii": (1.0, 0, 0, 0, 0),
    "html": (0.80, 0.10, 0.05, 0.02, 0.03),
    "cjk": (0.15, 0.05, 0.75, 0.05, 0),
    "escapes": (0.60, 0.05, 0.02, 0.03, 0.30),
}

LINKS = ["https://example.org/plone/news?a=1&b=2", "../docs/über-uns", "mailto:info@example.org"]


def _words(rng: random.Random, flavour: str, count: int) -> List[str]:
    weights = FLAVOURS[flavour]
    pools = rng.choices(range(len(POOLS)), weights=weights, k=count)
    return [rng.choice(POOLS[p]) for p in pools]


def _block(rng: random.Random, flavour: str, html: bool) -> str:
    """One paragraph, heading, link paragraph or list (or a plain-text paragraph when not html)."""
    sentence = " ".join(_words(rng, flavour, rng.randint(8, 60)))
    if not html:
        return sentence + ".\n\n"
    kind = rng.random()
    if kind < 0.1:
        return f"<h2>{sentence[:80]}</h2>\n"
    if kind < 0.25:
        href = rng.choice(LINKS)
        return f'<p>{sentence} <a href="{href}" title="{sentence[:30]}">mehr…</a></p>\n'
    if kind < 0.35:
        items = "".join(f"<li>{w}</li>" for w in _words(rng, flavour, rng.randint(2, 8)))
        return f"<ul>{items}</ul>\n"
    return f"<p>{sentence} <strong>{rng.choice(ACCENTED_WORDS)}</strong>.</p>\n"


def text(rng: random.Random, size: int, flavour: str = "html", html: bool = True) -> str:
    """A text of at least size UTF-8 bytes (and at most one block more)."""
    blocks: List[str] = []
    total = 0
    while total < size:
        block = _block(rng, flavour, html)
        blocks.append(block)
        total += len(block.encode("utf-8"))
    return "".join(blocks)


def log_uniform(rng: random.Random, low: float, high: float) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


# -- plone_large_text -------------------------------------------------------

#: UTF-8 bytes of all bodies together; with the rest of the site, about 3 MB of pickles.
BODY_BUDGET = 2_800_000
BASE_TIME = 1_704_067_200.0  # 2024-01-01T00:00:00Z: all dates are fixed offsets from it
ZONES = ("GMT+1", "GMT+2", "UTC", "GMT-5", "GMT+9")


def body_sizes(rng: random.Random) -> List[int]:
    """The bodies' sizes: one of 1 MB, one of 3 KB, the rest log-uniform in 3-300 KB up to BODY_BUDGET."""
    sizes = [1_000_000, 3_000]
    while sum(sizes) < BODY_BUDGET:
        sizes.append(log_uniform(rng, 3_000, 300_000))
    rng.shuffle(sizes)
    return sizes


def zope_date(rng: random.Random, days: float = 365):
    from DateTime import DateTime

    return DateTime(BASE_TIME + rng.uniform(0, days * 86400), rng.choice(ZONES))


def aware_datetime(rng: random.Random) -> dt.datetime:
    zone = dt.timezone(dt.timedelta(hours=rng.choice((-5, 0, 1, 2, 9))))
    naive = dt.datetime(2024, 1, 1) + dt.timedelta(minutes=rng.randrange(365 * 24 * 60))
    return naive.replace(tzinfo=zone)


def workflow_history(rng: random.Random):
    from persistent.mapping import PersistentMapping

    entries = tuple(
        {"action": action, "actor": rng.choice(("admin", "redakteur", "éditeur")), "comments": comment,
         "review_state": state, "time": zope_date(rng)}
        for action, state, comment in (
            (None, "private", ""), ("submit", "pending", "Bitte prüfen: \"Entwurf\""), ("publish", "published", ""))
    )
    return PersistentMapping({"simple_publication_workflow": entries})


def document(rng: random.Random, index: int, size: int) -> plonelike.Document:
    """A document, news item or event (by index) with a body of size bytes."""
    kind = (plonelike.Document, plonelike.NewsItem, plonelike.Event)[index % 3]
    doc = kind()
    doc.id = f"page-{index:03d}"
    doc.portal_type = kind.__name__
    doc.title = " ".join(_words(rng, "html", rng.randint(3, 9)))
    doc.description = " ".join(_words(rng, "html", rng.randint(15, 60)))
    doc.text = plonelike.RichTextValue(text(rng, size))
    doc.creators = ("admin", "éditeur")
    doc.contributors = ()
    doc.subject = tuple(_words(rng, "html", rng.randint(0, 5)))
    doc.language = rng.choice(("de", "fr", "ja", "en"))
    doc.rights = "© 2024 Example «Verein»"
    doc.creation_date = zope_date(rng)
    doc.modification_date = zope_date(rng)
    doc.effective_date = zope_date(rng) if rng.random() < 0.7 else None
    doc.expiration_date = None
    doc.exclude_from_nav = False
    doc.workflow_history = workflow_history(rng)
    doc._owner = (["acl_users"], "admin")
    doc.__ac_local_roles__ = {"admin": ["Owner"]}
    setattr(doc, "_plone.uuid", "%032x" % rng.getrandbits(128))
    if kind is plonelike.Event:
        doc.start = aware_datetime(rng)
        doc.end = doc.start + dt.timedelta(hours=rng.randint(1, 72))
        doc.whole_day = False
        doc.location = "Saal «Ökumene», 東京"
    elif kind is plonelike.NewsItem:
        doc.image_caption = " ".join(_words(rng, "html", 6))
    return doc


def catalog_metadata(rng: random.Random, doc: plonelike.Document) -> tuple:
    """A catalog brain's metadata: what a catalog keeps per object, text included."""
    return (doc.title, doc.description, doc.portal_type, doc.modification_date, doc.effective_date,
            doc.subject, "/Plone/" + doc.id, doc.language, rng.randint(1, 10**6))


def build_plone_site(root, rng: random.Random) -> None:
    """Folders of documents, references between them, and a catalog-like OOBTree, into root."""
    from BTrees.OOBTree import OOBTree

    docs = [document(rng, i, size) for i, size in enumerate(body_sizes(rng))]
    for doc in docs:
        doc.relatedItems = rng.sample(docs, rng.randint(0, 3))  # persistent references
    site = plonelike.Folder()
    site.id, site.title, site._tree = "Plone", "Website der Gemeinde Zürich-Süd", OOBTree()
    for name in ("news", "events", "docs"):
        folder = plonelike.Folder()
        folder.id, folder.title, folder._tree = name, name.capitalize(), OOBTree()
        site._tree[name] = folder
    for doc in docs:
        folder = {"NewsItem": "news", "Event": "events"}.get(doc.portal_type, "docs")
        site._tree[folder]._tree[doc.id] = doc
    catalog = OOBTree()  # enough entries to split into OOBucket records of their own
    for i in range(8 * len(docs)):
        doc = docs[i % len(docs)]
        catalog["%032x" % rng.getrandbits(128)] = catalog_metadata(rng, doc)
    site.catalog = catalog
    root["Plone"] = site


# -- large_strings ----------------------------------------------------------

#: Eight sizes in geometric steps from 50 KB to 1 MB (about 2.8 MB together), and their flavours.
LARGE_STRING_SIZES = [int(50_000 * 20 ** (i / 7)) for i in range(8)]
LARGE_STRING_KINDS = ("ascii", "html", "cjk", "escapes", "html-nul")


def large_string(rng: random.Random, size: int, kind: str) -> str:
    if kind == "ascii":
        return text(rng, size, "ascii", html=False)
    if kind == "html-nul":
        body = text(rng, size)
        middle = len(body) // 2
        return body[:middle] + "\x00" + body[middle:]
    return text(rng, size, kind, html=kind == "html")


def build_large_strings(root, rng: random.Random) -> None:
    for i, size in enumerate(LARGE_STRING_SIZES):
        kind = LARGE_STRING_KINDS[i % len(LARGE_STRING_KINDS)]
        f = plonelike.File()
        f.title = f"{kind} {size // 1000} KB"
        f.content_type = "text/html" if kind.startswith("html") else "text/plain"
        f.data = large_string(rng, size, kind)
        f.modified = zope_date(rng)
        root[f"file-{i}"] = f


BUILDERS: Dict[str, Callable] = {"plone_large_text": build_plone_site, "large_strings": build_large_strings}
NAMES = tuple(BUILDERS)


def write_storage(path: Path, build: Callable) -> None:
    """Commit what build(root, rng) puts into a new FileStorage at path, in one transaction."""
    import transaction
    import ZODB
    from ZODB.FileStorage import FileStorage

    db = ZODB.DB(FileStorage(str(path)))
    try:
        tm = transaction.TransactionManager()
        conn = db.open(tm)
        build(conn.root(), random.Random(SEED))
        tm.commit()
        conn.close()
    finally:
        db.close()


def storage_path(name: str, cache: Path) -> Path:
    """The FileStorage of a generated set, built into cache on first use."""
    target = cache / f"{name}-v{VERSION}-seed{SEED}.fs"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    # Built in a directory of its own (FileStorage writes .index, .lock and
    # .tmp beside it), then renamed: a concurrent run never reads half a file.
    workdir = Path(tempfile.mkdtemp(dir=cache, prefix=name + "."))
    try:
        write_storage(workdir / "Data.fs", BUILDERS[name])
        os.chmod(workdir / "Data.fs", 0o644)
        os.replace(workdir / "Data.fs", target)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return target


def describe(name: str, records: Sequence[bytes]) -> str:
    sizes = sorted(len(r) for r in records)
    return (f"{name}: {len(records)} records, {sum(sizes) / 1e6:.2f} MB of pickles, "
            f"largest {sizes[-1] / 1e3:.0f} KB, median {sizes[len(sizes) // 2] / 1e3:.1f} KB")


if __name__ == "__main__":
    import datasets

    for set_name in NAMES:
        print(describe(set_name, datasets.load(set_name)), "-", datasets.generated_path(set_name))
