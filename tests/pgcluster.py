"""A private PostgreSQL cluster for tests: initdb in a temp dir, one server on a loopback
port (its unix socket in the same dir), stopped at the end. Debian's `postgresql` package
provides the binaries (`make pg` installs it where missing); tests skip without them.

PostgreSQL refuses to run as root: under root (containers, CI) the cluster runs as the
`postgres` user the package creates."""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def pg_bin_dir() -> Path | None:
    """Where initdb, pg_ctl and postgres are: PATH, else Debian's versioned directory."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return Path(d)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresCluster:
    def __init__(self, dbname: str = "tracefix"):
        self.bin = pg_bin_dir()
        if self.bin is None:
            raise FileNotFoundError("PostgreSQL binaries (initdb, pg_ctl) not found: `make pg` installs Debian's postgresql")
        self.dbname = dbname
        self.dir = Path(tempfile.mkdtemp(prefix="tracefix-pg-"))
        self.port = _free_port()
        self.user = "tracefix"
        self._as: list[str] = []
        if os.geteuid() == 0:  # postgres never runs as root
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise FileNotFoundError("running as root and no 'postgres' user to run PostgreSQL as") from None
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    @property
    def conninfo(self) -> str:
        return f"dbname={self.dbname} host=127.0.0.1 port={self.port} user={self.user}"

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, capture_output=True, timeout=60)

    def start(self) -> "PostgresCluster":
        data = self.dir / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-A", "trust", "-U", self.user, "--no-sync",
                  "-E", "UTF8")
        # fsync off: a test cluster whose loss costs nothing; max_connections for 3 collectors and workers
        opts = (f"-k {self.dir} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(self.dir / "log"), "-w", "start")
        self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, self.dbname)
        return self

    def create_database(self, name: str) -> str:
        """A new empty database in the cluster; its connection string."""
        self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, name)
        return f"dbname={name} host=127.0.0.1 port={self.port} user={self.user}"

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "PostgresCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
