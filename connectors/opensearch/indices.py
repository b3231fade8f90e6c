"""Indices behind aliases: created on first sight, extended with new fields, and emptied
by a truncate through an alias swap.

Every write goes to an alias ``<alias>`` pointing at one concrete index ``<base>-<n>``.
A truncate creates ``<base>-<n+1>`` with the same mappings and settings, moves the alias
in one atomic ``_aliases`` call, then deletes the old index: readers never see a
half-empty index, and the work is three requests whatever the table's size. The new
index records the truncate's version in ``_meta.distributary.truncate_version``; writes
older than it are skipped, and replaying the truncate itself does nothing. Documents
written at a newer version than the truncate (their events sit in other partitions than
the truncate's and were applied first) are copied into the new index before the swap
(one ``_reindex`` that skips every older document).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import TransportError

from connectors.contract import SinkRejectedError

from .errors import error_type_of, status_of, translate
from .mapping import FieldMapping, index_body, merged

log = logging.getLogger(__name__)

_COPIED_SETTINGS = ("number_of_shards", "number_of_replicas", "refresh_interval", "gc_deletes",
                    "analysis", "mapping")


@dataclass(slots=True)
class IndexState:
    """What the sink knows of one alias: its index, mapped fields, last truncate."""

    alias: str
    base: str
    index: str
    fields: set[str] = field(default_factory=set)
    truncate_version: int = 0
    mappings: dict[str, FieldMapping] = field(default_factory=dict)  # as far as known


class IndexCatalog:
    """Finds, creates and swaps the indices behind aliases; caches what it learnt."""

    def __init__(self, client: OpenSearch, tombstone_retention_s: int, *,
                 replicas: int | None = None) -> None:
        """``replicas``: ``number_of_replicas`` of the indices it creates (``None``: the
        cluster's default); a truncate's new index copies its predecessor's."""
        self._client = client
        self._tombstone_retention_s = tombstone_retention_s
        self._replicas = replicas
        self._states: dict[str, IndexState] = {}

    def state(self, alias: str, base: str) -> IndexState:
        """The state of ``alias``, creating ``<base>-1`` behind it if it does not exist."""
        known = self._states.get(alias)
        if known is None:
            known = self._load(alias, base) or self._create(alias, base, 0)
            self._states[alias] = known
        return known

    def forget(self) -> None:
        """Drop what is cached (after an error that may mean someone changed the indices)."""
        self._states.clear()

    def add_fields(self, state: IndexState, mappings: dict[str, FieldMapping]) -> None:
        """Map new fields; a conflicting mapping is left to the bulk items to report."""
        try:
            self._client.indices.put_mapping(index=state.alias, body={"properties": mappings})
        except TransportError as exc:
            if status_of(exc) != 400:
                raise translate(exc, f"mapping new fields of {state.alias}") from exc
            log.warning("mapping new fields of %s failed (%s); its documents may be rejected",
                        state.alias, error_type_of(exc), extra={"sink": "opensearch"})
            self._states.pop(state.alias, None)
            return
        state.fields.update(mappings)
        state.mappings = merged(state.mappings, mappings)

    def truncate(self, state: IndexState, version: int) -> IndexState:
        """Empty the alias's index by a swap to a new empty one (see the module docstring)."""
        behind = self._load(state.alias, state.base)  # a rebuild may have moved the alias
        old = behind.index if behind is not None else state.index
        try:
            current = self._client.indices.get(index=old)[old]
            settings = {name: value for name, value in current["settings"]["index"].items()
                        if name in _COPIED_SETTINGS}
            # an index made before indices ignored malformed values gets it now (static)
            settings["mapping"] = {**settings.get("mapping", {}), "ignore_malformed": True}
            mappings = dict(current["mappings"])
            mappings["_meta"] = {"distributary": {"truncate_version": version}}
            new = f"{state.base}-{self._next_number(state.base)}"
            self._client.indices.create(index=new, body={"settings": {"index": settings},
                                                         "mappings": mappings})
        except TransportError as exc:
            self._states.pop(state.alias, None)
            raise translate(exc, f"truncating {state.alias} (creating its new index)") from exc
        try:
            self._keep_newer_documents(old, new, version)
            self._client.indices.update_aliases(body={"actions": [
                {"remove": {"index": old, "alias": state.alias}},
                {"add": {"index": new, "alias": state.alias, "is_write_index": True}}]})
        except TransportError as exc:
            self._states.pop(state.alias, None)
            self._delete_quietly(new)
            raise translate(exc, f"truncating {state.alias} (moving it to {new})") from exc
        self._delete_quietly(old)
        log.info("truncated %s: %s replaced by %s at version %d", state.alias, old, new, version,
                 extra={"sink": "opensearch"})
        properties = dict(mappings.get("properties", {}))
        swapped = IndexState(state.alias, state.base, new, set(properties), version, properties)
        self._states[state.alias] = swapped
        return swapped

    def _keep_newer_documents(self, old: str, new: str, version: int) -> None:
        """Copy the documents written at a version after the truncate's into ``new``: their
        events sit in other partitions than the truncate's and were applied first."""
        self._client.indices.refresh(index=old)  # _reindex reads by search: see every write
        self._client.reindex(body={
            "conflicts": "proceed",
            "source": {"index": old},
            "dest": {"index": new, "version_type": "external"},
            "script": {"lang": "painless", "params": {"truncated": version},
                       "source": "if (ctx._version <= params.truncated) { ctx.op = 'noop' }"},
        }, refresh=True, wait_for_completion=True, request_timeout=600)

    def _delete_quietly(self, index: str) -> None:
        """Delete an index no alias points at; one left behind is logged, not fatal."""
        try:
            self._client.indices.delete(index=index, ignore_unavailable=True)
        except TransportError as exc:
            log.warning("could not delete index %s (%s); no alias points at it, delete it by "
                        "hand", index, error_type_of(exc) or exc.status_code,
                        extra={"sink": "opensearch"})

    def _load(self, alias: str, base: str) -> IndexState | None:
        try:
            found = self._client.indices.get_alias(name=alias)
        except TransportError as exc:
            if status_of(exc) == 404:
                return None
            raise translate(exc, f"looking up alias {alias}") from exc
        index = next((name for name, entry in found.items()
                      if entry["aliases"][alias].get("is_write_index", len(found) == 1)), None)
        if index is None:
            raise SinkRejectedError(f"alias {alias} points at several indices and none is the "
                                    "write index; set is_write_index on one")
        try:
            mapping = self._client.indices.get_mapping(index=index)[index]["mappings"]
        except TransportError as exc:
            raise translate(exc, f"reading the mapping of {index}") from exc
        meta = mapping.get("_meta", {}).get("distributary", {})
        properties = dict(mapping.get("properties", {}))
        return IndexState(alias, base, index, set(properties),
                          int(meta.get("truncate_version", 0)), properties)

    def _create(self, alias: str, base: str, truncate_version: int) -> IndexState:
        index = f"{base}-{self._next_number(base)}"
        body = index_body(alias, truncate_version, self._tombstone_retention_s,
                          replicas=self._replicas)
        try:
            self._client.indices.create(index=index, body=body)
        except TransportError as exc:
            kind = error_type_of(exc)
            if kind == "resource_already_exists_exception":  # another worker was first
                return self._load(alias, base) or self._create(alias, base, truncate_version)
            if kind == "invalid_alias_name_exception":
                raise SinkRejectedError(
                    f"cannot write through alias {alias}: an index has that name; reindex it "
                    "into another index and delete it, or configure another index name"
                ) from exc
            raise translate(exc, f"creating index {index} behind alias {alias}") from exc
        log.info("created index %s behind alias %s", index, alias, extra={"sink": "opensearch"})
        return IndexState(alias, base, index, set(), truncate_version)

    def _next_number(self, base: str) -> int:
        try:
            existing: dict[str, Any] = self._client.indices.get(
                index=f"{base}-*", allow_no_indices=True, expand_wildcards="all")
        except TransportError as exc:
            raise translate(exc, f"listing indices {base}-*") from exc
        pattern = re.compile(re.escape(base) + r"-(\d+)")
        numbers = [int(m.group(1)) for name in existing if (m := pattern.fullmatch(name))]
        return max(numbers, default=0) + 1
