"""``ConnectorRunner``: one connector as a consumer group of ``workers`` threads.

Workers are threads, not processes: sinks spend their time waiting on the network
(HTTP, OpenSearch, Redis), which releases the GIL; threads share one metrics registry,
one dead-letter writer and one stop event, and need no pickling of sinks or configs.
Each worker has its own consumer (a member of the group) and its own sink instance, so
sinks need not be thread-safe. To use more cores, run more ``cdc connect`` processes:
they join the same groups.

The consumer group is named after the connector (``ConnectorConfig.name`` says so);
with Kafka, give connectors names unique on the cluster. Dead letters go to
``<prefix>.dlq.<connector>``; a ``topic_pattern`` never feeds a connector from
dead-letter topics.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from cdc.config import ConnectorConfig
from cdc.config.models import dead_letter_topic
from cdc.log import Log, StartAt
from cdc.observability.connector_metrics import ConnectorMetrics, RuntimeMetrics
from connectors.contract import SinkContext

from .dead_letter import DeadLetterWriter
from .errors import ConnectorFailedError, describe
from .retry import Retrier, RetryPolicy
from .worker import ConnectorWorker, WorkerSetup

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunnerOptions:
    """Knobs mostly for tests and tools: where to start, how retries wait."""

    start: StartAt = field(default_factory=StartAt.committed)
    retry_sleep: Callable[[float], object] | None = None  # default: wait on the stop event
    retry_draw: Callable[[], float] = random.random
    unexpected_attempts: int = 3
    lag_refresh_s: float = 5.0


class ConnectorRunner:
    """Starts, watches and drains the workers of one connector."""

    def __init__(self, connector: ConnectorConfig, log: Log, *, topic_prefix: str,
                 metrics: RuntimeMetrics | None = None,
                 options: RunnerOptions | None = None) -> None:
        self.connector = connector
        self.group = connector.name
        self.topic_prefix = topic_prefix
        self.options = options or RunnerOptions()
        self._log = log
        self._stop = threading.Event()
        self.metrics: ConnectorMetrics = (metrics or RuntimeMetrics()).for_connector(
            connector.name)
        self.dead_letter_topic = dead_letter_topic(topic_prefix, connector.name)
        self.dead_letters = DeadLetterWriter(log, self.dead_letter_topic, connector.name)
        policy = RetryPolicy.from_config(connector.retry)
        self._retrier = Retrier(
            connector.name, RetryPolicy(policy.initial_backoff, policy.max_backoff,
                                        policy.max_attempts, self.options.unexpected_attempts),
            self._stop, sleep=self.options.retry_sleep, draw=self.options.retry_draw,
            on_retry=self.metrics.retries.inc)
        self._workers: list[ConnectorWorker] = []
        self._threads: list[threading.Thread] = []

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        """Start the workers (and the lag refresher)."""
        connector = self.connector
        skip = (dead_letter_topic(self.topic_prefix, "") if connector.topic_pattern is not None
                else None)
        for index in range(connector.workers):
            setup = WorkerSetup(connector, self._log, self.group,
                                SinkContext(connector.name, self.topic_prefix, index,
                                            self._log),
                                self.dead_letters, self.metrics, self._retrier,
                                self.options.start, skip)
            worker = ConnectorWorker(setup, self._stop)
            thread = threading.Thread(target=self._run_worker, args=(worker,),
                                      name=f"connector-{connector.name}-{index}", daemon=True)
            self._workers.append(worker)
            self._threads.append(thread)
        self._threads.append(threading.Thread(target=self._refresh_lag_loop, daemon=True,
                                              name=f"connector-{connector.name}-lag"))
        for thread in self._threads:
            thread.start()
        log.info("%s: started %d workers in group %r (dead letters: %s)", connector.name,
                 connector.workers, self.group, self.dead_letter_topic,
                 extra={"connector": connector.name})

    def _run_worker(self, worker: ConnectorWorker) -> None:
        worker.run()
        if worker.failure is not None:
            self._stop.set()  # one failed worker drains the others: the connector stops

    def stop(self) -> None:
        """Ask every worker to finish its batch in hand, flush, commit and close."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the workers to end; True when they all did (then resources are freed)."""
        for thread in self._threads:
            thread.join(timeout)
        if any(thread.is_alive() for thread in self._threads):
            return False
        self.dead_letters.close()
        self.refresh_lag()
        return True

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set or a worker fails; drain; raise ConnectorFailedError
        on failure."""
        self.start()
        while not stop.wait(0.2) and not self._stop.is_set():
            pass
        self.stop()
        self.join()
        self.raise_failure()

    # -- state ---------------------------------------------------------------------
    @property
    def problem(self) -> str | None:
        """What a worker is retrying and why, while it does; else what a worker's log
        client reports going wrong while it reads."""
        retrying = self._retrier.problem
        if retrying is not None:
            return retrying
        return next((problem for worker in self._workers
                     if (problem := worker.consumer_problem) is not None), None)

    @property
    def failures(self) -> list[BaseException]:
        return [w.failure for w in self._workers if w.failure is not None]

    def raise_failure(self) -> None:
        """Raise ConnectorFailedError for the first worker failure, if any."""
        failures = self.failures
        if failures:
            raise ConnectorFailedError(self.connector.name, failures[0]) from failures[0]

    @property
    def dropped(self) -> int:
        """Events skipped by the ``drop`` backpressure policy, over all workers."""
        return sum(worker.dropped for worker in self._workers)

    def refresh_lag(self) -> None:
        """Set the lag gauges from the group's committed offsets."""
        try:
            lags = self._log.admin().group_lag(self.group)
        except Exception as exc:  # metrics must never stop a connector
            log.warning("%s: cannot read the group's lag: %s", self.connector.name,
                        describe(exc), extra={"connector": self.connector.name})
            return
        for lag in lags:
            self.metrics.set_lag(lag.topic, lag.partition, lag.lag)

    def _refresh_lag_loop(self) -> None:
        while not self._stop.wait(self.options.lag_refresh_s):
            self.refresh_lag()
