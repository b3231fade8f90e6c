"""Snapshots: the initial snapshot inside the slot's exported snapshot (resumable after
an interruption) and incremental snapshots between watermarks while streaming."""
