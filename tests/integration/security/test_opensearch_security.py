"""The OpenSearch sink against a real OpenSearch with its security plugin (the launcher's,
HTTPS with a certificate of our CA, basic-auth users): the right settings work end to end;
a refused login, a CA that does not verify the certificate or a host name it does not
name is a configuration error at start-up naming the ``config.*`` setting (``cdc
connect``: one line, exit status 2, no password shown); a password that turns wrong after
the sink has connected is retried, shown as the connector's reason on ``/healthz``, and
writing resumes once it is right again."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from opensearchpy import NotFoundError, OpenSearch

from cdc.errors import ConfigError
from cdc.log.file import FileLog
from compose.launcher.base import free_port
from compose.launcher.opensearch import OpenSearchServer
from compose.launcher.opensearch_security import BACKEND_ROLE, SecurityOptions
from connectors.contract import SinkUnavailableError
from connectors.opensearch import OpenSearchSinkConfig
from connectors.opensearch.sink import OpenSearchSink
from tests.integration.connectors.harness import wait_until
from tests.processes import stop_process
from tests.unit.connectors.conftest import event_record
from tests.unit.connectors.sink_events import TableEvents

from .certs import CertificateAuthority
from .cli import cdc, connector_pipeline, the_one_error_line

pytestmark = pytest.mark.integration

ADMIN, ADMIN_PASSWORD = "admin", "admin-Secret-7741"
USER, PASSWORD = "indexer", "search-Secret-3318"
WRONG = "not-the-Search-Secret-9920"


@dataclass(frozen=True)
class Cluster:
    server: OpenSearchServer
    issuer: CertificateAuthority
    stranger: CertificateAuthority

    def admin(self) -> OpenSearch:
        return OpenSearch(hosts=[self.server.url], http_auth=(ADMIN, ADMIN_PASSWORD),
                          ca_certs=str(self.issuer.cert), timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A secured node whose certificate (of ``issuer``) names 127.0.0.1 only, not
    ``localhost``; users ``admin`` and ``indexer``."""
    directory = tmp_path_factory.mktemp("opensearch-tls")
    issuer = CertificateAuthority.create(directory, "issuer")
    stranger = CertificateAuthority.create(directory, "stranger")
    cert, key = issuer.issue("opensearch", "opensearch", server=True, alt_names="IP:127.0.0.1")
    security = SecurityOptions(cert, key, issuer.cert,
                               users={ADMIN: ADMIN_PASSWORD, USER: PASSWORD})
    with OpenSearchServer(security=security, heap="768m") as server:
        yield Cluster(server, issuer, stranger)


def sink(cluster: Cluster, *, password: str | None = PASSWORD, host: str | None = None,
         ca: Path | None = None) -> OpenSearchSink:
    settings: dict[str, Any] = {"hosts": [host or cluster.server.url],
                                "ca_certs": str(ca or cluster.issuer.cert),
                                "request_timeout": "10s"}
    if password is not None:
        settings |= {"username": USER, "password": password}
    return OpenSearchSink(OpenSearchSinkConfig.model_validate(settings))


def set_password(cluster: Cluster, password: str) -> None:
    """Change the indexer's password through the security plugin's REST API."""
    admin = cluster.admin()
    try:
        answer = admin.transport.perform_request(
            "PUT", f"/_plugins/_security/api/internalusers/{USER}",
            body={"password": password, "backend_roles": [BACKEND_ROLE]})
        assert answer["status"] == "OK", answer
    finally:
        admin.close()


def stored(cluster: Cluster, index: str) -> dict[str, Any]:
    admin = cluster.admin()
    try:
        admin.indices.refresh(index=index)
        hits = admin.search(index=index, body={"size": 100})["hits"]["hits"]
        return {hit["_id"]: hit["_source"] for hit in hits}
    finally:
        admin.close()


def test_the_right_login_over_https_writes_documents(cluster: Cluster) -> None:
    assert cluster.server.url.startswith("https://127.0.0.1:")
    table = TableEvents(table="logged_in")
    opened = sink(cluster)
    opened.open()
    try:
        result = opened.write([table.upsert({"id": 1, "title": "one"}, 100, op="c")])
        assert result.rejected == []
    finally:
        opened.close()
    assert stored(cluster, "logged_in") == {"1": {"id": 1, "title": "one"}}


def test_a_wrong_or_missing_password_is_a_config_error(cluster: Cluster) -> None:
    for password in (WRONG, None):
        with pytest.raises(ConfigError, match=f"config.password: OpenSearch at 127.0.0.1:"
                           f"{cluster.server.port}: OpenSearch refused the login") as raised:
            sink(cluster, password=password).open()
        assert WRONG not in str(raised.value) and PASSWORD not in str(raised.value)


def test_a_certificate_of_another_ca_is_a_config_error(cluster: Cluster) -> None:
    with pytest.raises(ConfigError, match=f"config.ca_certs: OpenSearch at 127.0.0.1:"
                       f"{cluster.server.port}: OpenSearch's TLS certificate did not verify"):
        sink(cluster, ca=cluster.stranger.cert).open()


def test_an_expired_ca_certificate_is_a_config_error(cluster: Cluster) -> None:
    with pytest.raises(ConfigError, match=f"config.ca_certs: OpenSearch at 127.0.0.1:"
                       f"{cluster.server.port}: OpenSearch's TLS certificate did not verify"):
        sink(cluster, ca=cluster.issuer.expired()).open()


