"""Settings of the OpenSearch sink: where the cluster is and which index each table feeds."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Annotated
from urllib.parse import SplitResult, urlsplit, urlunsplit

from pydantic import AfterValidator, Field, SecretStr, model_validator

from cdc.config import (
    DataSize,
    Duration,
    HttpUrl,
    Loc,
    literal_parts,
    raise_field_problems,
    template_validator,
)
from derived import JoinSettings, ViewDefinition, join_problems

INDEX_PLACEHOLDERS = ("prefix", "topic", "schema", "table")
_FORBIDDEN_IN_INDEX = set('\\/*?"<>| ,#:')


def _index_name(template: str) -> str:
    literal = literal_parts(template)
    if not template or template[0] in "-_+" or template in (".", ".."):
        raise ValueError("expected an index name not starting with '-', '_' or '+'")
    if literal != literal.lower() or _FORBIDDEN_IN_INDEX & set(literal):
        raise ValueError("expected a lowercase index name without spaces or any of "
                         '\\ / * ? " < > | , # :')
    return template


IndexTemplate = Annotated[str, template_validator(INDEX_PLACEHOLDERS, "{schema}_{table}"),
                          AfterValidator(_index_name)]


class OpenSearchSinkConfig(JoinSettings):
    """One document per row: id = the row's key, version = its source position."""

    hosts: Annotated[tuple[HttpUrl, ...], Field(min_length=1)] = Field(
        description="cluster nodes, like https://search-1:9200; with several, a request a "
        "node does not answer goes to the next one")
    username: str | None = Field(default=None, description="basic-auth user")
    password: SecretStr | None = Field(default=None, description="basic-auth password")
    index: IndexTemplate = Field(default="{table}", description="index per topic; placeholders: "
                                 "{prefix} {topic} {schema} {table}")
    alias: IndexTemplate | None = Field(
        default=None,
        description="write through this alias, so a rebuild can swap the index under it")
    bulk_size: int = Field(default=500, ge=1, le=100_000, description="actions per bulk request")
    bulk_max_bytes: DataSize = Field(default=5 * 1024**2, description="bytes per bulk request")
    bulk_concurrency: int = Field(
        default=2, ge=1, le=32,
        description="bulk requests a batch sends at once (a batch of 200 actions or more is "
        "split among them): a shard indexes one request on one thread, so more use more "
        "of the cluster's cores; 1 sends one at a time")
    verify_certs: bool = Field(default=True, description="check the cluster's TLS certificate")
    ca_certs: Path | None = Field(default=None, description="a CA bundle to trust (PEM file)")
    request_timeout: Duration = Field(default=timedelta(seconds=30), description="per request")
    replicas: int | None = Field(
        default=None, ge=0, le=16,
        description="number_of_replicas of the indices the sink creates (default: the "
        "cluster's, 1 unless changed); 1 on a cluster of two or more nodes keeps every "
        "shard writable while one node is down")
    tombstone_retention: Duration = Field(
        default=timedelta(hours=1),
        description="how long a deleted document's version is remembered (index.gc_deletes), "
        "so a replayed older write cannot bring it back; longer costs heap per delete")
    views: tuple[ViewDefinition, ...] = Field(
        default=(), description="derived views; a view's target is the alias its table's "
        "documents go to; tables without a view are indexed as they are")

    @model_validator(mode="after")
    def _consistent(self) -> OpenSearchSinkConfig:
        problems: list[tuple[Loc, str, object]] = host_problems(self.hosts)
        if (self.username is None) != (self.password is None):
            missing = "password" if self.password is None else "username"
            problems.append(((missing,), "required when "
                             f"{'username' if missing == 'password' else 'password'} is set", None))
        if self.ca_certs is not None and not self.verify_certs:
            problems.append((("ca_certs",), "only used when verify_certs is true", None))
        if self.alias is not None and self.alias == self.index:
            problems.append((("alias",), "must differ from index: an alias and an index "
                             "cannot share a name", self.alias))
        targets: set[str] = set()
        for number, view in enumerate(self.views):
            if view.target in targets:
                problems.append((("views", number, "target"), "another view already writes "
                                 f"{view.target!r}; give each view its own target", view.target))
            targets.add(view.target)
            if view.key_template is not None:
                problems.append((("views", number, "key_template"), "only used by the redis "
                                 "sink; remove it", view.key_template))
        problems.extend(join_problems(self.views, self.joins))
        problems.extend((("joins", number, "key_template"), "only used by the redis sink; "
                         "remove it", join.key_template)
                        for number, join in enumerate(self.joins) if join.key_template)
        if problems:
            raise_field_problems("OpenSearchSinkConfig", problems)
        return self


def host_problems(hosts: Sequence[str]) -> list[tuple[Loc, str, object]]:
    """What is wrong with the ``hosts`` list, each with its place and the fix: nodes of
    one cluster share a scheme, each is listed once, and carries neither credentials
    (``username``/``password``), a query nor a fragment. A path prefix (a proxy's) is
    kept, but must be the same for every node."""
    problems: list[tuple[Loc, str, object]] = []
    seen: dict[tuple[str, int], int] = {}
    parts = [urlsplit(host) for host in hosts]
    for number, part in enumerate(parts):
        shown = _without_credentials(part)
        if part.username is not None or part.password is not None:
            problems.append((("hosts", number), "credentials do not belong in the URL; set "
                             "username and password instead", shown))
        if part.query or part.fragment:
            problems.append((("hosts", number), "a node's URL takes no query or fragment; "
                             "remove what follows '?' or '#'", shown))
        default_port = 443 if part.scheme == "https" else 9200
        address = ((part.hostname or "").lower(), part.port or default_port)
        if address in seen:
            problems.append((("hosts", number), f"the same node as hosts[{seen[address]}]; "
                             "list each node once", shown))
        seen.setdefault(address, number)
        if part.scheme != parts[0].scheme:
            problems.append((("hosts", number), f"every node of a cluster takes the same "
                             f"scheme; hosts[0] uses {parts[0].scheme}://", shown))
        if part.path.rstrip("/") != parts[0].path.rstrip("/"):
            problems.append((("hosts", number), "every node takes the same path prefix as "
                             f"hosts[0] ({parts[0].path or '/'})", shown))
    return problems


def _without_credentials(part: SplitResult) -> str:
    """The URL as written, its userinfo replaced by ``***`` (never echoed)."""
    if part.username is None and part.password is None:
        return urlunsplit(part)
    netloc = "***@" + part.netloc.rpartition("@")[2]
    return urlunsplit(part._replace(netloc=netloc))
