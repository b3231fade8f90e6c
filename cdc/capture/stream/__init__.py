"""Streaming: replication messages in, transactions of log records out, batched and
acknowledged (see ``cdc.capture`` for the path of one change)."""
