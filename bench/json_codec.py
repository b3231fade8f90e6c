"""Which JSON codec for the hot path: orjson, msgspec, or the standard library.

Encodes and decodes a typical change event; prints events/s per codec and, last, the
ratio of the chosen codec (orjson) to the standard library.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

EVENT: dict[str, Any] = {
    "op": "u", "key": {"id": 42}, "before": None,
    "after": {"id": 42, "customer_id": 7, "status": "paid", "amount": "123.45",
              "note": "leave at the door", "created_at": "2026-11-21T10:00:00.123456Z"},
    "unchanged": [],
    "source": {"db": "app", "schema": "public", "table": "orders", "lsn": "0/16B3748",
               "commit_lsn": "0/16B37A0", "seq": 3, "txid": 731,
               "commit_ts": "2026-11-21T10:00:00.123456Z", "snapshot": False},
    "schema_version": 2,
}
ROUNDS = 100_000


def rate(step: Callable[[], object]) -> float:
    """Calls per second of ``step`` over ROUNDS calls."""
    started = time.perf_counter()
    for _ in range(ROUNDS):
        step()
    return ROUNDS / (time.perf_counter() - started)


def main() -> None:
    """Measure and print ``name=value`` lines."""
    encoded = orjson.dumps(EVENT)
    encoder, decoder = msgspec.json.Encoder(), msgspec.json.Decoder()
    results = {
        "stdlib": (rate(lambda: json.dumps(EVENT).encode()), rate(lambda: json.loads(encoded))),
        "msgspec": (rate(lambda: encoder.encode(EVENT)), rate(lambda: decoder.decode(encoded))),
        "orjson": (rate(lambda: orjson.dumps(EVENT)), rate(lambda: orjson.loads(encoded))),
    }
    for name, (enc, dec) in results.items():
        print(f"json_{name}_encode_per_s={enc:.0f}")
        print(f"json_{name}_decode_per_s={dec:.0f}")
    print(f"json_orjson_encode_ratio_vs_stdlib={results['orjson'][0] / results['stdlib'][0]:.2f}")


if __name__ == "__main__":
    main()