def test_a_certificate_for_another_host_name_is_a_config_error(cluster: Cluster) -> None:
    # the certificate names 127.0.0.1, not localhost (the same server)
    by_name = f"https://localhost:{cluster.server.port}"
    with pytest.raises(ConfigError, match=f"config.ca_certs: OpenSearch at localhost:"
                       f"{cluster.server.port}: OpenSearch's TLS certificate did not verify"):
        sink(cluster, host=by_name).open()


def test_http_to_the_https_node_is_left_to_the_retries(cluster: Cluster) -> None:
    plain = cluster.server.url.replace("https://", "http://", 1)
    config = OpenSearchSinkConfig.model_validate({
        "hosts": [plain], "username": USER, "password": PASSWORD, "request_timeout": "5s"})
    with pytest.raises(SinkUnavailableError):  # the node drops it: like a server down
        OpenSearchSink(config).open()


def test_cdc_connect_stops_with_the_setting_to_fix(cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "search-password").write_text(WRONG + "\n")
    config = connector_pipeline(tmp_path, "search", "opensearch", {
        "hosts": [cluster.server.url], "username": USER,
        "password_file": str(tmp_path / "search-password"),
        "ca_certs": str(cluster.issuer.cert), "request_timeout": "10s"})
    run = cdc("connect", "-c", str(config), timeout=120)
    errors = [the_one_error_line(run)]
    assert errors[0].startswith(f"Error: connector 'search': config.password: OpenSearch at "
                                f"127.0.0.1:{cluster.server.port}: OpenSearch refused the "
                                "login"), errors
    assert WRONG not in run.output and PASSWORD not in run.output


def test_a_password_changed_mid_run_is_retried(cluster: Cluster) -> None:
    table = TableEvents(table="rotated")
    opened = sink(cluster)
    opened.open()
    try:
        assert opened.write([table.upsert({"id": 1}, 100, op="c")]).rejected == []
        set_password(cluster, WRONG)  # the connector still has the old one
        try:
            with pytest.raises(SinkUnavailableError, match="HTTP 401"):
                opened.write([table.upsert({"id": 2}, 200, op="c")])
            opened.close()
            with pytest.raises(SinkUnavailableError, match="HTTP 401"):
                opened.open()  # connected before: an operator may put the password back
        finally:
            set_password(cluster, PASSWORD)
        opened.open()
        assert opened.write([table.upsert({"id": 2}, 200, op="c")]).rejected == []
    finally:
        opened.close()
    assert set(stored(cluster, "rotated")) == {"1", "2"}


def documents(cluster: Cluster, index: str) -> dict[str, Any]:
    """``stored``, or nothing while the index does not exist yet."""
    try:
        return stored(cluster, index)
    except NotFoundError:
        return {}


def healthz(port: int) -> tuple[int, dict[str, Any]]:
    """``/healthz`` of a process's endpoint on 127.0.0.1 (no proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read())
    except OSError:
        return 0, {}


def test_a_refusal_mid_run_is_the_connectors_reason_on_healthz(cluster: Cluster,
                                                               tmp_path: Path) -> None:
    port = free_port()
    config = connector_pipeline(tmp_path, "search", "opensearch", {
        "hosts": [cluster.server.url], "username": USER, "password": PASSWORD,
        "ca_certs": str(cluster.issuer.cert), "index": "reasons", "request_timeout": "10s"})
    pipeline = yaml.safe_load(config.read_text())
    pipeline["metrics"] = {"port": port}
    pipeline["connectors"][0]["retry"] = {"initial_backoff": "100ms", "max_backoff": "500ms"}
    config.write_text(yaml.safe_dump(pipeline))
    log = FileLog(tmp_path / "log")
    log.producer().append([event_record(1, 100, topic="logins.public.t", name="one")])
    output = (tmp_path / "connect.out").open("wb")
    connect = subprocess.Popen([sys.executable, "-m", "cdc.cli", "connect", "-c", str(config)],
                               stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: healthz(port)[0] == 200 and "1" in documents(cluster, "reasons"),
                   timeout=60, what="the first document, and the connector ready")
        set_password(cluster, WRONG)  # the connector still has the old one
        try:
            log.producer().append([event_record(2, 200, topic="logins.public.t", name="two")])
            seen: list[dict[str, Any]] = []

            def refused_and_said() -> bool:
                status, body = healthz(port)
                seen.append(body)
                return status == 503 and any(
                    reason.startswith("connector search: retrying write of 1 events: ")
                    and "401" in reason for reason in body.get("reasons", []))

            wait_until(refused_and_said, timeout=60, what="the 401 as the connector's reason")
            assert seen[-1]["parts"]["connector search"] == "retrying"
            assert PASSWORD not in json.dumps(seen) and WRONG not in json.dumps(seen)
        finally:
            set_password(cluster, PASSWORD)
        wait_until(lambda: healthz(port)[0] == 200 and "2" in documents(cluster, "reasons"),
                   timeout=60, what="writing resumed and the reason gone")
    finally:
        stop_process(connect)
        output.close()
        log.close()
    assert PASSWORD not in (tmp_path / "connect.out").read_text()
