"""Child processes for the multi-process log tests (run with ``python -m``).

    consume ROOT GROUP TOPIC OUT   join GROUP, append "partition offset key" lines to OUT
                                   for every record ("owns P,P" when its partitions
                                   change), commit after each batch, forever
    produce ROOT TOPIC START COUNT append COUNT records with ids START.., 50 per batch
    crash ROOT TOPIC COUNT         append COUNT records (ids 0..) in batches of 50 to 3
                                   partitions, then exit at once: no close, no checkpoint
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from cdc.log import Position, Record
from cdc.log.file import FileLog


def consume(root: str, group: str, topic: str, out: str) -> None:
    """Consume forever, logging what was read and committing after each batch."""
    consumer = FileLog(root).consumer(group, topics=[topic])
    with Path(out).open("a", buffering=1) as sink:
        print(f"member {consumer.member_id}", file=sink)
        owned: set[int] | None = None
        while True:
            batch = consumer.poll(100, timeout=0.5)
            now = {tp.partition for tp in consumer.assignment()}
            if now != owned:
                owned = now
                print(f"owns {','.join(str(p) for p in sorted(now))}", file=sink)
            for m in batch:
                sink.write(f"{m.partition} {m.offset} {m.key.decode()}\n")
            sink.flush()
            consumer.commit()


def produce(root: str, topic: str, start: int, count: int) -> None:
    """Append ``count`` records in batches of 50 (keys ``start``..)."""
    producer = FileLog(root).producer()
    for first in range(start, start + count, 50):
        ids = range(first, min(first + 50, start + count))
        producer.append([Record(topic, b"%d" % i, b'{"id":%d}' % i, Position(i + 1, 0))
                         for i in ids])
    producer.close()


def crash(root: str, topic: str, count: int) -> None:
    """Append ``count`` records, then die without closing (the journal stays)."""
    producer = FileLog(root).producer()
    for first in range(0, count, 50):
        producer.append([Record(topic, b"%d" % i, b'{"id":%d}' % i, Position(i + 1, 0))
                         for i in range(first, min(first + 50, count))])
    os._exit(0)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "consume":
        consume(*args)
    elif command == "produce":
        produce(args[0], args[1], int(args[2]), int(args[3]))
    elif command == "crash":
        crash(args[0], args[1], int(args[2]))
    else:
        raise SystemExit(f"unknown command {command}")
    time.sleep(0)
