"""The thread that takes a ``Sample`` every interval for the status page."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .samples import Sample, SampleHistory

log = logging.getLogger(__name__)


class Sampler:
    """Calls ``take`` every ``history.interval_s`` and keeps the results in ``history``."""

    def __init__(self, history: SampleHistory, take: Callable[[], Sample]) -> None:
        self.history = history
        self._take = take
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="observability-sampler",
                                        daemon=True)

    def start(self) -> None:
        """Take the first sample now, then one per interval."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def history_json(self) -> dict[str, object]:
        """The history as ``/status.json`` shows it (consistent under concurrent sampling)."""
        with self._lock:
            return self.history.as_json()

    def _loop(self) -> None:
        while True:
            try:
                sample = self._take()
            except Exception as exc:  # a failed reading must never stop the pipeline
                log.warning("cannot take a status sample: %s", type(exc).__name__)
            else:
                with self._lock:
                    self.history.add(sample)
            if self._stop.wait(self.history.interval_s):
                return
