"""Reconciling an OpenSearch connector: documents by ``_id``, versions are external.

A walk reads the whole index with one scroll beside the table (``scan``: a scroll page
costs a fraction of an ``ids`` search of the same documents), or a chunk's documents
with one ``ids`` search (``read``); both see documents as of the last refresh. Rechecks
and extras read in real time (``mget``), so a write not yet refreshed is never
reported."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

import orjson
from opensearchpy import OpenSearch
from opensearchpy.exceptions import AuthorizationException, ConflictError, NotFoundError

from connectors.opensearch.client import make_client
from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.opensearch.names import index_name
from connectors.opensearch.sink import MAX_ID_BYTES
from connectors.placeholders import NameTemplate, TableNames
from derived import ViewDefinition, apply_view, encode_key

from .compare import Record, StoredRecord
from .rows import after_jsons, id_texts
from .source import SourceRow
from .target import Encoded, HeldPage

SCROLL = "2m"
PAGE = 2000
SCAN_PAGE = 5000  # documents per scroll page of ``scan`` (sources and versions)
FILTER_PATH = "_scroll_id,hits.hits._id,hits.hits._version,hits.hits._source"
_ID, _SOURCE, _VERSION = itemgetter("_id"), itemgetter("_source"), itemgetter("_version")


def alias_of(config: OpenSearchSinkConfig, names: TableNames,
             view: ViewDefinition | None) -> str:
    """The alias the sink writes the table's documents through (as ``OpenSearchSink``)."""
    if view is not None:
        return view.target
    template = config.alias if config.alias is not None else config.index
    return index_name(NameTemplate(template).render(names))


