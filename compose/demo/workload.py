"""A shop's write traffic: sign-ups, orders, payments, shipping, restocks, price changes,
cancellations, account deletions, and one nightly archive (``TRUNCATE orders``)."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal

import psycopg

STATUSES = ("new", "paid", "shipped", "delivered")
TIERS = ("basic", "silver", "gold")


@dataclass
class ShopState:
    """The ids the workload knows exist (it is the only writer)."""

    customers: list[int] = field(default_factory=list)
    products: list[int] = field(default_factory=list)
    open_orders: dict[int, str] = field(default_factory=dict)
    transactions: int = 0


class ShopWorkload:
    """Drives ``rate`` transactions per second against ``dsn`` until a deadline."""

    def __init__(self, dsn: str, *, rate: float = 40.0, seed: int = 9) -> None:
        self.dsn = dsn
        self.rate = rate
        self.rng = random.Random(seed)
        self.state = ShopState()

    def run(self, duration: float, stop: threading.Event) -> None:
        """Seed the shop, then write for ``duration`` s (or until ``stop`` is set)."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            self._seed(conn)
            start = time.monotonic()
            archived = False
            while not stop.is_set():
                elapsed = time.monotonic() - start
                if elapsed >= duration:
                    break
                if not archived and elapsed >= duration / 2:
                    conn.execute("TRUNCATE orders")
                    self.state.open_orders.clear()
                    archived = True
                else:
                    with conn.transaction():
                        self._step(conn)
                self.state.transactions += 1
                stop.wait(max(0.0, (self.state.transactions / self.rate) - elapsed))

    def _seed(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        with conn.transaction():
            for _ in range(40):
                self._new_customer(conn)
            for _ in range(25):
                self._new_product(conn)
        self.state.transactions += 1

    def _step(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        roll = self.rng.random()
        if roll < 0.35:
            self._place_order(conn)
        elif roll < 0.55:
            self._advance_order(conn)
        elif roll < 0.65:
            self._new_customer(conn)
        elif roll < 0.75:
            conn.execute("UPDATE customers SET tier = %s, email = %s WHERE id = %s",
                         (self.rng.choice(TIERS), f"user{self.rng.randint(1, 10**6)}@shop.test",
                          self.rng.choice(self.state.customers)))
        elif roll < 0.83:
            conn.execute("UPDATE products SET price = round(price * %s, 2) WHERE id = %s",
                         (Decimal(self.rng.choice(("0.90", "0.95", "1.05", "1.10"))),
                          self.rng.choice(self.state.products)))
        elif roll < 0.90:
            conn.execute("UPDATE products SET stock = stock + %s WHERE id = %s",
                         (self.rng.randint(10, 50), self.rng.choice(self.state.products)))
        elif roll < 0.95:
            self._cancel_order(conn)
        elif roll < 0.97 and len(self.state.customers) > 20:
            self._close_account(conn)
        else:
            self._new_product(conn)

    def _new_customer(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        number = self.rng.randint(1, 10**6)
        row = conn.execute("INSERT INTO customers (name, email, tier, created_at) "
                           "VALUES (%s, %s, %s, now()) RETURNING id",
                           (f"Customer {number}", f"user{number}@shop.test",
                            self.rng.choice(TIERS))).fetchone()
        assert row is not None
        self.state.customers.append(int(str(row[0])))

    def _new_product(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        number = self.rng.randint(1, 10**6)
        row = conn.execute("INSERT INTO products (sku, title, price, stock) "
                           "VALUES (%s, %s, %s, %s) RETURNING id",
                           (f"SKU-{number}-{len(self.state.products)}", f"Product {number}",
                            f"{self.rng.uniform(2, 200):.2f}", self.rng.randint(20, 200))
                           ).fetchone()
        assert row is not None
        self.state.products.append(int(str(row[0])))

    def _place_order(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        quantity = self.rng.randint(1, 4)
        product = self.rng.choice(self.state.products)
        priced = conn.execute("UPDATE products SET stock = stock - %s "
                              "WHERE id = %s AND stock >= %s RETURNING price",
                              (quantity, product, quantity)).fetchone()
        if priced is None:
            return
        row = conn.execute("INSERT INTO orders (customer_id, product_id, quantity, total, "
                           "status, placed_at) VALUES (%s, %s, %s, %s * %s, 'new', now()) "
                           "RETURNING id",
                           (self.rng.choice(self.state.customers), product, quantity,
                            priced[0], quantity)).fetchone()
        assert row is not None
        self.state.open_orders[int(str(row[0]))] = "new"

    def _advance_order(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        if not self.state.open_orders:
            return
        order = self.rng.choice(list(self.state.open_orders))
        status = STATUSES[STATUSES.index(self.state.open_orders[order]) + 1]
        conn.execute("UPDATE orders SET status = %s WHERE id = %s", (status, order))
        if status == STATUSES[-1]:
            del self.state.open_orders[order]
        else:
            self.state.open_orders[order] = status

    def _cancel_order(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        if self.state.open_orders:
            order = self.rng.choice(list(self.state.open_orders))
            conn.execute("DELETE FROM orders WHERE id = %s", (order,))
            del self.state.open_orders[order]

    def _close_account(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        customer = self.state.customers.pop(self.rng.randrange(len(self.state.customers)))
        gone = conn.execute("DELETE FROM orders WHERE customer_id = %s RETURNING id",
                            (customer,)).fetchall()
        for (order,) in gone:
            self.state.open_orders.pop(int(str(order)), None)
        conn.execute("DELETE FROM customers WHERE id = %s", (customer,))
