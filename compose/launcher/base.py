"""Shared machinery for the local server launcher: free ports, caches, process lifetime.

Every server the launcher starts runs in its own temporary directory on a free loopback
port, in its own process group, and is stopped (the whole group) by ``stop()`` — also when
start-up fails half-way, and from ``atexit`` when the caller forgot.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
_REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_CACHE = Path("/var/cache/distributary")
"""The machine-wide default of ``cache_dir()``, shared by every clone of the repository."""


class ServerError(RuntimeError):
    """A local server could not be started or did not become ready."""


_LOWEST_PORT = 10_000
_PICK = random.SystemRandom()  # a test seeding ``random`` must not make two processes agree


def free_port() -> int:
    """Return a TCP port on the loopback address that nothing listens on right now, and
    that no other caller of this function on the machine was given in the last minutes.

    Picked at random below the kernel's ephemeral range when there is room: a server
    binds its port seconds after it was picked (a JVM starting, ``initdb``), and a port
    of that range may meanwhile be handed to any process's outgoing connection or
    ``bind(0)`` (the tests beside it connect all the time). A pick is reserved (a file in
    ``PORT_RESERVATIONS``) so that two picks — in one process, such as a cluster's twelve
    ports, or in two test streams side by side — never name one port before it is bound."""
    low = _ephemeral_low()
    if low - _LOWEST_PORT >= 1_000:
        for _ in range(200):
            port = _PICK.randrange(_LOWEST_PORT, low)
            if _bindable(port) and _reserve(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        chosen: int = sock.getsockname()[1]
        return chosen


PORT_RESERVATIONS = Path(tempfile.gettempdir()) / "distributary-ports"
"""One empty file per port ``free_port`` handed out, named by the port, shared by every
process of the machine; a reservation lapses ``_RESERVATION_SECONDS`` after it was made."""
_RESERVATION_SECONDS = 600.0


def _bindable(port: int) -> bool:
    """True when nothing on the loopback address holds ``port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def _reserve(port: int) -> bool:
    """Claim ``port`` for this caller; False when another caller holds a live claim."""
    with contextlib.suppress(FileExistsError):
        PORT_RESERVATIONS.mkdir(mode=0o1777, exist_ok=True)
    path = PORT_RESERVATIONS / str(port)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        return True
    except FileExistsError:
        pass
    except OSError:
        return True  # no shared folder to claim in: the bind check alone decides
    with file_lock(PORT_RESERVATIONS / ".lock"):  # one caller takes over a lapsed claim
        try:
            if time.time() - path.stat().st_mtime < _RESERVATION_SECONDS:
                return False
            os.utime(path)
        except OSError:
            return False
        return True


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (0 when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def cache_dir() -> Path:
    """The folder for downloads (jars, PostgreSQL builds), kept between runs and clones.

    ``DISTRIBUTARY_CACHE`` names it; else the machine-wide ``/var/cache/distributary`` when
    this user may write there (root may), else the git-ignored ``<repo>/.cache``. It is
    made world-readable: the PostgreSQL builds in it run as ``postgres`` (a cache under
    root's mode-700 home could not be read by that user).
    """
    configured = os.environ.get("DISTRIBUTARY_CACHE")
    if configured:
        return _readable_dir(Path(configured))
    with contextlib.suppress(OSError):
        return _readable_dir(SHARED_CACHE, require_writable=True)
    return _readable_dir(_REPO_ROOT / ".cache")


def _readable_dir(path: Path, *, require_writable: bool = False) -> Path:
    """``path``, created if missing; readable and searchable by all when this user owns it."""
    path.mkdir(parents=True, exist_ok=True)
    status = path.stat()
    if status.st_uid == os.geteuid() and status.st_mode & 0o555 != 0o555:
        path.chmod(status.st_mode & 0o7777 | 0o555)  # a umask may have taken those bits
    if require_writable and not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"{path}: not writable by this user")
    return path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` across processes (the file is made if missing),
    e.g. so that parallel runs download or unpack a thing into ``cache_dir()`` only once.
    Its folder is made readable by all, like ``cache_dir()``."""
    _readable_dir(path.parent)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wait_until(ready: Callable[[], bool], *, timeout: float, what: str,
               alive: Callable[[], bool] = lambda: True, interval: float = 0.1) -> None:
    """Poll ``ready`` until it returns True; raise ServerError on timeout or early death."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise ServerError(f"{what}: the process exited during start-up")
        with contextlib.suppress(OSError):
            if ready():
                return
        time.sleep(interval)
    raise ServerError(f"{what}: not ready after {timeout:.0f} s")


def port_open(port: int, host: str = LOOPBACK) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


class LocalServer:
    """Base of every launched server: a work directory, processes, and a clean stop.

    Subclasses implement ``_start`` (spawn with ``_spawn`` and wait until ready) and may
    override ``_stop_gracefully`` (e.g. ``pg_ctl stop``); ``stop`` always kills what is left.
    """

    name = "server"

    def __init__(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix=f"distributary-{self.name}-"))
        self._procs: list[subprocess.Popen[bytes]] = []
        self._started = False

    # -- lifetime ---------------------------------------------------------------
    def start(self) -> Self:
        """Start the server and wait until it answers; on any failure stop what started."""
        atexit.register(self.stop)
        _exit_cleanly_on_sigterm()
        try:
            self._start()
        except BaseException:
            tail = self.log_tail()
            self.stop()
            if tail:
                log.error("%s failed to start; last log lines:\n%s", self.name, tail)
            raise
        self._started = True
        log.info("%s started in %s", self.name, self.workdir)
        return self

    def stop(self) -> None:
        """Stop every process this server started and remove its work directory."""
        with contextlib.suppress(Exception):
            if self._started:
                self._stop_gracefully()
        for proc in self._procs:
            _kill_group(proc)
        self._procs.clear()
        self._started = False
        shutil.rmtree(self.workdir, ignore_errors=True)
        atexit.unregister(self.stop)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- for subclasses -----------------------------------------------------------
    def _start(self) -> None:
        raise NotImplementedError

    def _stop_gracefully(self) -> None:
        """Ask the server to stop; the default is SIGTERM to each process, then a wait."""
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def _spawn(self, argv: Sequence[str], *, user: str | None = None,
               env: dict[str, str] | None = None,
               cwd: Path | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` in a new process group, output appended to ``log_path``."""
        if user is not None:
            argv = ["runuser", "-u", user, "--", *argv]
        with self.log_path.open("ab") as out:
            proc = subprocess.Popen(
                list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env=env, cwd=cwd,
            )
        self._procs.append(proc)
        return proc

    def _alive(self) -> bool:
        return all(proc.poll() is None for proc in self._procs)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _exit_cleanly_on_sigterm() -> None:
    """Make SIGTERM run ``atexit`` (and so stop our servers) unless someone handles it."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_system_exit)


def _raise_system_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def run_checked(argv: Sequence[str], *, what: str, user: str | None = None,
                timeout: float = 300) -> str:
    """Run a short command; raise ServerError with its output when it fails."""
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          check=False)
    if done.returncode != 0:
        raise ServerError(f"{what} failed (exit {done.returncode}): "
                          f"{(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout
