"""A shop's write traffic: sign-ups, orders of one to four items, payments, shipping,
changed, removed and moved items, renamed customers and products, restocks, price changes,
cancellations, account deletions, and one nightly archive (``TRUNCATE order_items,
orders``)."""

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
    items: dict[int, list[int]] = field(default_factory=dict)  # open order → its item ids
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
                    conn.execute("TRUNCATE order_items, orders")
                    self.state.open_orders.clear()
                    self.state.items.clear()
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
        if roll < 0.30:
            self._place_order(conn)
        elif roll < 0.45:
            self._advance_order(conn)
        elif roll < 0.52:
            self._new_customer(conn)
        elif roll < 0.60:
            self._update_customer(conn)
        elif roll < 0.66:
            conn.execute("UPDATE products SET price = round(price * %s, 2) WHERE id = %s",
                         (Decimal(self.rng.choice(("0.90", "0.95", "1.05", "1.10"))),
                          self.rng.choice(self.state.products)))
        elif roll < 0.70:
            conn.execute("UPDATE products SET title = %s WHERE id = %s",
                         (f"Product {self.rng.randint(1, 10**6)}",
                          self.rng.choice(self.state.products)))
        elif roll < 0.74:
            conn.execute("UPDATE products SET stock = stock + %s WHERE id = %s",
                         (self.rng.randint(10, 50), self.rng.choice(self.state.products)))
        elif roll < 0.80:
            self._change_item(conn)
        elif roll < 0.84:
            self._remove_item(conn)
        elif roll < 0.87:
            self._move_item(conn)
        elif roll < 0.92:
            self._cancel_order(conn)
        elif roll < 0.94 and len(self.state.customers) > 20:
            self._close_account(conn)
        else:
            self._new_product(conn)

    def _update_customer(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        customer = self.rng.choice(self.state.customers)
        if self.rng.random() < 0.3:
            conn.execute("UPDATE customers SET name = %s WHERE id = %s",
                         (f"Customer {self.rng.randint(1, 10**6)}", customer))
        else:
            conn.execute("UPDATE customers SET tier = %s, email = %s WHERE id = %s",
                         (self.rng.choice(TIERS), f"user{self.rng.randint(1, 10**6)}@shop.test",
                          customer))

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
        lines: list[tuple[int, int, Decimal]] = []  # product, quantity, price
        for product in self.rng.sample(self.state.products, self.rng.randint(1, 4)):
            quantity = self.rng.randint(1, 4)
            priced = conn.execute("UPDATE products SET stock = stock - %s "
                                  "WHERE id = %s AND stock >= %s RETURNING price",
                                  (quantity, product, quantity)).fetchone()
            if priced is not None:
                lines.append((product, quantity, Decimal(str(priced[0]))))
        if not lines:
            return
        row = conn.execute("INSERT INTO orders (customer_id, product_id, quantity, total, "
                           "status, placed_at) VALUES (%s, %s, %s, %s, 'new', now()) "
                           "RETURNING id",
                           (self.rng.choice(self.state.customers), lines[0][0],
                            sum(quantity for _, quantity, _ in lines),
                            sum(quantity * price for _, quantity, price in lines))).fetchone()
        assert row is not None
        order = int(str(row[0]))
        items = []
        for number, (product, quantity, price) in enumerate(lines, start=1):
            item = conn.execute("INSERT INTO order_items (order_id, product_id, line, quantity, "
                                "price) VALUES (%s, %s, %s, %s, %s) RETURNING id",
                                (order, product, number, quantity, price)).fetchone()
            assert item is not None
            items.append(int(str(item[0])))
        self.state.open_orders[order] = "new"
        self.state.items[order] = items

    def _retotal(self, conn: psycopg.Connection[tuple[object, ...]], order: int) -> None:
        """Bring the order's units and total in line with its items."""
        conn.execute("UPDATE orders o SET quantity = i.quantity, total = i.total FROM "
                     "(SELECT sum(quantity) AS quantity, sum(quantity * price) AS total "
                     " FROM order_items WHERE order_id = %s) i WHERE o.id = %s",
                     (order, order))

    def _pick_item(self, min_items: int) -> tuple[int, int] | None:
        """An open order with at least ``min_items`` items, and one of them."""
        orders = [o for o, items in self.state.items.items() if len(items) >= min_items]
        if not orders:
            return None
        order = self.rng.choice(orders)
        return order, self.rng.choice(self.state.items[order])

    def _change_item(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """A new quantity for an item (stock permitting)."""
        picked = self._pick_item(1)
        if picked is None:
            return
        order, item = picked
        row = conn.execute("SELECT product_id, quantity FROM order_items WHERE id = %s",
                           (item,)).fetchone()
        assert row is not None
        product, old = int(str(row[0])), int(str(row[1]))
        quantity = self.rng.randint(1, 5)
        taken = conn.execute("UPDATE products SET stock = stock - %s "
                             "WHERE id = %s AND stock >= %s RETURNING id",
                             (quantity - old, product, quantity - old)).fetchone()
        if taken is None:
            return
        conn.execute("UPDATE order_items SET quantity = %s WHERE id = %s", (quantity, item))
        self._retotal(conn, order)

    def _remove_item(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """An item taken out of an order that keeps at least one."""
        picked = self._pick_item(2)
        if picked is None:
            return
        order, item = picked
        row = conn.execute("DELETE FROM order_items WHERE id = %s RETURNING product_id, "
                           "quantity", (item,)).fetchone()
        assert row is not None
        conn.execute("UPDATE products SET stock = stock + %s WHERE id = %s", (row[1], row[0]))
        self.state.items[order].remove(item)
        self._retotal(conn, order)

    def _move_item(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """An item moved to another open order, as its last line."""
        picked = self._pick_item(2)
        others = [o for o in self.state.items if picked is None or o != picked[0]]
        if picked is None or not others:
            return
        order, item = picked
        target = self.rng.choice(others)
        conn.execute("UPDATE order_items SET order_id = %s, line = (SELECT max(line) + 1 "
                     "FROM order_items WHERE order_id = %s) WHERE id = %s",
                     (target, target, item))
        self.state.items[order].remove(item)
        self.state.items[target].append(item)
        self._retotal(conn, order)
        self._retotal(conn, target)

    def _advance_order(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        if not self.state.open_orders:
            return
        order = self.rng.choice(list(self.state.open_orders))
        status = STATUSES[STATUSES.index(self.state.open_orders[order]) + 1]
        conn.execute("UPDATE orders SET status = %s WHERE id = %s", (status, order))
        if status == STATUSES[-1]:
            del self.state.open_orders[order]
            del self.state.items[order]
        else:
            self.state.open_orders[order] = status

    def _cancel_order(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        if self.state.open_orders:
            order = self.rng.choice(list(self.state.open_orders))
            conn.execute("DELETE FROM order_items WHERE order_id = %s", (order,))
            conn.execute("DELETE FROM orders WHERE id = %s", (order,))
            del self.state.open_orders[order]
            del self.state.items[order]

    def _close_account(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        customer = self.state.customers.pop(self.rng.randrange(len(self.state.customers)))
        conn.execute("DELETE FROM order_items WHERE order_id IN "
                     "(SELECT id FROM orders WHERE customer_id = %s)", (customer,))
        gone = conn.execute("DELETE FROM orders WHERE customer_id = %s RETURNING id",
                            (customer,)).fetchall()
        for (order,) in gone:
            self.state.open_orders.pop(int(str(order)), None)
            self.state.items.pop(int(str(order)), None)
        conn.execute("DELETE FROM customers WHERE id = %s", (customer,))
