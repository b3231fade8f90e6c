"""Redis from the machine's packages, in-memory only, on a free loopback port."""

from __future__ import annotations

import shutil

from .base import LOOPBACK, LocalServer, ServerError, free_port, port_open, wait_until


class RedisServer(LocalServer):
    """A ``redis-server`` with persistence off (tests) or AOF on (``durable=True``)."""

    name = "redis"

    def __init__(self, *, durable: bool = False) -> None:
        super().__init__()
        self.port = free_port()
        self.durable = durable

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def _start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServerError("redis-server not found: install the Debian package "
                              "'redis-server' (make setup does)")
        argv = [binary, "--port", str(self.port), "--bind", LOOPBACK, "--dir", str(self.workdir),
                "--save", "", "--appendonly", "yes" if self.durable else "no",
                "--daemonize", "no", "--protected-mode", "yes"]
        self._spawn(argv)
        wait_until(lambda: port_open(self.port), timeout=30, what="redis", alive=self._alive)
