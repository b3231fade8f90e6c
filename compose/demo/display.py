"""The live view while the workload runs: events per topic, connector lag, events/s."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rich.table import Table

from cdc.log import Admin


@dataclass
class LogSnapshot:
    """What the log's admin says at one moment."""

    events: dict[str, int]
    lag: dict[str, int]
    at: float = field(default_factory=time.monotonic)

    @property
    def total(self) -> int:
        return sum(self.events.values())


def snapshot(admin: Admin, topics: list[str], groups: list[str]) -> LogSnapshot:
    """Records per topic (end minus start offsets) and total lag per consumer group."""
    events = {topic: sum(p.end_offset - p.start_offset for p in admin.partitions(topic))
              for topic in topics}
    known = set(admin.groups())
    lag = {group: sum(g.lag for g in admin.group_lag(group)) if group in known else -1
           for group in groups}
    return LogSnapshot(events, lag)


class DemoView:
    """Renders a table from successive snapshots (events/s over the last interval)."""

    def __init__(self, duration: float) -> None:
        self.duration = duration
        self.started = time.monotonic()
        self.previous: LogSnapshot | None = None
        self.rate = 0.0
        self.transactions = 0

    def update(self, current: LogSnapshot, transactions: int) -> Table:
        """A table for ``current``; ``transactions`` is what the workload committed."""
        if self.previous is not None and current.at > self.previous.at:
            self.rate = (current.total - self.previous.total) / (current.at - self.previous.at)
        self.previous = current
        self.transactions = transactions
        elapsed = time.monotonic() - self.started
        table = Table(title=f"{elapsed:3.0f}/{self.duration:.0f} s · {transactions:,} "
                      f"transactions · {self.rate:,.0f} events/s")
        table.add_column("topic / connector")
        table.add_column("events captured", justify="right")
        table.add_column("lag", justify="right")
        for topic, count in sorted(current.events.items()):
            table.add_row(topic, f"{count:,}", "")
        for group, lag in sorted(current.lag.items()):
            table.add_row(f"connector {group}", "", "starting" if lag < 0 else f"{lag:,}")
        return table
