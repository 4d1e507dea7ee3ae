"""Build a real Plone 6 site into a FileStorage with blobs, without a web server.

    python scripts/plone_site.py WORK_DIR [--seed N] [--scale K] [--pack]

Run inside a virtualenv that has Plone (``scripts/make-plone-site`` makes one
and calls this script; use that).  Writes WORK_DIR/Data.fs and WORK_DIR/blobs/
(and WORK_DIR/etc/, the zope.conf and site.zcml it starts Zope with).  With
--pack also WORK_DIR/packed/Data.fs and WORK_DIR/packed/blobs/: a copy packed
to now (no history, no unreachable objects, one revision per blob).

Zope starts from the zope.conf (no WSGI server), the script logs in as a
Zope manager and builds the site with plone.api the way people would through
the web: one transaction per content creation, edit, workflow transition,
comment, relation or settings change, each with the user name and the
description (the published path) that Zope records.  What a real site has:

- a Classic UI site (plone.classicui's distribution) with its example content,
  simple_publication_workflow, plone.app.discussion installed and enabled;
- a dozen users (names in several scripts), groups, memberships, global
  roles through groups and local roles on folders (one folder blocks
  inheritance), content created and edited by several of them;
- nested folders (four levels), Documents with rich text (internal links
  through resolveuid, so linkintegrity relations), News Items (some with lead
  images), Events in several time zones (whole-day, open-ended, recurring),
  Images (PNG, JPEG, generated with Pillow) with stored scales, Files (a PDF,
  a ZIP, CSV, random binary), Links, Collections, static portlets;
- blobs replaced by new versions (several revisions of one blob), CMFEditions
  versions with change notes, comments and replies, relatedItems relations,
  workflow transitions (submit, publish, retract, reject), moves, renames,
  copies and deletions;
- undone transactions, through the database's undo API as Zope's
  manage_undo_transactions does: an edit undone, a workflow transition undone,
  and a creation undone.

Random choices come from --seed (content UIDs too: uuid.uuid4 is seeded), so
a rebuild with the same seed and scale gives the same content, UIDs and
history; only times differ (transaction ids, dates, and with them a few
catalog records).  --scale multiplies the amount of content and activity.
At the end it prints the site's figures.

One build (seed 1, scale 1.0, Plone 6.2.2 on CPython 3.12, 2 cores): 85 s;
Data.fs 82,042,400 bytes, 93,705 record revisions in 622 transactions,
19,280 distinct oids; 94 blob files, 29,368,752 bytes, 6 blobs with more
than one revision; 3 undo transactions, 38 records whose creation was undone
(no data, only the undo's back pointer); 12 users, 8 groups (4 of its own
and Plone's Administrators, Site Administrators, Reviewers,
AuthenticatedUsers); 183 CMFEditions versions of 103 items; relations:
isReferencing 51, relatedItems 39; in the catalog: Collection 5, Discussion
Item 68, Document 65, Event 16, File 10, Folder 24, Image 24, Link 5, News
Item 23, Plone Site 1.  Packed: 7,990,968 bytes, 17,857 records in 523
transactions, 78 blob files (21,635,361 bytes).  Scale 0.1: about 19,000
record revisions in 155 transactions, 25 s; scale 4: 360,392 in 2,325
transactions (351 MB, 108 MB of blobs), 5 minutes.  ``zodb-json-codec
verify`` on it: every record with data the same through the dict and the
JSON text, on both twins.
"""

import argparse
import io
import logging
import os
import random
import shutil
import sys
import time
import uuid
import zipfile
from datetime import datetime, timedelta


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work_dir", help="where Data.fs and blobs/ are written (created if missing)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--scale", type=float, default=1.0, help="amount of content and activity (default 1.0)")
    parser.add_argument("--pack", action="store_true", help="also write packed/Data.fs, a copy packed to now")
    args = parser.parse_args(argv)
    if not args.scale > 0:
        parser.error("--scale must be positive")
    return args


# ---------------------------------------------------------------------------
# Starting Zope from a zope.conf, without a server

SITE_ZCML = """\
<configure
    xmlns="http://namespaces.zope.org/zope"
    xmlns:meta="http://namespaces.zope.org/meta"
    xmlns:five="http://namespaces.zope.org/five">
  <include package="Zope2.App" />
  <include package="Products.Five" />
  <meta:redefinePermission from="zope2.Public" to="zope2.View" />
  <five:loadProducts file="meta.zcml" />
  <five:loadProducts />
  <five:loadProductsOverrides />
  <securityPolicy component="AccessControl.security.SecurityPolicy" />
</configure>
"""

ZOPE_CONF = """\
%define INSTANCE {work}
instancehome $INSTANCE
<environment>
  CHAMELEON_CACHE $INSTANCE/etc/chameleon-cache
</environment>
<zodb_db main>
  <filestorage>
    path $INSTANCE/Data.fs
    blob-dir $INSTANCE/blobs
  </filestorage>
  mount-point /
  cache-size 50000
</zodb_db>
"""


def write_config(work):
    etc = os.path.join(work, "etc")
    os.makedirs(os.path.join(etc, "chameleon-cache"), exist_ok=True)
    with open(os.path.join(etc, "site.zcml"), "w") as f:
        f.write(SITE_ZCML)
    conf = os.path.join(etc, "zope.conf")
    with open(conf, "w") as f:
        f.write(ZOPE_CONF.format(work=work))
    return conf


def start_zope(conf):
    """Zope's application object, on a request, as zconsole's run gives it."""
    from Zope2.Startup.run import make_wsgi_app

    make_wsgi_app({}, conf)
    import Zope2
    from Testing.makerequest import makerequest
    from zope.globalrequest import setRequest

    app = makerequest(Zope2.app())
    app.REQUEST["PARENTS"] = [app]
    setRequest(app.REQUEST)
    return app


def quiet_logs():
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Known, harmless noise of a site's creation and of indexing files
    # without the external converters (pdftotext and the like).
    for name in (
        "GenericSetup",
        "Products.MimetypesRegistry",
        "Products.PortalTransforms",
        "plone.app.contenttypes",
        "plone.namedfile",
        "plone.scale",
        "plone.app.event",
        "PIL",
    ):
        logging.getLogger(name).setLevel(logging.ERROR)
    # plone.api creates content under a temporary id and renames it before
    # the indexing queue has cataloged it; ZCatalog logs the unindexing of
    # the temporary path as an error each time.
    logging.getLogger("Zope.ZCatalog").setLevel(logging.CRITICAL)


