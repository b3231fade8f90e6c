"""A real HTTP endpoint for the webhook tests: ``http.server`` in a thread on 127.0.0.1:0.

It records every request and answers what ``answer(request)`` returns (status, headers).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson


@dataclass(frozen=True)
class Request:
    """One POST as received."""

    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def keys(self) -> list[int]:
        return [int(e["event"]["key"]["id"]) for e in orjson.loads(self.body)["events"]]


Answer = tuple[int, dict[str, str]]


@dataclass
class Receiver:
    """The endpoint's state: requests received, the answering rule, an optional delay."""

    url: str
    answer: Callable[[Request], Answer] = lambda request: (200, {})
    delays: list[float] = field(default_factory=list)
    hang_up_after_reply: bool = False  # close kept-alive connections without saying so
    answered: list[tuple[Request, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def requests(self) -> list[Request]:
        with self.lock:
            return [request for request, _ in self.answered]

    def accepted_keys(self) -> list[int]:
        """Keys of the events in requests answered with a 2xx, in arrival order."""
        with self.lock:
            return [k for r, status in self.answered if 200 <= status < 300 for k in r.keys]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            with receiver.lock:
                delay = receiver.delays.pop(0) if receiver.delays else 0.0
            if delay:
                time.sleep(delay)
            status, headers = receiver.answer(request)
            with receiver.lock:
                receiver.answered.append((request, status))
            reply = b'{"ok":%s}' % (b"true" if status < 300 else b"false")
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
            self.close_connection = receiver.hang_up_after_reply

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    return Handler


@contextmanager
def webhook_receiver() -> Iterator[Receiver]:
    """A running receiver; stopped on exit."""
    receiver = Receiver(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
