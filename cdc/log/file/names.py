"""Topic names on disk: one directory per topic, distinct on case-insensitive file systems.

The rule (stable: existing logs stay readable):

- a topic name without upper-case letters is its own directory name
  (``app.public.orders`` → ``app.public.orders``);
- a name with upper-case letters is written in lower case, cut to 246 characters, then
  ``~`` and the first 8 hex digits of the SHA-256 of the exact name
  (``app.public.Orders`` → ``app.public.orders~<8 hex digits>``).

``~`` never occurs in a topic name, so the two forms cannot meet, and names that differ
only in case get different directories even where the file system ignores case. The
exact name is kept in the topic's ``topic.json`` (key ``topic``). A log written before
this rule had upper-case directory names: its writer moves them at start-up.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

HASHED_MARK = "~"
_PREFIX_MAX = 246


def topic_dir_name(topic: str) -> str:
    """The directory name of ``topic`` (see the module docstring)."""
    if topic == topic.lower():
        return topic
    digest = hashlib.sha256(topic.encode()).hexdigest()[:8]
    return f"{topic.lower()[:_PREFIX_MAX]}{HASHED_MARK}{digest}"


def topic_dir(root: Path | str, topic: str) -> Path:
    """The directory of ``topic`` in the log at ``root`` (Spark reads topics by this path)."""
    return Path(root) / topic_dir_name(topic)


def topic_of_dir(root: Path, dir_name: str) -> str | None:
    """The topic stored in directory ``dir_name`` (None when it holds no topic)."""
    if HASHED_MARK not in dir_name:
        return dir_name
    try:
        data = json.loads((root / dir_name / "topic.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    topic = data.get("topic")
    return topic if isinstance(topic, str) else None


def migrate_case_dirs(root: Path) -> list[str]:
    """Move topics an older version stored under a name with upper-case letters to their
    directory by the rule above (run by the log's single writer at start-up); the topics
    moved."""
    moved = []
    with os.scandir(root) as entries:
        legacy = [e.name for e in entries if e.is_dir() and not e.name.startswith(("_", "."))
                  and HASHED_MARK not in e.name and e.name != e.name.lower()]
    for name in legacy:
        meta_path = root / name / "topic.json"
        target = topic_dir(root, name)
        if not meta_path.exists() or target.exists():
            continue
        data = json.loads(meta_path.read_text())
        data["topic"] = name
        meta_path.write_text(json.dumps(data))
        os.replace(root / name, target)
        moved.append(name)
        log.info("topic directory renamed to the case-safe name %s", target.name,
                 extra={"topic": name})
    return moved