class OpenSearchTarget:
    """One table through one view in one OpenSearch connector."""

    missing_is_drift = True

    def __init__(self, connector: str, config: OpenSearchSinkConfig, names: TableNames,
                 view: ViewDefinition | None, client: OpenSearch | None = None) -> None:
        self.alias = alias_of(config, names, view)
        self.label = f"{connector} index {self.alias}"
        self._view = view
        self._client = client or make_client(config)

    def sink_id(self, row: SourceRow) -> str | None:
        """The row's ``_id``; ``None`` past OpenSearch's limit (the sink dead-letters it)."""
        doc_id = row.id_text  # encode_key(row.key)
        return doc_id if len(doc_id.encode()) <= MAX_ID_BYTES else None

    def id_of(self, key: Mapping[str, Any]) -> str | None:
        """The ``_id`` of a record of event key ``key`` (``None`` past OpenSearch's limit)."""
        doc_id = encode_key(dict(key))
        return doc_id if len(doc_id.encode()) <= MAX_ID_BYTES else None

    def stored_form(self, record: Record) -> Record:
        """``record`` as the sink stores it (a document is the record itself)."""
        return record

    def write(self, sink_id: str, record: Record, version: int) -> bool:
        """Index ``record`` as ``sink_id`` under ``version`` (``external_gte``: a newer
        document wins); True if it was written."""
        try:
            self._client.index(index=self.alias, id=sink_id, body=record, version=version,
                               version_type="external_gte", refresh=False)
        except ConflictError:
            return False
        return True

    def expected(self, rows: Sequence[SourceRow]) -> dict[str, Record | None]:
        """``_id`` → document (``None``: the view filters the row out)."""
        out: dict[str, Record | None] = {}
        for row in rows:
            doc_id = self.sink_id(row)
            if doc_id is not None:
                out[doc_id] = apply_view(self._view, row.after)
        return out

    def encoded(self, rows: Sequence[SourceRow]) -> Encoded:
        """``_id`` → the document as the sink sends it (``None``: filtered out)."""
        view = self._view
        if view is None:
            jsons = list(map(after_jsons, rows))
            ids = list(map(id_texts, rows))
            if all(jsons) and max(map(len, ids), default=0) * 4 <= MAX_ID_BYTES:
                # the whole chunk without a Python call per row (4: UTF-8's longest)
                return dict(zip(ids, zip(jsons, rows, strict=True), strict=True))
        out: Encoded = {}
        for row in rows:
            doc_id = self.sink_id(row)
            if doc_id is None:
                continue
            if view is None and row.after_json:
                out[doc_id] = (row.after_json, row)  # the sink's orjson.dumps
            else:
                record = apply_view(view, row.after)
                out[doc_id] = (None if record is None else orjson.dumps(record), row)
        return out

    def held(self, ids: Sequence[str]) -> dict[str, bytes]:
        """``read``, each document's source as JSON text."""
        return {doc_id: orjson.dumps(stored.record) for doc_id, stored in self.read(ids).items()}

    def read(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """The documents of ``ids``: one ``ids`` search (documents refreshed by now;
        a difference it shows is read again in real time by ``read_now``)."""
        if not ids:
            return {}
        try:
            found = self._client.search(
                index=self.alias, size=len(ids), version=True,
                body={"query": {"ids": {"values": list(ids)}}})
        except NotFoundError:
            return {}
        return {str(hit["_id"]): StoredRecord(hit["_source"], int(hit["_version"]))
                for hit in found["hits"]["hits"]}

    def read_now(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """The documents of ``ids`` as they are now (one realtime ``mget``)."""
        if not ids:
            return {}
        found = self._client.mget(body={"ids": list(ids)}, index=self.alias, realtime=True)
        out: dict[str, StoredRecord] = {}
        for doc in found["docs"]:
            error = doc.get("error")
            if error:
                if _index_missing(error):
                    return {}
                raise RuntimeError(f"OpenSearch could not read document {doc.get('_id')!r} "
                                   f"of {self.alias}: {error}")
            if doc.get("found"):
                out[str(doc["_id"])] = StoredRecord(doc["_source"], int(doc["_version"]))
        return out

    def versions(self, ids: Sequence[str]) -> Mapping[str, int | None]:
        """The versions of the documents of ``ids`` that exist."""
        return {doc_id: stored.version for doc_id, stored in self.read_now(ids).items()}

    def scan(self) -> Iterator[HeldPage]:
        """Every document of the alias with its version, a scroll page at a time (in
        index order). The index is refreshed first, so the scroll, which sees the index
        as it was when it began, holds every write acknowledged before the walk (a role
        not allowed to refresh scrolls what the last periodic refresh made visible)."""
        with contextlib.suppress(NotFoundError, AuthorizationException):
            self._client.indices.refresh(index=self.alias)
        for hits in self._scroll(SCAN_PAGE, sources=True):  # mapped: no Python call a hit
            yield list(zip(map(_ID, hits), map(orjson.dumps, map(_SOURCE, hits)),
                           map(_VERSION, hits), strict=True))

    def listing(self) -> Iterator[str]:
        """Every document of the alias: a scroll of ids, no sources."""
        for hits in self._scroll(PAGE, sources=False):
            for hit in hits:
                yield str(hit["_id"])

    def _scroll(self, size: int, *, sources: bool) -> Iterator[list[dict[str, Any]]]:
        """The hits of a scroll of the whole alias in index order, page by page (each hit
        with its ``_id``, ``_version`` and, with ``sources``, ``_source`` only)."""
        try:
            page: dict[str, Any] = self._client.search(
                index=self.alias, scroll=SCROLL, size=size, filter_path=FILTER_PATH,
                body={"query": {"match_all": {}}, "sort": ["_doc"], "_source": sources,
                      "version": True})
        except NotFoundError:
            return
        scroll_id = page.get("_scroll_id")
        try:
            while hits := page.get("hits", {}).get("hits"):
                yield hits
                page = self._client.scroll(scroll_id=scroll_id, scroll=SCROLL,
                                           filter_path=FILTER_PATH)
                scroll_id = page.get("_scroll_id")
        finally:
            if scroll_id:
                self._client.clear_scroll(scroll_id=scroll_id, ignore=(404,))

    def delete(self, sink_id: str, version: int) -> bool:
        """An external-versioned delete (``external_gte``: a newer document wins)."""
        try:
            self._client.delete(index=self.alias, id=sink_id, version=version,
                                version_type="external_gte", refresh=False)
        except ConflictError:
            return False
        except NotFoundError:
            return False
        return True

    def close(self) -> None:
        """Close the client."""
        self._client.close()


def _index_missing(error: Any) -> bool:
    return isinstance(error, dict) and error.get("type") == "index_not_found_exception"
