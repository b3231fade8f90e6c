"""Redis from the machine's packages, in-memory only, on a free loopback port."""

from __future__ import annotations

import shutil
from pathlib import Path

from .base import (
    LOOPBACK,
    LocalServer,
    ServerError,
    _kill_group,
    free_port,
    port_open,
    wait_until,
)


class RedisServer(LocalServer):
    """A ``redis-server`` with persistence off (tests) or AOF on (``durable=True``); with
    ``tls=(certificate, key)`` it speaks only TLS on its port (``rediss://``), asking
    clients for no certificate.

    ``stop_process`` and ``start_again`` take it down and bring it back on the same port
    and work directory (with ``durable=True`` it reloads its data), to test outages.
    """

    name = "redis"

    def __init__(self, *, durable: bool = False, password: str | None = None,
                 tls: tuple[Path, Path] | None = None) -> None:
        super().__init__()
        self.port = free_port()
        self.durable = durable
        self.password = password  # requirepass: clients must log in with it
        self.tls = tls

    @property
    def url(self) -> str:
        scheme = "redis" if self.tls is None else "rediss"
        return f"{scheme}://{LOOPBACK}:{self.port}/0"

    def stop_process(self) -> None:
        """Stop ``redis-server`` (SIGTERM: it writes its AOF), keeping port and work dir."""
        self._stop_gracefully()
        for proc in self._procs:
            _kill_group(proc)
        self._procs.clear()
        wait_until(lambda: not port_open(self.port), timeout=10, what="redis stop")

    def start_again(self) -> None:
        """Start ``redis-server`` again on the same port after ``stop_process``."""
        self._start()

    def restart(self) -> None:
        """``stop_process`` then ``start_again``."""
        self.stop_process()
        self.start_again()

    def _start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServerError("redis-server not found: install the Debian package "
                              "'redis-server' (make setup does)")
        ports = ["--port", str(self.port)]
        if self.tls is not None:  # the plain port off
            certificate, key = self.tls
            ports = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file",
                     str(certificate), "--tls-key-file", str(key), "--tls-auth-clients", "no"]
        argv = [binary, *ports, "--bind", LOOPBACK, "--dir", str(self.workdir),
                "--save", "", "--appendonly", "yes" if self.durable else "no",
                "--daemonize", "no", "--protected-mode", "yes"]
        if self.password is not None:
            argv += ["--requirepass", self.password]
        self._spawn(argv)
        wait_until(lambda: port_open(self.port), timeout=30, what="redis", alive=self._alive)
