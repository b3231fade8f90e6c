"""The HTTP side: routes, the bearer token, and a stdlib server in a thread.

``/`` and ``/status.js`` are the static status page (no data in them, so they are served
without a token; the page reads a token from its URL fragment, ``#token=…``, which
browsers never send to a server). ``/metrics``, ``/healthz`` and ``/status.json`` need
``Authorization: Bearer <token>`` when ``metrics.token`` is set.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .auth import BearerToken

log = logging.getLogger(__name__)

JSON_TYPE = "application/json; charset=utf-8"
_STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
           "/index.html": ("index.html", "text/html; charset=utf-8"),
           "/status.js": ("status.js", "text/javascript; charset=utf-8")}
_PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                "connect-src 'self'; img-src 'self'")


def static_file(name: str) -> bytes:
    """One file of the status page, from the package."""
    return files("cdc.observability").joinpath("static", name).read_bytes()


class Routes:
    """What each path answers; built once per server."""

    def __init__(self, registry: CollectorRegistry, token: BearerToken,
                 health: Callable[[], tuple[int, dict[str, Any]]],
                 status: Callable[[], dict[str, Any]]) -> None:
        self.registry = registry
        self.token = token
        self.health = health
        self.status = status
        self.static = {path: (static_file(name), kind) for path, (name, kind) in _STATIC.items()}

    def answer(self, path: str, authorization: str | None) -> tuple[int, str, bytes]:
        """Status, content type and body for a GET of ``path``."""
        path = path.split("?", 1)[0]
        if path in self.static:
            body, kind = self.static[path]
            return HTTPStatus.OK, kind, body
        if path not in ("/metrics", "/healthz", "/status.json"):
            return HTTPStatus.NOT_FOUND, JSON_TYPE, b'{"error": "not found"}'
        if not self.token.allows(authorization):
            return (HTTPStatus.UNAUTHORIZED, JSON_TYPE,
                    b'{"error": "send Authorization: Bearer <metrics.token>"}')
        if path == "/metrics":
            return HTTPStatus.OK, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if path == "/healthz":
            status, health = self.health()
            return status, JSON_TYPE, json.dumps(health).encode()
        return HTTPStatus.OK, JSON_TYPE, json.dumps(self.status()).encode()


def _handler(routes: Routes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "distributary"
        sys_version = ""

        def do_GET(self) -> None:
            status, kind, body = routes.answer(self.path, self.headers.get("Authorization"))
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            if kind.startswith("text/html"):
                self.send_header("Content-Security-Policy", _PAGE_POLICY)
            if status == HTTPStatus.UNAUTHORIZED:
                self.send_header("WWW-Authenticate", 'Bearer realm="distributary"')
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("observability: %s %s", self.address_string(), format % args)

    return Handler


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class HttpEndpoint:
    """A ``ThreadingHTTPServer`` for ``routes`` on ``host:port``, served in a thread."""

    def __init__(self, host: str, port: int, routes: Routes) -> None:
        server_class = _Server6 if ":" in host else ThreadingHTTPServer
        self._server = server_class((host, port), _handler(routes))  # OSError: the caller's
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="observability-http", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        """Serve in a daemon thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()