# ---------------------------------------------------------------------------
# Made-up but plausible content

WORDS = (
    "ZODB persistent object database transaction commit record pickle storage "
    "blob catalog index folder document page news event image file workflow "
    "review publish draft member group editor reviewer portal site content "
    "relation version history comment reply schedule meeting agenda budget "
    "report annual project team department research library archive policy "
    "security access release migration upgrade backup restore server network "
    "community conference workshop sprint deadline milestone roadmap feature"
).split()
FOREIGN = (
    "Straße Grüße Übersicht Änderung Veranstaltung Mitteilung "
    "événement réunion équipe bibliothèque déjà "
    "año señal mañana información "
    "会議 お知らせ 資料 予定 "
    "новости отчёт встреча "
    "συνάντηση ειδήσεις "
    "ملخص تقرير"
).split()
FIRST = ["Anna", "Jürgen", "Søren", "Zoë", "Mateo", "Aiko", "Olga", "Nikos", "Fatima", "Liam", "Chloé", "Wei"]
LAST = ["Schmidt", "Müller", "Kjær", "O'Brien", "García", "Tanaka", "Ivanova", "Papadopoulos", "Haddad", "Murphy", "Lefèvre", "Zhang"]
SECTIONS = [
    ("About us", "about"),
    ("Departments", "departments"),
    ("Projects", "projects"),
    ("Intranet", "intranet"),
    ("Media", "media"),
    ("Archive", "archive"),
]
SUBFOLDER_NAMES = [
    "Research", "Finance", "Human Resources", "Communication", "Infrastructure",
    "Legal", "Sales", "Support", "Operations", "Training", "Partners", "Reports",
    "Meetings", "Guidelines", "Templates", "Publications", "Photos", "Downloads",
    "2021", "2022", "2023", "2024", "2025", "Team", "Press", "Events archive",
]
TIMEZONES = [
    "Europe/Berlin", "America/New_York", "Asia/Tokyo", "UTC",
    "Australia/Sydney", "America/Sao_Paulo", "Asia/Kolkata", "Europe/London",
]
RECURRENCES = [
    "RRULE:FREQ=WEEKLY;COUNT=8",
    "RRULE:FREQ=MONTHLY;BYMONTHDAY=15;COUNT=12",
    "RRULE:FREQ=DAILY;INTERVAL=2;COUNT=5",
    "RRULE:FREQ=YEARLY;UNTIL=20301231T000000Z",
    "RRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;COUNT=9\nEXDATE:{exdate}",
]
CHANGE_NOTES = [
    "Fixed typos", "Updated figures for this quarter", "Added a section on access",
    "Reworded the introduction", "New contact person", "Links updated",
    "Überarbeitet nach Rückmeldung", "Mise à jour du calendrier", "Minor edits",
    "Restructured headings", "Added a table", "Removed outdated paragraph",
]


class Text:
    """Seeded random titles, sentences and HTML."""

    def __init__(self, rng):
        self.rng = rng

    def words(self, n, foreign=0.08):
        rng = self.rng
        return [rng.choice(FOREIGN) if rng.random() < foreign else rng.choice(WORDS) for _ in range(n)]

    def title(self):
        return " ".join(self.words(self.rng.randint(2, 6))).capitalize()

    def sentence(self):
        return " ".join(self.words(self.rng.randint(6, 18))).capitalize() + "."

    def paragraph(self):
        return " ".join(self.sentence() for _ in range(self.rng.randint(2, 7)))

    def html(self, links=(), images=(), size=1.0):
        """A page body: headings, paragraphs, lists, a table, links.

        links: (uid, title) pairs linked through resolveuid, as Plone's
        editor writes internal links; images: UIDs of images shown inline.
        """
        rng = self.rng
        parts = []
        links = list(links)
        images = list(images)
        for _ in range(max(1, round(rng.randint(2, 7) * size))):
            kind = rng.random()
            if kind < 0.15:
                parts.append(f"<h2>{self.title()}</h2>")
            if kind < 0.55 or not (links or images):
                text = self.paragraph()
                if rng.random() < 0.3:
                    w = rng.choice(WORDS)
                    text = text.replace(f" {w} ", f" <strong>{w}</strong> ", 1)
                if rng.random() < 0.2:
                    text += f' See <a href="https://example.org/{rng.choice(WORDS)}">{rng.choice(WORDS)}</a>.'
                parts.append(f"<p>{text}</p>")
            elif kind < 0.7:
                tag = rng.choice(("ul", "ol"))
                items = "".join(f"<li>{self.sentence()}</li>" for _ in range(rng.randint(2, 6)))
                parts.append(f"<{tag}>{items}</{tag}>")
            elif kind < 0.8:
                rows = "".join(
                    "<tr>" + "".join(f"<td>{rng.randint(0, 10**rng.randint(1, 6))}</td>" for _ in range(4)) + "</tr>"
                    for _ in range(rng.randint(2, 6))
                )
                head = "".join(f"<th>{w}</th>" for w in self.words(4, foreign=0))
                parts.append(f'<table class="table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>')
            elif links:
                uid, title = links.pop()
                parts.append(f'<p>{self.sentence()} <a href="resolveuid/{uid}" data-linktype="internal" '
                             f'data-val="{uid}">{title}</a></p>')
            elif images:
                uid = images.pop()
                parts.append(f'<p><img class="image-richtext image-inline" src="resolveuid/{uid}/@@images/image/preview" '
                             f'alt="{self.title()}" data-linktype="image" data-val="{uid}" data-scale="preview" /></p>')
        for uid, title in links:
            parts.append(f'<p><a href="resolveuid/{uid}" data-linktype="internal" data-val="{uid}">{title}</a></p>')
        return "\n".join(parts)


