"""A member of a ``block`` consumer group in a process of its own (the backpressure test
runs it): ``python -m tests.integration.kafka_parity.blocking_member BOOTSTRAP TOPIC GROUP
MAX_LAG``. Each line on stdin is a number of records to read and commit; it answers
``committed N`` (N: all it committed so far). An empty line (or the end of stdin) ends it.
"""

from __future__ import annotations

import sys
import time

from cdc.log import Backpressure, BackpressurePolicy, Consumer, StartAt
from cdc.log.kafka import KafkaLog


def read_and_commit(consumer: Consumer, count: int) -> int:
    """Read ``count`` records (within 60 s) and commit them; how many were read."""
    read = 0
    deadline = time.monotonic() + 60
    while read < count and time.monotonic() < deadline:
        read += len(consumer.poll(count - read, timeout=1.0))
    consumer.commit()
    return read


def main(bootstrap: str, topic: str, group: str, max_lag: str) -> None:
    log = KafkaLog([bootstrap])
    consumer = log.consumer(group, topics=[topic], start=StartAt.earliest(),
                            backpressure=Backpressure(BackpressurePolicy.BLOCK, int(max_lag)))
    committed = 0
    try:
        for line in sys.stdin:
            if not line.strip():
                break
            committed += read_and_commit(consumer, int(line))
            print(f"committed {committed}", flush=True)
    finally:
        consumer.close()
        log.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
