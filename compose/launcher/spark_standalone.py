"""A Spark standalone cluster from the installed PySpark: one master and N workers, each
its own JVM (``bin/spark-class``) on free loopback ports, in its own process group.

``SPARK_HOME`` is the ``pyspark`` package directory (its ``bin/`` and ``jars/``); the
configuration, logs and every worker's work directory (where executors run) live in the
server's temporary directory. A worker has one core and 1 GiB for executors, so the
default executor (1 GiB) fits on each. Ready once the master's web UI JSON
(``/json/``) lists every worker ``ALIVE``.

``kill_worker`` SIGKILLs a worker's process group — the worker, its executor and that
executor's Python workers vanish at once, as when a machine dies; ``start_worker``
starts it again on the same ports. Three JVMs start in about 10 s on two busy cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from .base import LOOPBACK, LocalServer, ServerError, free_port, port_open, wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_QUICK_JVM = "-XX:TieredStopAtLevel=1"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy


def spark_home() -> Path:
    """The installed PySpark's directory, which holds ``bin/spark-class`` and the jars."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file():
        raise ServerError(f"{home}: no bin/spark-class in the installed PySpark")
    return home


class SparkStandaloneCluster(LocalServer):
    """A master and ``workers`` workers; ``master_url`` is ``spark://127.0.0.1:<port>``."""

    name = "spark-standalone"

    def __init__(self, workers: int = 2, *, cores: int = 1, memory: str = "1g",
                 start_timeout: float = 120.0) -> None:
        super().__init__()
        if workers < 1:
            raise ValueError("a Spark standalone cluster needs at least one worker")
        self.port = free_port()
        self.webui_port = free_port()
        self.worker_ports = [free_port() for _ in range(workers)]
        self.worker_webui_ports = [free_port() for _ in range(workers)]
        self._cores = cores
        self._memory = memory
        self._start_timeout = start_timeout
        self._master: subprocess.Popen[bytes] | None = None
        self._workers: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def master_url(self) -> str:
        """What ``--master`` takes."""
        return f"spark://{LOOPBACK}:{self.port}"

    @property
    def webui_url(self) -> str:
        """The master's web UI (``/json/`` is its state as JSON)."""
        return f"http://{LOOPBACK}:{self.webui_port}"

    def state(self) -> dict[str, Any]:
        """The master's view: workers with their ``state``, active and completed apps."""
        with _DIRECT.open(f"{self.webui_url}/json/", timeout=5) as response:
            answer: dict[str, Any] = json.load(response)
        return answer

    def alive_workers(self) -> list[int]:
        """The numbers of the workers the master lists ``ALIVE``."""
        ports = {worker.get("port") for worker in self.state().get("workers", [])
                 if worker.get("state") == "ALIVE"}
        return [number for number, port in enumerate(self.worker_ports) if port in ports]

    def running_workers(self) -> list[int]:
        """The numbers of the workers whose process runs."""
        return sorted(number for number, proc in self._workers.items() if proc.poll() is None)

    def kill_worker(self, number: int) -> None:
        """SIGKILL worker ``number``'s process group: it and its executors vanish."""
        proc = self._workers.pop(number)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        self._procs.remove(proc)

    def start_worker(self, number: int) -> None:
        """Start worker ``number`` again (same ports); return once the master has it."""
        if number in self._workers:
            raise ServerError(f"spark worker {number} is running")
        proc = self._spawn_worker(number)
        wait_until(lambda: number in self.alive_workers(), timeout=self._start_timeout,
                   what=f"spark worker {number}", alive=lambda: proc.poll() is None,
                   interval=0.25)

    def _start(self) -> None:
        (self.workdir / "conf").mkdir()
        (self.workdir / "logs").mkdir()
        self._master = self._spawn(
            [self._spark_class(), MASTER_CLASS, "--host", LOOPBACK, "--port", str(self.port),
             "--webui-port", str(self.webui_port)], env=self._env())
        # the workers start once the master's RPC port listens: a worker that finds no
        # master retries only after 5-15 s
        wait_until(lambda: port_open(self.port), timeout=self._start_timeout,
                   what="spark master", alive=self._alive, interval=0.1)
        for number in range(len(self.worker_ports)):
            self._spawn_worker(number)
        everyone = list(range(len(self.worker_ports)))
        wait_until(lambda: self.alive_workers() == everyone, timeout=self._start_timeout,
                   what="spark workers", alive=self._alive, interval=0.25)

    def _spawn_worker(self, number: int) -> subprocess.Popen[bytes]:
        work = self.workdir / f"worker-{number}"
        work.mkdir(exist_ok=True)
        proc = self._spawn(
            [self._spark_class(), WORKER_CLASS, self.master_url, "--host", LOOPBACK,
             "--port", str(self.worker_ports[number]), "--cores", str(self._cores),
             "--memory", self._memory, "--webui-port", str(self.worker_webui_ports[number]),
             "--work-dir", str(work)], env=self._env(work))
        self._workers[number] = proc
        return proc

    def _spark_class(self) -> str:
        return str(spark_home() / "bin" / "spark-class")

    def _env(self, work: Path | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=LOOPBACK,
                   SPARK_LOCAL_HOSTNAME=LOOPBACK, SPARK_CONF_DIR=str(self.workdir / "conf"),
                   SPARK_LOG_DIR=str(self.workdir / "logs"),
                   SPARK_PID_DIR=str(self.workdir), SPARK_NO_DAEMONIZE="1",
                   # the daemons (and spark-class's launcher) do little work: the quick JIT
                   # and a small heap start them faster on busy cores
                   SPARK_LAUNCHER_OPTS=_QUICK_JVM, SPARK_DAEMON_MEMORY="512m",
                   SPARK_DAEMON_JAVA_OPTS=f"{_QUICK_JVM} -XX:+UseSerialGC")
        if work is not None:
            env["SPARK_WORKER_DIR"] = str(work)
        return env
