"""The harness's own servers (never the shared ones): they get stopped and restarted."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from compose.launcher import RedisServer
from compose.launcher.base import port_open, wait_until
from compose.launcher.jars import resolve_jars, server_java
from compose.launcher.opensearch import OpenSearchServer, _compiled_main
from compose.launcher.postgres import PostgresServer

# Large transactions are streamed to the capture while in progress (protocol 2) once
# they exceed this much memory: the chaos run exercises that path too.
POSTGRES_SETTINGS = {"logical_decoding_work_mem": "4MB", "max_slot_wal_keep_size": "-1"}


class RestartableOpenSearch(OpenSearchServer):
    """An OpenSearch node that ``stop_process`` takes down and ``start_again`` brings back
    on the same port with the same data directory (its documents survive)."""

    def stop_process(self) -> None:
        """SIGTERM the JVM (it closes the node cleanly) and wait until the port is free."""
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self._procs.clear()
        wait_until(lambda: not port_open(self.port), timeout=30, what="opensearch stop")

    def start_again(self) -> None:
        """Start the node again over the data ``stop_process`` left."""
        home = self.workdir / "home"
        jars = resolve_jars("opensearch")
        classpath = os.pathsep.join([str(_compiled_main(jars)), *map(str, jars)])
        self._spawn([
            *server_java(), "-Xms512m", f"-Xmx{self._heap}", "-Djava.awt.headless=true",
            "-Dfile.encoding=UTF-8", f"-Djava.io.tmpdir={self.workdir / 'tmp'}", "-cp",
            classpath, "DistributaryOpenSearch", "-basePath", str(home), "-numOfNode", "1",
            "-clusterName", "distributary", "-baseHttpPort", str(self.port - 1),
        ])
        wait_until(self._healthy, timeout=self._start_timeout, what=f"opensearch on {self.url}",
                   alive=self._alive, interval=0.25)


class ChaosServers:
    """PostgreSQL (fsync on), Redis (AOF on) and OpenSearch, all the harness's own."""

    def __init__(self) -> None:
        self.postgres = PostgresServer(durable=True, settings=POSTGRES_SETTINGS)
        self.redis = RedisServer(durable=True)
        self.opensearch = RestartableOpenSearch(heap="512m")

    def start(self) -> None:
        """Start all three (stopping what started when one fails)."""
        try:
            self.postgres.start()
            self.redis.start()
            self.opensearch.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop all three and remove their work directories."""
        for server in (self.opensearch, self.redis, self.postgres):
            with contextlib.suppress(Exception):
                server.stop()

    @property
    def workdirs(self) -> list[Path]:
        return [self.postgres.workdir, self.redis.workdir, self.opensearch.workdir]