def make_image(rng, fmt, width, height):
    """PNG or JPEG bytes: shapes on a gradient with some noise (JPEGs are photo-like)."""
    from PIL import Image, ImageDraw

    def color():
        return (rng.randrange(256), rng.randrange(256), rng.randrange(256))

    top, bottom = color(), color()
    img = Image.linear_gradient("L").resize((width, height))
    img = Image.composite(Image.new("RGB", (width, height), top), Image.new("RGB", (width, height), bottom), img)
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(5, 40)):
        x0, y0 = rng.randrange(width), rng.randrange(height)
        x1, y1 = x0 + rng.randrange(1, width // 2 + 2), y0 + rng.randrange(1, height // 2 + 2)
        shape = rng.random()
        if shape < 0.4:
            draw.ellipse((x0, y0, x1, y1), fill=color())
        elif shape < 0.8:
            draw.rectangle((x0, y0, x1, y1), fill=color())
        else:
            draw.line((x0, y0, x1, y1), fill=color(), width=rng.randint(1, 12))
    # Photos (JPEG) are noisy; a third of the PNGs too, the rest are flat like diagrams.
    if fmt == "JPEG" or rng.random() < 0.33:
        noise = Image.frombytes("L", (width, height), rng.randbytes(width * height)).convert("RGB")
        img = Image.blend(img, noise, 0.12 if fmt == "JPEG" else 0.04)
    out = io.BytesIO()
    if fmt == "JPEG":
        img.save(out, "JPEG", quality=rng.choice((80, 85, 90, 95)))
    else:
        img.save(out, "PNG", optimize=False)
    return out.getvalue()


def make_file(rng, kind, text):
    """(filename stem suffix, content type, bytes) of a download."""
    if kind == "pdf":
        from PIL import Image

        pages = [Image.open(io.BytesIO(make_image(rng, "JPEG", 1240, 1754))) for _ in range(rng.randint(1, 3))]
        out = io.BytesIO()
        pages[0].save(out, "PDF", save_all=True, append_images=pages[1:], resolution=150.0, title=text.title())
        return "pdf", "application/pdf", out.getvalue()
    if kind == "zip":
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for i in range(rng.randint(2, 6)):
                z.writestr(f"part-{i}.txt", "\n".join(text.paragraph() for _ in range(rng.randint(20, 200))))
            z.writestr("data.bin", rng.randbytes(rng.randint(10_000, 200_000)))
        return "zip", "application/zip", out.getvalue()
    if kind == "csv":
        rows = ["id,name,amount,date"]
        for i in range(rng.randint(100, 5000)):
            rows.append(f"{i},{rng.choice(WORDS)},{rng.uniform(-1000, 100000):.2f},2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        return "csv", "text/csv", ("\n".join(rows) + "\n").encode()
    if kind == "big":
        return "bin", "application/octet-stream", rng.randbytes(rng.randint(3_000_000, 5_000_000))
    return "bin", "application/octet-stream", rng.randbytes(rng.randint(20_000, 600_000))


# ---------------------------------------------------------------------------
# The builder


class Builder:
    def __init__(self, app, seed, scale):
        self.app = app
        self.rng = random.Random(seed)
        self.text = Text(self.rng)
        self.scale = scale
        self.started = time.time()
        self.transactions = 0
        self.undone = []
        self.users = {}  # id -> full name
        self.editors = []
        self.reviewers = []
        self.folders = []
        self.items = []  # content objects that still exist, for later activity
        self.images = []
        self.files = []
        self.comments = 0
        self.relations = 0
        self.edits = 0
        self.transitions = 0
        self.events_made = 0
        self.replacements = 0

    # --- helpers -----------------------------------------------------------

    def n(self, base, least=1):
        return max(least, round(base * self.scale))

    def log(self, what):
        print(f"[{time.time() - self.started:7.1f}s] {what} ({self.transactions} transactions)", file=sys.stderr, flush=True)

    def commit(self, note, user=None):
        """Commit with the metadata Zope's publisher records (ZPublisher.utils.recordMetaData):
        the published object's path as the description, and the user as
        'PATH-OF-USER-FOLDER USERID' ('' for the root user folder, 'Plone'
        for the site's)."""
        import transaction

        txn = transaction.get()
        if user is None:
            txn.setUser("admin", "")
        else:
            txn.setUser(user, "Plone")
        txn.note(note)
        transaction.commit()
        self.transactions += 1

    def path(self, obj, suffix=""):
        return "/".join(obj.getPhysicalPath()) + suffix

    def as_user(self, user):
        from plone import api

        return api.env.adopt_user(username=user)

    def pick(self, seq, k=None):
        if k is None:
            return self.rng.choice(seq)
        return self.rng.sample(seq, min(k, len(seq)))

    def live(self, obj):
        """Whether obj is still in the site (not deleted or moved away)."""
        from Acquisition import aq_parent
        try:
            parent = aq_parent(obj)
            return parent is not None and obj.getId() in parent.objectIds()
        except Exception:
            return False

    def refresh(self):
        """Drop objects that deletions, moves or undos took away, re-acquire the rest."""
        from plone import api

        # By UID: a moved object's old wrapper still has the old path.
        def by_uid(objs):
            out = []
            for obj in objs:
                found = api.content.get(UID=obj.UID())
                if found is not None:
                    out.append(found)
            return out
        self.items = by_uid(self.items)
        self.images = by_uid(self.images)
        self.files = by_uid(self.files)
        self.folders = by_uid(self.folders)

    # --- the site -----------------------------------------------------------

    def zope_admin(self):
        from AccessControl.SecurityManagement import newSecurityManager

        app = self.app
        app.acl_users._doAddUser("admin", "admin-" + uuid.uuid4().hex[:12], ["Manager"], [])
        self.commit("/acl_users/manage_users")
        newSecurityManager(None, app.acl_users.getUserById("admin").__of__(app.acl_users))

    def create_site(self):
        from Products.CMFPlone.factory import addPloneSite

        self.site = addPloneSite(
            self.app,
            "Plone",
            title="Example Organisation",
            description="A Plone 6 site built by scripts/plone_site.py",
            distribution_name="classic",
            setup_content=True,
            default_language="en",
            portal_timezone="Europe/Berlin",
        )
        self.commit("/@@plone-addsite")
        self.log("site created")

    def configure(self):
        from plone import api
        from plone.base.utils import get_installer
        from plone.app.discussion.interfaces import IDiscussionSettings

        site = self.site
        get_installer(site, site.REQUEST).install_product("plone.app.discussion")
        self.commit("/Plone/prefs_install_products_form")

        api.portal.set_registry_record("globally_enabled", True, interface=IDiscussionSettings)
        api.portal.set_registry_record("moderation_enabled", False, interface=IDiscussionSettings)
        api.portal.set_registry_record("show_commenter_image", True, interface=IDiscussionSettings)
        self.commit("/Plone/@@discussion-controlpanel")

        for type_id in ("Document", "News Item", "Event"):
            site.portal_types[type_id].allow_discussion = True
        self.commit("/Plone/portal_types/manage_workspace")

        api.portal.set_registry_record("plone.available_timezones", TIMEZONES)
        api.portal.set_registry_record("plone.first_weekday", 0)
        self.commit("/Plone/@@dateandtime-controlpanel")

    def users_and_groups(self):
        from plone import api

        rng = self.rng
        count = max(12, self.n(12))
        for i in range(count):
            first, last = FIRST[i % len(FIRST)], LAST[(i * 5) % len(LAST)]
            userid = f"{first.lower()[:3]}{last.lower()[:3]}{i}".encode("ascii", "ignore").decode()
            userid = "".join(c for c in userid if c.isalnum())
            fullname = f"{first} {last}"
            api.user.create(
                email=f"{userid}@example.org",
                username=userid,
                password=f"Secret-{uuid.uuid4().hex}",
                properties={"fullname": fullname, "location": rng.choice(TIMEZONES).split("/")[-1],
                            "description": self.text.sentence()},
            )
            self.users[userid] = fullname
            self.commit("/Plone/@@new-user")
        ids = list(self.users)
        groups = {
            "editors": ("Editors", ["Contributor", "Editor"], ids[0:6]),
            "marketing": ("Marketing", [], ids[4:8]),
            "staff": ("Staff", [], ids[:]),
            "project-alpha": ("Project Alpha", [], ids[7:11]),
        }
        for gid, (title, roles, members) in groups.items():
            api.group.create(groupname=gid, title=title, description=self.text.sentence(), roles=roles)
            self.commit("/Plone/@@usergroup-groupprefs")
            for m in members:
                api.group.add_user(groupname=gid, username=m)
                self.commit(f"/Plone/@@usergroup-groupmembership")
        # Plone's own groups: two reviewers, a site administrator.
        for m in ids[6:8]:
            api.group.add_user(groupname="Reviewers", username=m)
            self.commit("/Plone/@@usergroup-groupmembership")
        api.group.add_user(groupname="Site Administrators", username=ids[11])
        self.commit("/Plone/@@usergroup-groupmembership")
        self.editors = ids[0:6]
        self.reviewers = ids[6:8] + [ids[11]]
        self.marketing = ids[4:8]
        self.alpha = ids[7:11]
        self.log(f"{len(self.users)} users, {len(groups)} groups")

    def folder_tree(self):
        from plone import api

        rng = self.rng
        site = self.site
        target = self.n(22, least=len(SECTIONS) + 2)
        levels = {0: []}
        for title, fid in SECTIONS:
            with self.as_user(self.reviewers[-1]):
                f = api.content.create(container=site, type="Folder", id=fid, title=title,
                                       description=self.text.sentence())
            self.commit(f"/Plone/++add++Folder")
            levels[0].append(f)
            self.folders.append(f)
        made = len(SECTIONS)
        while made < target:
            depth = rng.choices((0, 1, 2), weights=(5, 4, 2))[0]
            if not levels.get(depth):
                depth = 0
            parent = rng.choice(levels[depth])
            name = rng.choice(SUBFOLDER_NAMES)
            with self.as_user(rng.choice(self.editors)):
                f = api.content.create(container=parent, type="Folder", title=name,
                                       description=self.text.sentence(), safe_id=True)
            self.commit(self.path(parent, "/++add++Folder"))
            levels.setdefault(depth + 1, []).append(f)
            self.folders.append(f)
            made += 1
        # Folders are published by a reviewer, except the intranet.
        for f in self.folders:
            if not self.path(f).startswith("/Plone/intranet"):
                self.transition(f, "publish", self.reviewers[0])
        self.log(f"{len(self.folders)} folders, {max(levels) + 1} levels")

    def local_roles(self):
        from plone import api

        site = self.site
        api.group.grant_roles(groupname="marketing", obj=site["news"], roles=["Contributor", "Editor", "Reviewer"])
        self.commit("/Plone/news/@@sharing")
        api.group.grant_roles(groupname="marketing", obj=site["events"], roles=["Contributor", "Editor"])
        self.commit("/Plone/events/@@sharing")
        intranet = site["intranet"]
        intranet.__ac_local_roles_block__ = True
        intranet.reindexObjectSecurity()
        api.group.grant_roles(groupname="staff", obj=intranet, roles=["Reader"])
        api.group.grant_roles(groupname="editors", obj=intranet, roles=["Contributor", "Editor", "Reader"])
        self.commit("/Plone/intranet/@@sharing")
        api.group.grant_roles(groupname="project-alpha", obj=site["projects"], roles=["Contributor", "Editor", "Reviewer"])
        self.commit("/Plone/projects/@@sharing")
        users = list(self.users)
        for f in self.pick(self.folders[len(SECTIONS):], 4):
            api.user.grant_roles(username=self.pick(users), obj=f, roles=["Editor", "Reviewer"])
            self.commit(self.path(f, "/@@sharing"))

    def portlets(self):
        from plone.portlet.static import static
        from plone.portlets.interfaces import IPortletAssignmentMapping, IPortletManager
        from zope.component import getMultiAdapter, getUtility

        site = self.site
        for context, column, title in (
            (site, "plone.rightcolumn", "Contact"),
            (site["news"], "plone.rightcolumn", "Press contact"),
            (site["intranet"], "plone.leftcolumn", "Staff links"),
        ):
            manager = getUtility(IPortletManager, name=column)
            mapping = getMultiAdapter((context, manager), IPortletAssignmentMapping)
            mapping[title.lower().replace(" ", "-")] = static.Assignment(
                header=title, text=f"<p>{self.text.sentence()}</p>", omit_border=False)
            self.commit(self.path(context, f"/++contextportlets++{column}/+/plone.portlet.static.Static"))

    # --- content -------------------------------------------------------------

    def owner_for(self, container):
        p = self.path(container)
        if p.startswith("/Plone/news") or p.startswith("/Plone/events"):
            return self.pick(self.marketing)
        if p.startswith("/Plone/projects") and self.rng.random() < 0.5:
            return self.pick(self.alpha)
        return self.pick(self.editors)

    def dates(self, obj):
        """Effective and creation dates spread over the last years, as on a site with a past."""
        from DateTime import DateTime

        rng = self.rng
        created = DateTime(2019, 1, 1) + rng.uniform(0, 6 * 365)
        obj.creation_date = created
        if rng.random() < 0.7:
            obj.setEffectiveDate(created + rng.uniform(0, 30))
        if rng.random() < 0.05:
            obj.setExpirationDate(created + rng.uniform(60, 900))
        obj.setSubject(tuple(sorted(set(self.pick(WORDS, self.rng.randint(0, 4))))))

    def create(self, container, type_, user=None, **fields):
        from plone import api

        user = user or self.owner_for(container)
        with self.as_user(user):
            obj = api.content.create(container=container, type=type_, safe_id=True, **fields)
            self.dates(obj)
            obj.reindexObject()
        self.commit(self.path(container, f"/++add++{type_}"), user)
        self.after_create(obj, user)
        return obj

    def after_create(self, obj, user):
        """The workflow steps that commonly follow a creation."""
        from plone import api

        if not api.content.get_state(obj, None):
            return
        r = self.rng.random()
        if r < 0.55:
            self.transition(obj, "publish", self.reviewer_for(obj))
        elif r < 0.75:
            self.transition(obj, "submit", user)
            if self.rng.random() < 0.5:
                self.transition(obj, "publish", self.reviewer_for(obj))
            elif self.rng.random() < 0.5:
                self.transition(obj, "reject", self.reviewer_for(obj))

    def reviewer_for(self, obj):
        p = self.path(obj)
        if p.startswith("/Plone/news") or p.startswith("/Plone/events"):
            return self.pick(self.marketing[2:])
        return self.pick(self.reviewers)

    def transition(self, obj, name, user):
        from plone import api

        with self.as_user(user):
            try:
                api.content.transition(obj=obj, transition=name, comment=self.rng.choice(("", "", self.text.sentence())))
            except api.exc.InvalidParameterError:
                import transaction
                transaction.abort()
                return False
        self.commit(self.path(obj, f"/content_status_modify"), user)
        self.transitions += 1
        return True

    def richtext(self, html):
        from plone.app.textfield.value import RichTextValue

        return RichTextValue(html, "text/html", "text/x-html-safe")

    def add_document(self, container):
        rng = self.rng
        links = [(o.UID(), o.Title()) for o in self.pick(self.items, rng.randint(0, 3))] if self.items and rng.random() < 0.4 else []
        imgs = [o.UID() for o in self.pick(self.images, 1)] if self.images and rng.random() < 0.15 else []
        obj = self.create(container, "Document", title=self.text.title(), description=self.text.sentence(),
                          text=self.richtext(self.text.html(links, imgs, size=rng.uniform(0.5, 3))))
        self.items.append(obj)

    def add_news(self, container):
        from plone.namedfile.file import NamedBlobImage

        rng = self.rng
        fields = dict(title=self.text.title(), description=self.text.sentence(),
                      text=self.richtext(self.text.html(size=rng.uniform(0.5, 2))))
        if rng.random() < 0.4:
            fields["image"] = NamedBlobImage(data=make_image(rng, "JPEG", rng.randint(600, 1400), rng.randint(400, 900)),
                                             filename=f"lead-{rng.randrange(10**6)}.jpg")
            fields["image_caption"] = self.text.sentence()
        self.items.append(self.create(container, "News Item", **fields))

    def add_event(self, container):
        import pytz

        # Every time zone and every kind in turn, so that even a small site has
        # each: 0 and 4 plain, 1 whole-day, 2 recurring, 3 open-ended.
        rng = self.rng
        i = self.events_made
        self.events_made += 1
        tz = pytz.timezone(TIMEZONES[i % len(TIMEZONES)])
        start = datetime(2024, 1, 1, rng.choice((8, 9, 10, 14, 18)), rng.choice((0, 30))) + timedelta(days=rng.randint(0, 900))
        end = start + timedelta(hours=rng.choice((1, 2, 3, 8, 30, 52)))
        fields = dict(title=self.text.title(), description=self.text.sentence(),
                      start=tz.localize(start), end=tz.localize(end),
                      location=rng.choice(("Berlin", "New York", "Tokyo", "Online", "Room 4.12", "São Paulo")),
                      contact_name=self.pick(list(self.users.values())),
                      contact_email=f"{self.pick(list(self.users))}@example.org",
                      event_url=f"https://example.org/events/{rng.randrange(10**5)}",
                      attendees=tuple(self.pick(list(self.users.values()), rng.randint(0, 4))),
                      text=self.richtext(self.text.html(size=rng.uniform(0.3, 1.5))))
        kind = i % 5
        if kind == 1 or (kind == 2 and rng.random() < 0.3):
            fields["whole_day"] = True
        elif kind == 3:
            fields["open_end"] = True
        if kind == 2:
            exdate = (start + timedelta(days=7)).strftime("%Y%m%dT%H%M%S")
            fields["recurrence"] = RECURRENCES[(i // 5) % len(RECURRENCES)].format(exdate=exdate)
        self.items.append(self.create(container, "Event", **fields))

    def add_image(self, container):
        from plone.namedfile.file import NamedBlobImage

        rng = self.rng
        if rng.random() < 0.6:
            fmt, ext = "JPEG", "jpg"
            w, h = rng.randint(800, 2400), rng.randint(600, 1600)
        else:
            fmt, ext = "PNG", "png"
            w, h = rng.randint(200, 1000), rng.randint(150, 800)
        title = self.text.title()
        image = NamedBlobImage(data=make_image(rng, fmt, w, h), filename=f"{title.split()[0].lower()}-{rng.randrange(10**4)}.{ext}")
        obj = self.create(container, "Image", title=title, description=self.text.sentence(), image=image)
        self.images.append(obj)

    def add_file(self, container, kind=None):
        from plone.namedfile.file import NamedBlobFile

        rng = self.rng
        kind = kind or rng.choice(("pdf", "pdf", "zip", "csv", "bin"))
        ext, ctype, data = make_file(rng, kind, self.text)
        title = self.text.title()
        f = NamedBlobFile(data=data, filename=f"{title.split()[0].lower()}-{rng.randrange(10**4)}.{ext}", contentType=ctype)
        obj = self.create(container, "File", title=title, description=self.text.sentence(), file=f)
        self.files.append(obj)

    def add_link(self, container):
        rng = self.rng
        url = rng.choice((f"https://example.org/{rng.choice(WORDS)}", "https://www.plone.org",
                          "https://zodb.org/en/latest/", "mailto:info@example.org"))
        self.items.append(self.create(container, "Link", title=self.text.title(), remoteUrl=url))

    def add_collection(self, container, portal_types):
        rng = self.rng
        query = [
            {"i": "portal_type", "o": "plone.app.querystring.operation.selection.any", "v": portal_types},
            {"i": "review_state", "o": "plone.app.querystring.operation.selection.any", "v": ["published"]},
        ]
        if rng.random() < 0.5:
            query.append({"i": "path", "o": "plone.app.querystring.operation.string.relativePath", "v": ".."})
        if rng.random() < 0.5:
            query.append({"i": "Subject", "o": "plone.app.querystring.operation.selection.any", "v": self.pick(WORDS, 2)})
        self.items.append(self.create(
            container, "Collection", title=f"All {' and '.join(portal_types)}", query=query,
            sort_on=rng.choice(("effective", "modified", "sortable_title")), sort_reversed=rng.random() < 0.5,
            limit=rng.choice((10, 20, 100, 1000)), item_count=rng.choice((10, 30)),
            customViewFields=["Title", "Creator", "Type", "ModificationDate"]))

    def container_for(self, type_):
        site = self.site
        rng = self.rng
        if type_ == "News Item" and rng.random() < 0.6:
            return site["news"]
        if type_ == "Event" and rng.random() < 0.6:
            return site["events"]
        if type_ in ("Image", "File") and rng.random() < 0.5:
            media = [f for f in self.folders if self.path(f).startswith("/Plone/media")]
            return self.pick(media)
        return self.pick(self.folders)

    def content(self):
        plan = (["Document"] * self.n(70) + ["News Item"] * self.n(24) + ["Event"] * self.n(18)
                + ["Image"] * self.n(24) + ["File"] * self.n(9) + ["Link"] * self.n(5))
        self.rng.shuffle(plan)
        adders = {"Document": self.add_document, "News Item": self.add_news, "Event": self.add_event,
                  "Image": self.add_image, "File": self.add_file, "Link": self.add_link}
        for i, type_ in enumerate(plan):
            adders[type_](self.container_for(type_))
            if i % 100 == 99:
                self.log(f"{i + 1}/{len(plan)} items")
        self.add_file(self.pick(self.folders), kind="big")
        site = self.site
        self.add_collection(site["news"], ["News Item"])
        self.add_collection(site["events"], ["Event"])
        for _ in range(self.n(2)):
            self.add_collection(self.pick(self.folders), self.pick(["Document", "News Item", "Event", "File", "Image"], 2))
        self.log(f"{len(plan) + 1 + 2 + self.n(2)} items created")

    # --- activity --------------------------------------------------------

    def edit(self, obj):
        """An edit through the edit form, with a change note: CMFEditions saves a version."""
        from zope.annotation.interfaces import IAnnotations
        from zope.event import notify
        from zope.lifecycleevent import ObjectModifiedEvent

        rng = self.rng
        user = rng.choice([obj.Creator()] + self.editors)
        note = rng.choice(CHANGE_NOTES)
        request = self.site.REQUEST
        with self.as_user(user):
            r = rng.random()
            if r < 0.3:
                obj.title = self.text.title()
            elif r < 0.4:
                obj.description = self.text.sentence()
            if getattr(obj, "text", None) is not None or obj.portal_type == "Document":
                links = [(o.UID(), o.Title()) for o in self.pick(self.items, rng.randint(0, 3))] if rng.random() < 0.5 else []
                obj.text = self.richtext(self.text.html(links, size=rng.uniform(0.5, 3)))
            IAnnotations(request)["plone.app.versioningbehavior-changeNote"] = note
            try:
                notify(ObjectModifiedEvent(obj))
            finally:
                del IAnnotations(request)["plone.app.versioningbehavior-changeNote"]
        self.commit(self.path(obj, "/@@edit"), user)
        self.edits += 1

    def replace_blob(self, obj):
        """A new upload over an Image or File.

        Every other one as the edit form does it, a new NamedBlob* with a new
        Blob; the others write the new bytes into the existing one (as
        scripts and add-ons do), so that one blob gets several revisions.
        """
        from plone.namedfile.file import NamedBlobFile, NamedBlobImage
        from zope.event import notify
        from zope.lifecycleevent import ObjectModifiedEvent

        rng = self.rng
        user = rng.choice(self.editors)
        in_place = self.replacements % 2 == 0
        self.replacements += 1
        with self.as_user(user):
            if obj.portal_type == "Image":
                old = obj.image
                fmt = "JPEG" if old.contentType == "image/jpeg" else "PNG"
                w, h = old.getImageSize()
                data = make_image(rng, fmt, max(50, w + rng.randint(-100, 100)), max(50, h + rng.randint(-100, 100)))
                if in_place:
                    old.data = data
                else:
                    obj.image = NamedBlobImage(data=data, filename=old.filename)
            else:
                old = obj.file
                kind = {"application/pdf": "pdf", "application/zip": "zip", "text/csv": "csv"}.get(old.contentType, "bin")
                _, ctype, data = make_file(rng, kind, self.text)
                if in_place:
                    old.data = data
                    old.contentType = ctype
                else:
                    obj.file = NamedBlobFile(data=data, filename=old.filename, contentType=ctype)
            notify(ObjectModifiedEvent(obj))
        self.commit(self.path(obj, "/@@edit"), user)

    def view_scales(self, obj):
        """A visit that makes and stores image scales (annotations holding blobs)."""
        rng = self.rng
        images = obj.restrictedTraverse("@@images")
        for scale in self.pick(["preview", "mini", "thumb", "tile", "icon", "large", "teaser"], rng.randint(1, 4)):
            images.scale("image", scale=scale)
        self.commit(self.path(obj, "/@@images/image/preview"), rng.choice(list(self.users)))

    def comment(self, obj, replies):
        from plone.app.discussion.interfaces import IConversation
        from zope.component import createObject

        rng = self.rng
        user = rng.choice(list(self.users))
        conversation = IConversation(obj)
        with self.as_user(user):
            c = createObject("plone.Comment")
            c.text = "\n\n".join(self.text.paragraph() for _ in range(rng.randint(1, 3)))
            c.author_username = user
            c.author_name = self.users[user]
            c.author_email = f"{user}@example.org"
            c.user_notification = rng.random() < 0.3
            if replies and rng.random() < 0.5:
                c.in_reply_to = rng.choice(replies)
            cid = conversation.addComment(c)
        self.commit(self.path(obj, "/@@view"), user)
        replies.append(cid)
        self.comments += 1

    def relate(self, source, targets):
        """Related items chosen in the edit form: the field set, the relation catalog updated on modification."""
        from z3c.relationfield import RelationValue
        from zope.component import getUtility
        from zope.event import notify
        from zope.intid.interfaces import IIntIds
        from zope.lifecycleevent import ObjectModifiedEvent

        intids = getUtility(IIntIds)
        user = self.rng.choice(self.editors)
        with self.as_user(user):
            related = list(getattr(source, "relatedItems", None) or [])
            have = {r.to_id for r in related}
            for target in targets:
                to_id = intids.getId(target)
                if to_id not in have:
                    related.append(RelationValue(to_id))
                    have.add(to_id)
                    self.relations += 1
            source.relatedItems = related
            notify(ObjectModifiedEvent(source))
        self.commit(self.path(source, "/@@edit"), user)

    def activity(self):
        """Edits, versions, comments, relations, transitions and blob revisions, in a random order."""
        rng = self.rng
        versioned = [o for o in self.items if o.portal_type in ("Document", "News Item", "Event")]
        discussable = [o for o in self.items if o.portal_type in ("Document", "News Item")]
        workflowed = [o for o in self.items if o.portal_type not in ("Image", "File")]
        tasks = []
        for obj in self.pick(versioned, self.n(25)):
            tasks += [("edit", obj)] * rng.randint(1, 5)
        for obj in self.pick(discussable, self.n(18)):
            tasks += [("comment", obj)] * rng.randint(1, 6)
        for obj in self.pick(versioned, self.n(15)):
            tasks.append(("relate", obj))
        for obj in self.pick(workflowed, self.n(25)):
            tasks.append(("cycle", obj))
        for obj in self.pick(self.images, self.n(6)):
            tasks += [("replace", obj)] * rng.randint(1, 3)
        for obj in self.pick(self.files, self.n(3)):
            tasks += [("replace", obj)] * rng.randint(1, 2)
        for obj in self.pick(self.images, self.n(14)):
            tasks.append(("scales", obj))
        rng.shuffle(tasks)
        threads = {}
        undo_at = {len(tasks) // 3: self.undo_edit, len(tasks) // 2: self.undo_creation,
                   (2 * len(tasks)) // 3: self.undo_transition}
        for i, (task, obj) in enumerate(tasks):
            if i in undo_at:
                undo_at[i]()
            if task == "edit":
                self.edit(obj)
            elif task == "comment":
                self.comment(obj, threads.setdefault(obj.UID(), []))
            elif task == "relate":
                self.relate(obj, [t for t in self.pick(versioned, rng.randint(1, 4)) if t is not obj])
            elif task == "cycle":
                self.workflow_cycle(obj)
            elif task == "replace":
                self.replace_blob(obj)
            elif task == "scales":
                self.view_scales(obj)
            if i % 200 == 199:
                self.log(f"{i + 1}/{len(tasks)} activities")
        self.log(f"{len(tasks)} activities: {self.edits} edits, {self.comments} comments, "
                 f"{self.relations} relations, {self.transitions} transitions")

    def workflow_cycle(self, obj):
        from plone import api

        state = api.content.get_state(obj)
        owner = obj.Creator()
        if state == "published":
            self.transition(obj, "retract", owner)
            if self.rng.random() < 0.5:
                self.transition(obj, "publish", self.reviewer_for(obj))
        elif state == "pending":
            self.transition(obj, self.rng.choice(("publish", "reject")), self.reviewer_for(obj))
        else:
            self.transition(obj, "submit", owner)
            self.transition(obj, "publish", self.reviewer_for(obj))

    # --- undo ----------------------------------------------------------------

    def undo_last(self, user=None):
        """Undo the last transaction as Zope's manage_undo_transactions does."""
        import transaction

        db = self.app._p_jar.db()
        last = db.undoLog(0, 1)[0]
        txn = transaction.get()
        txn.note(f"Undo {last['description']}")
        db.undoMultiple([last["id"]])
        if user is None:
            txn.setUser("admin", "")
        else:
            txn.setUser(user, "Plone")
        transaction.commit()
        self.transactions += 1
        self.undone.append(last["description"])
        self.app._p_jar.sync()

    def undo_edit(self):
        obj = self.pick([o for o in self.items if o.portal_type == "Document"])
        user = self.rng.choice(self.editors)
        with self.as_user(user):
            obj.title = "Oops: " + obj.title
            obj.text = self.richtext("<p>Accidentally replaced.</p>")
            obj.reindexObject()
        self.commit(self.path(obj, "/@@edit"), user)
        self.undo_last()

    def undo_creation(self):
        from plone import api

        folder = self.pick(self.folders)
        user = self.rng.choice(self.editors)
        with self.as_user(user):
            api.content.create(container=folder, type="Document", title="Created by mistake",
                               text=self.richtext(self.text.html()))
        self.commit(self.path(folder, "/++add++Document"), user)
        self.undo_last()

    def undo_transition(self):
        from plone import api

        candidates = [o for o in self.items if o.portal_type == "Document" and api.content.get_state(o) == "published"]
        if not candidates:
            return
        obj = self.pick(candidates)
        if self.transition(obj, "retract", obj.Creator()):
            self.undo_last(obj.Creator())

    # --- reorganisation ------------------------------------------------------

    def reorganise(self):
        """Moves, renames, copies and deletions (with their redirects), then a last settings change."""
        from plone import api

        rng = self.rng
        self.refresh()
        leaves = [o for o in self.items if o.portal_type not in ("Collection",)]
        for obj in self.pick(leaves, self.n(4)):
            target = self.pick(self.folders)
            if not self.live(obj) or target is obj.aq_parent:
                continue
            api.content.move(source=obj, target=target, safe_id=True)
            self.commit(self.path(target, "/folder_paste"))
        self.refresh()
        for obj in self.pick(self.items, self.n(3)):
            api.content.rename(obj=obj, new_id=obj.getId() + "-" + rng.choice(("old", "2024", "draft", "v2")), safe_id=True)
            self.commit(self.path(obj, "/folder_rename"))
        self.refresh()
        for obj in self.pick(self.items, self.n(2)):
            copy = api.content.copy(source=obj, target=self.pick(self.folders), safe_id=True)
            self.items.append(copy)
            self.commit(self.path(copy.aq_parent, "/folder_paste"))
        self.refresh()
        # Deletions: single items, and one whole folder with what it holds.
        for obj in self.pick(self.items, self.n(5)):
            if not self.live(obj):
                continue
            parent = obj.aq_parent
            api.content.delete(obj=obj, check_linkintegrity=False)
            self.commit(self.path(parent, "/folder_delete"))
            self.refresh()
        leaf_folders = [f for f in self.folders
                        if len(f.getPhysicalPath()) >= 5 and not f.objectIds(["Folder"])]
        if leaf_folders:
            folder = self.pick(leaf_folders)
            parent = folder.aq_parent
            api.content.delete(obj=folder, check_linkintegrity=False)
            self.commit(self.path(parent, "/folder_delete"))
        self.refresh()
        api.portal.set_registry_record("plone.site_title", "Example Organisation (new)")
        self.commit("/Plone/@@site-controlpanel")
        self.log("moves, renames, copies and deletions")

    # --- figures -------------------------------------------------------------

    def site_figures(self):
        from plone import api
        from zc.relation.interfaces import ICatalog
        from zope.component import getUtility

        catalog = self.site.portal_catalog
        types = dict(catalog.Indexes["portal_type"].uniqueValues(withLengths=True))
        relations = {}
        for rel in getUtility(ICatalog).findRelations({}):
            relations[rel.from_attribute] = relations.get(rel.from_attribute, 0) + 1
        repo = self.site.portal_repository
        versions = histories = 0
        for brain in catalog.unrestrictedSearchResults(portal_type=["Document", "News Item", "Event"]):
            obj = brain._unrestrictedGetObject()
            if getattr(obj, "version_id", None) is None:
                continue
            meta = repo.getHistoryMetadata(obj)
            if meta:
                histories += 1
                versions += meta.getLength(countPurged=False)
        return {
            "types": dict(sorted(types.items())),
            "users": len(api.user.get_users()),
            "groups": len(api.group.get_groups()),
            "relations": dict(sorted(relations.items())),
            "histories": histories,
            "versions": versions,
        }


def storage_figures(path, blob_dir):
    """Transactions, record revisions, oids and undo traces of a FileStorage, and its blob files."""
    from ZODB.FileStorage import FileStorage

    fs = FileStorage(path, read_only=True)
    txns = records = undos = creations_undone = 0
    oids = set()
    try:
        for txn in fs.iterator():
            txns += 1
            if txn.description.startswith(b"Undo "):
                undos += 1
            for rec in txn:
                records += 1
                oids.add(rec.oid)
                if rec.data is None:
                    creations_undone += 1
    finally:
        fs.close()
    blobs = size = revised = 0
    for root, _dirs, files in os.walk(blob_dir):
        revisions = [name for name in files if name.endswith(".blob")]
        blobs += len(revisions)
        revised += len(revisions) > 1
        size += sum(os.path.getsize(os.path.join(root, name)) for name in revisions)
    return {
        "transactions": txns,
        "records": records,
        "oids": len(oids),
        "undo transactions": undos,
        "records whose creation was undone": creations_undone,
        "Data.fs bytes": os.path.getsize(path),
        "blob files": blobs,
        "blob bytes": size,
        "blobs with several revisions": revised,
    }


def pack_copy(work):
    """packed/Data.fs and packed/blobs/: a copy of the site packed to now."""
    from ZODB.FileStorage import FileStorage
    from ZODB.serialize import referencesf

    packed = os.path.join(work, "packed")
    shutil.rmtree(packed, ignore_errors=True)
    os.makedirs(packed)
    shutil.copyfile(os.path.join(work, "Data.fs"), os.path.join(packed, "Data.fs"))
    shutil.copytree(os.path.join(work, "blobs"), os.path.join(packed, "blobs"))
    fs = FileStorage(os.path.join(packed, "Data.fs"), blob_dir=os.path.join(packed, "blobs"), pack_keep_old=False)
    try:
        fs.pack(time.time(), referencesf)
    finally:
        fs.close()
    for leftover in ("Data.fs.old", "Data.fs.lock", "Data.fs.tmp"):
        try:
            os.unlink(os.path.join(packed, leftover))
        except FileNotFoundError:
            pass
    return packed


def seed_uuids(seed):
    """uuid.uuid4 from a seeded generator: Plone's UIDs the same on every build."""
    rng = random.Random(f"uuid-{seed}")

    def uuid4():
        return uuid.UUID(int=rng.getrandbits(128), version=4)

    uuid.uuid4 = uuid4


def main(argv=None):
    args = parse_args(argv)
    started = time.time()
    work = os.path.abspath(args.work_dir)
    os.makedirs(work, exist_ok=True)
    for name in ("Data.fs", "Data.fs.index", "Data.fs.lock", "Data.fs.tmp"):
        if os.path.exists(os.path.join(work, name)):
            sys.exit(f"plone_site.py: {work}/{name} exists; use an empty directory")
    os.makedirs(os.path.join(work, "blobs"), exist_ok=True)
    # Before Zope and Plone are imported, so every use of these sees the seeds.
    seed_uuids(args.seed)
    random.seed(args.seed)
    quiet_logs()

    conf = write_config(work)
    app = start_zope(conf)
    b = Builder(app, args.seed, args.scale)
    b.log("Zope started")
    b.zope_admin()
    b.create_site()
    b.configure()
    b.users_and_groups()
    b.folder_tree()
    b.local_roles()
    b.portlets()
    b.content()
    b.activity()
    b.reorganise()
    figures = b.site_figures()
    figures["undone"] = b.undone

    import transaction
    import Zope2

    transaction.abort()
    app._p_jar.close()
    Zope2.DB.close()
    built = time.time() - started

    data_fs = os.path.join(work, "Data.fs")
    figures.update(storage_figures(data_fs, os.path.join(work, "blobs")))
    if args.pack:
        packed = pack_copy(work)
        figures["packed"] = storage_figures(os.path.join(packed, "Data.fs"), os.path.join(packed, "blobs"))
    report(figures, args, built, time.time() - started)


def report(f, args, built, total):
    print(f"Plone site (seed {args.seed}, scale {args.scale}): built in {built:.0f} s, {total:.0f} s in all")
    print(f"  Data.fs: {f['Data.fs bytes']:,} bytes, {f['records']:,} record revisions in "
          f"{f['transactions']:,} transactions, {f['oids']:,} distinct oids")
    print(f"  blobs: {f['blob files']:,} files, {f['blob bytes']:,} bytes; "
          f"{f['blobs with several revisions']} blobs have more than one revision")
    print(f"  undo: {f['undo transactions']} undo transactions ({'; '.join(f['undone'])}), "
          f"{f['records whose creation was undone']} records whose creation was undone")
    print(f"  users: {f['users']}, groups: {f['groups']}")
    print(f"  CMFEditions: {f['versions']} versions of {f['histories']} items")
    print(f"  relations: " + ", ".join(f"{k} {v}" for k, v in f["relations"].items()))
    print("  catalog: " + ", ".join(f"{k} {v}" for k, v in f["types"].items()))
    if "packed" in f:
        p = f["packed"]
        print(f"  packed copy: {p['Data.fs bytes']:,} bytes, {p['records']:,} records in {p['transactions']:,} "
              f"transactions, {p['oids']:,} oids; {p['blob files']:,} blob files, {p['blob bytes']:,} bytes")


if __name__ == "__main__":
    main()
