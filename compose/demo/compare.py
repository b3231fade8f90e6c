"""Diff the Spark output of the shop with PostgreSQL, row for row, after bringing values
to one form (``shop.normalize``). OpenSearch and Redis are checked by ``cdc reconcile``."""

from __future__ import annotations

from collections.abc import Mapping

from . import shop


def diff_rows(what: str, want: Mapping[str, shop.Row], got: Mapping[str, shop.Row],
              limit: int = 3) -> list[str]:
    """Lines naming missing, extra and different rows of ``got`` (at most ``limit`` each)."""
    missing = sorted(set(want) - set(got), key=_sort_key)
    extra = sorted(set(got) - set(want), key=_sort_key)
    changed = sorted((k for k in set(want) & set(got) if want[k] != got[k]), key=_sort_key)
    problems = []
    if missing:
        problems.append(f"{what}: {len(missing)} rows missing (keys {missing[:limit]})")
    if extra:
        problems.append(f"{what}: {len(extra)} rows too many (keys {extra[:limit]})")
    for key in changed[:limit]:
        fields = {c for c in want[key] if want[key][c] != got[key].get(c)}
        problems.append(f"{what}: key {key} differs in {sorted(fields)}: "
                        f"{ {c: got[key].get(c) for c in fields} } instead of "
                        f"{ {c: want[key][c] for c in fields} }")
    if len(changed) > limit:
        problems.append(f"{what}: {len(changed)} rows differ in all")
    return problems


def _sort_key(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (0, key)
