"""The capture: PostgreSQL logical replication (pgoutput) into the event log.

The path of one change, from the socket to the log:

1. ``stream/replication.py`` reads CopyData messages from the walsender;
2. ``stream/native.py`` turns batches of them into log records in one native call where it
   can; otherwise ``pgoutput/decoder.py`` decodes each message and
   ``stream/transactions.py`` assembles transactions, ``events.py`` building each event
   with the value codecs of ``codecs/`` and the table shapes of ``schema/shapes.py``;
3. ``stream/loop.py`` runs those steps for one session and closes a batch when group
   commit says so (``stream/batching.py``); ``runner.py`` (``Capture``) then skips what
   the log already holds after a crash (``stream/resume.py``), appends the batch and
   acknowledges to PostgreSQL only what the log made durable.

Around it: ``source/`` (connections with pinned settings, the publication, the slot,
start-up checks, WAL safety), ``snapshot/`` (initial and incremental snapshots),
``schema/`` (table shapes and versions, topic names, DDL capture, the event's JSON
Schema), ``doctor.py`` and ``commands.py`` (the CLI).
"""
