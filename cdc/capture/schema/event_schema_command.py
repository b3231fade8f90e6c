"""``cdc event-schema``: print the change event's JSON Schema (``event_schema``)."""

from __future__ import annotations

import json

import click

from .event_schema import EVENT_JSON_SCHEMA


@click.command("event-schema")
def event_schema() -> None:
    """Print the JSON Schema of the events the capture writes (for consumers and CI).

    \b
    Example:
      cdc event-schema > event.schema.json
    """
    click.echo(json.dumps(EVENT_JSON_SCHEMA, indent=2))
