"""``cdc reconcile``: compare the OpenSearch and Redis sinks with the database, and repair.

The pieces: ``source`` reads a table in key chunks as the capture renders rows;
``catchup`` waits until the capture and a connector's group have got past a read;
``opensearch_target``/``redis_target`` read and list what a sink holds through the
connector's own views, ids and key templates; ``compare`` is the pure comparison;
``walk`` puts them together per table; ``repair`` sends differences back through the
pipeline and waits until they landed; ``check`` runs every table of a pipeline (the
library function); ``continuous`` repeats it every interval under ``cdc run``;
``command`` is the click command (registered lazily by ``cdc.cli``).
"""
