"""A throwaway PostgreSQL on a private unix socket, for the jsonb round trips of tests and benchmarks.

    server = PgServer.start()      # raises PgServerError with the reason
    server.dsn                     # "dbname=codec user=tester host=... port=..."
    server.stop()

The server listens on no TCP address (listen_addresses=''), only on a socket
in its own temporary directory, with fsync off.  As root it runs as the
``postgres`` user (``runuser``), since PostgreSQL refuses to run as root.
Binaries come from ``pg_config --bindir`` or /usr/lib/postgresql/*/bin.
Also usable from a shell: ``python tests/pgserver.py`` starts one, prints
the DSN and stops it on Enter.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional

DATABASE = "codec"
USER = "tester"


class PgServerError(RuntimeError):
    """PostgreSQL could not be found or started; the message says why."""


def _version_key(path: str) -> List[int]:
    return [int(n) for n in re.findall(r"\d+", path)]


def find_bindir() -> Path:
    """The directory with initdb, pg_ctl and postgres; PgServerError if there is none."""
    candidates = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout
            candidates.append(out.strip())
        except (OSError, subprocess.CalledProcessError):
            pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    candidates += [os.path.dirname(p) for p in filter(None, [shutil.which("initdb")])]
    for directory in candidates:
        if all(os.access(os.path.join(directory, tool), os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(directory)
    raise PgServerError(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found via pg_config --bindir, "
        "/usr/lib/postgresql/*/bin or PATH; on Debian: apt-get install postgresql"
    )


def free_port() -> int:
    # The server has no TCP listener; the port only names its socket file,
    # but a free one keeps it clear of any other server's name.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self, root: Path, bindir: Path, port: int, as_user: Optional[str]) -> None:
        self.root = root
        self.bindir = bindir
        self.port = port
        self.as_user = as_user
        self.socket_dir = root / "sock"
        self.data_dir = root / "data"
        self.log = root / "server.log"
        self.dsn = f"dbname={DATABASE} user={USER} host={self.socket_dir} port={port}"

    @classmethod
    def start(cls, port: Optional[int] = None) -> "PgServer":
        """Initialise, start and create the database; PgServerError (server log included) on failure."""
        bindir = find_bindir()
        as_user = None
        if os.name == "posix" and os.geteuid() == 0:
            import pwd  # POSIX only: importing this module works on Windows too

            as_user = "postgres"
            try:
                pw = pwd.getpwnam(as_user)
            except KeyError:
                raise PgServerError("running as root, and there is no 'postgres' user to run PostgreSQL as") from None
            if not shutil.which("runuser"):
                raise PgServerError("running as root, and runuser (util-linux) is not installed")
        # Under /tmp rather than pytest's tmp_path: that one is private to
        # root (0700) and a unix socket path must stay short (~100 bytes).
        base = "/tmp" if os.path.isdir("/tmp") else None
        root = Path(tempfile.mkdtemp(prefix="zjc-pg-", dir=base))
        if as_user:
            os.chown(root, pw.pw_uid, pw.pw_gid)
        server = cls(root, bindir, port or free_port(), as_user)
        try:
            server._start()
        except BaseException:
            server.stop()
            raise
        return server

    def _run(self, *args: str, as_server: bool = True) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if as_server and self.as_user:
            cmd = ["runuser", "-u", self.as_user, "--", *cmd]
        # Not under the sanitizer runtime the sanitizer suite preloads (scripts/asan-tests): PostgreSQL is
        # not what it checks, and does not start with it.
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.root, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PgServerError(f"{args[0]} failed: {exc}{self._log_tail()}") from None
        if proc.returncode:
            output = (proc.stdout + proc.stderr).strip()[-2000:]
            raise PgServerError(f"{args[0]} exited with {proc.returncode}: {output}{self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return "\nserver log:\n" + self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _start(self) -> None:
        self.socket_dir.mkdir()
        if self.as_user:
            import pwd

            pw = pwd.getpwnam(self.as_user)
            os.chown(self.socket_dir, pw.pw_uid, pw.pw_gid)
        self._run(
            "initdb", "-D", str(self.data_dir), "-U", USER, "--auth=trust",
            "--encoding=UTF8", "--no-locale", "--no-sync",
        )
        options = (
            f"-c listen_addresses='' -p {self.port} -k {self.socket_dir} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start")
        self._run("createdb", "-h", str(self.socket_dir), "-p", str(self.port), "-U", USER, DATABASE, as_server=False)

    def stop(self) -> None:
        """Stop the server (if it runs) and remove its directory."""
        if (self.data_dir / "postmaster.pid").exists():
            try:
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
            except PgServerError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


if __name__ == "__main__":
    server = PgServer.start()
    print(server.dsn)
    try:
        input("PostgreSQL is running; press Enter to stop it. ")
    finally:
        server.stop()
