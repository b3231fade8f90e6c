"""The demo's shop: customers, products, orders and their items, defined with SQLAlchemy
Core.

Each column has a *kind* so every copy of a row (PostgreSQL, the event JSON in OpenSearch
and Redis, the Spark output) can be brought to one comparable form.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

metadata = sa.MetaData()

customers = sa.Table(
    "customers", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("email", sa.Text, nullable=False),
    sa.Column("tier", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

products = sa.Table(
    "products", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("sku", sa.Text, nullable=False, unique=True),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("price", sa.Numeric(10, 2), nullable=False),
    sa.Column("stock", sa.Integer, nullable=False),
)

orders = sa.Table(
    "orders", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("customer_id", sa.Integer,
              sa.ForeignKey("customers.id", ondelete="CASCADE"), nullable=False),
    sa.Column("product_id", sa.Integer, sa.ForeignKey("products.id"), nullable=False),
    sa.Column("quantity", sa.Integer, nullable=False),
    sa.Column("total", sa.Numeric(12, 2), nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("placed_at", sa.DateTime(timezone=True), nullable=False),
)

# An order's lines; ``orders.product_id`` and ``quantity`` keep its first product and its
# units in all, ``orders.total`` the sum of ``quantity * price`` (the workload keeps them).
order_items = sa.Table(
    "order_items", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("order_id", sa.Integer,
              sa.ForeignKey("orders.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("product_id", sa.Integer, sa.ForeignKey("products.id"), nullable=False),
    sa.Column("line", sa.Integer, nullable=False),
    sa.Column("quantity", sa.Integer, nullable=False),
    sa.Column("price", sa.Numeric(10, 2), nullable=False),
)

TABLES: tuple[sa.Table, ...] = (customers, products, orders, order_items)

Row = dict[str, Any]


def create_schema(dsn: str) -> None:
    """Create the shop's tables in the database ``dsn`` names (a libpq URL)."""
    engine = sa.create_engine(sqlalchemy_url(dsn))
    try:
        metadata.create_all(engine)
    finally:
        engine.dispose()


def sqlalchemy_url(dsn: str) -> str:
    """``postgresql://…`` as SQLAlchemy's URL for psycopg 3."""
    return "postgresql+psycopg://" + dsn.split("://", 1)[1]


def normalize(table: sa.Table, row: Mapping[str, Any]) -> Row:
    """``row`` with every value in one comparable form (Decimal, aware UTC datetime, …)."""
    out: Row = {}
    for column in table.columns:
        value = row.get(column.name)
        if value is None:
            out[column.name] = None
        elif isinstance(column.type, sa.Numeric):
            out[column.name] = Decimal(str(value))
        elif isinstance(column.type, sa.DateTime):
            moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
            out[column.name] = moment.astimezone(UTC)
        elif isinstance(column.type, sa.Integer):
            out[column.name] = int(value)
        else:
            out[column.name] = str(value)
    return out


def key_of(table: sa.Table, row: Mapping[str, Any]) -> str:
    """The row's primary key as text (the document id and Redis key part)."""
    return ":".join(str(row[c.name]) for c in table.primary_key.columns)


def read_postgres(dsn: str) -> dict[str, dict[str, Row]]:
    """Every row of every shop table, normalized, by table and key."""
    engine = sa.create_engine(sqlalchemy_url(dsn))
    try:
        with engine.connect() as conn:
            found: dict[str, dict[str, Row]] = {}
            for table in TABLES:
                rows = [dict(m) for m in conn.execute(sa.select(table)).mappings()]
                found[table.name] = {key_of(table, r): normalize(table, r) for r in rows}
            return found
    finally:
        engine.dispose()
