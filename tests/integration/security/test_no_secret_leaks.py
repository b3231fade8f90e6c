"""Every ``cdc`` command, run with known secrets — PostgreSQL passwords (password_file and
inline in the DSN), OpenSearch basic auth (from the environment), a Redis ACL user's
password in the URL, the webhook's signing secret and a secret header — succeeding and
failing (wrong host, wrong password, bad config, broken YAML). No secret may appear in
any output, in the event log (dead letters included) or in the servers' logs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import click
import psycopg
import pytest
import redis
from psycopg import sql

from compose.launcher import PostgresServer, RedisServer, free_port
from tests.integration.connectors.webhook_receiver import Receiver, webhook_receiver

from .cli import Run, cdc, cdc_for, cdc_until

FILE_PASSWORD = "pgFile-Leak-4417"
DSN_PASSWORD = "pgDsn-Leak-7731"
WRONG_PASSWORD = "pgWrong-Leak-3390"
OPENSEARCH_PASSWORD = "osBasic-Leak-9034"
REDIS_PASSWORD = "redisAcl-Leak-2210"
SIGNING_SECRET = "hookSign-Leak-6652"
HEADER_SECRET = "hookHeader-Leak-1187"
SECRETS = (FILE_PASSWORD, DSN_PASSWORD, WRONG_PASSWORD, OPENSEARCH_PASSWORD, REDIS_PASSWORD,
           SIGNING_SECRET, HEADER_SECRET)
ENV = {"LEAK_OPENSEARCH_PASSWORD": OPENSEARCH_PASSWORD}


@dataclass(frozen=True)
class Stack:
    postgres: PostgresServer
    redis: RedisServer
    opensearch_url: str
    receiver: Receiver


@pytest.fixture(scope="module")
def stack(opensearch_url: str) -> Iterator[Stack]:
    with PostgresServer(password_auth=True) as pg, RedisServer() as rds, \
            webhook_receiver() as receiver:
        with psycopg.connect(pg.dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE leakdb")
            for role, password in (("leak_file", FILE_PASSWORD), ("leak_dsn", DSN_PASSWORD)):
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN REPLICATION PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(password)))
        with psycopg.connect(pg.dsn("leakdb"), autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
            conn.execute("INSERT INTO items SELECT i, 'item ' || i FROM generate_series(1, 20) i")
            conn.execute("GRANT SELECT ON items TO leak_file, leak_dsn")
            conn.execute("CREATE PUBLICATION leak_pub FOR TABLE items")
        client = redis.Redis.from_url(rds.url)
        client.execute_command("ACL", "SETUSER", "cdc", "on", f">{REDIS_PASSWORD}", "~*", "&*",
                               "+@all")  # type: ignore[no-untyped-call]
        client.close()
        yield Stack(pg, rds, opensearch_url, receiver)


def connectors_yaml(stack: Stack, *, redis_port: int | None = None) -> str:
    port = redis_port or stack.redis.port
    return f"""connectors:
  - name: search
    type: opensearch
    topics: [leak.public.items]
    config:
      hosts: ['{stack.opensearch_url}']
      username: admin
      password: ${{LEAK_OPENSEARCH_PASSWORD}}
      index: leak_items
  - name: cache
    type: redis
    topics: [leak.public.items]
    config:
      url: redis://cdc:{REDIS_PASSWORD}@127.0.0.1:{port}/0
      key_template: "leak:{{table}}:{{key}}"
  - name: hook
    type: webhook
    topics: [leak.public.items]
    config:
      url: {stack.receiver.url}
      signing_secret: {SIGNING_SECRET}
      headers: {{Authorization: 'Bearer {HEADER_SECRET}'}}
"""


def write_configs(stack: Stack, directory: Path) -> dict[str, Path]:
    """One pipeline file per scenario (the only files allowed to hold secrets)."""
    (directory / "pg-password").write_text(FILE_PASSWORD + "\n")
    closed = free_port()
    pg = f"127.0.0.1:{stack.postgres.port}"
    log = "log:\n  backend: file\n  path: {log}\n  topic_prefix: leak\n"
    source = ("source:\n  dsn: {dsn}\n{extra}  slot: {slot}\n  publication: leak_pub\n"
              "  tables: [public.items]\n")
    texts = {
        "good": source.format(dsn=f"postgresql://leak_file@{pg}/leakdb", slot="leak_good",
                              extra=f"  password_file: {directory / 'pg-password'}\n")
        + log + connectors_yaml(stack),
        "inline": source.format(dsn=f"postgresql://leak_dsn:{DSN_PASSWORD}@{pg}/leakdb",
                                slot="leak_inline", extra="") + log,
        "wrong_host": source.format(
            dsn=f"'host=127.0.0.1 port={closed} dbname=leakdb user=leak_dsn "
            f"password={DSN_PASSWORD} connect_timeout=2'", slot="leak_host", extra="")
        + log + connectors_yaml(stack, redis_port=closed),
        "wrong_password": source.format(
            dsn=f"postgresql://leak_dsn:{WRONG_PASSWORD}@{pg}/leakdb", slot="leak_wrong",
            extra="") + log,
        "bad_config": source.format(dsn=f"postgresql://leak_dsn:{DSN_PASSWORD}@{pg}:x/leakdb",
                                    slot="leak_bad", extra=f"  pasword: {FILE_PASSWORD}\n")
        + log + connectors_yaml(stack).replace("redis://cdc", "http://cdc")
        .replace("index: leak_items", f"index: Bad {OPENSEARCH_PASSWORD}"),
        "broken_yaml": "source:\n  dsn: postgresql://leak_dsn@host/db\n"
        f"  password: \"{DSN_PASSWORD}\n  slot: [x\n",
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = directory / f"{name}.yaml"
        paths[name].write_text(text.replace("{log}", str(directory / name / "log")))
    return paths


def leaf_commands() -> set[str]:
    """Every runnable command path of ``cdc`` (``log dump``, ``replay materialize`` …)."""
    from cdc.cli import main

    found: set[str] = set()

    def walk(group: click.Group, prefix: str) -> None:
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                walk(command, f"{prefix}{name} ")
            else:
                found.add(f"{prefix}{name}")

    walk(main, "")
    return found


def invocations(config: Path, *, full: bool) -> list[tuple[float | None, tuple[str, ...]]]:
    """(seconds to run before SIGTERM, or None: until it exits; arguments). The seconds
    are no wait for anything: what a command prints in them is checked for secrets."""
    c = ("-c", str(config))
    short = [(None, ("validate", *c)), (None, ("doctor", *c)), (4.0, ("capture", *c)),
             (4.0, ("connect", *c)), (4.0, ("run", *c)), (None, ("log", "topics", *c)),
             (None, ("snapshot", "--table", "public.items", *c))]
    if not full:
        return short
    return [*short,
            (None, ("log", "stats", *c)), (None, ("log", "verify", *c)),
            (None, ("log", "dump", "leak.public.items", *c)),
            (3.0, ("log", "tail", "leak.public.items", "--from", "earliest", *c)),
            (None, ("log", "repair", *c)), (None, ("snapshot", "--status", *c)),
            (None, ("replay", "materialize", "--master", "local[1]", "--no-progress", *c)),
            (None, ("replay", "state-as-of", "--as-of", "not-a-time", *c)),
            (None, ("config-schema",))]


def run_one(seconds: float | None, args: tuple[str, ...]) -> Run:
    if seconds is None:
        return cdc(*args, env=ENV, timeout=300)
    return cdc_for(seconds, *args, env=ENV)


def test_no_command_shows_a_secret(stack: Stack, tmp_path: Path) -> None:
    configs = write_configs(stack, tmp_path)
    plans = {name: invocations(path, full=name in ("good", "bad_config"))
             for name, path in configs.items()}
    plan = [step for steps in plans.values() for step in steps]
    covered = {" ".join(a for a in args if not a.startswith("-") and "/" not in a
                        and a not in ("leak.public.items", "earliest", "not-a-time",
                                      "public.items")
                        and not a.startswith("local"))
               for _, args in plan}
    for command in sorted(leaf_commands() - covered):  # added later: run with -c alone
        spark_job = command.startswith("replay ")  # one Spark run (materialize) is enough
        for name in ("bad_config",) if spark_job else ("good", "bad_config"):
            plans[name].append((4.0, (*command.split(), "-c", str(configs[name]))))

    # Most of the time is start-up (the machine's cores are the limit). The other
    # scenarios have their own slots and logs: they run while a first capture fills the
    # good one's log, so that its log and replay commands have data to show; then the
    # good one's commands, its Spark run (the longest) first.
    with ThreadPoolExecutor(max_workers=3) as beside, \
            ThreadPoolExecutor(max_workers=3) as after:
        others = [beside.submit(run_one, *step)
                  for name, steps in plans.items() if name != "good" for step in steps]
        first = cdc_until(lambda _: set(range(1, 21)) <= set(stack.receiver.accepted_keys()),
                          "the webhook receives the 20 rows", "run", "-c",
                          str(configs["good"]), env=ENV)
        spark_first = sorted(plans["good"],
                             key=lambda step: step[1][:2] != ("replay", "materialize"))
        runs = [first, *after.map(lambda step: run_one(*step), spark_first),
                *(other.result() for other in others)]

    by_args = {r.args: r for r in runs}
    good = str(configs["good"])
    assert by_args[("validate", "-c", good)].stdout.strip() == "ok"
    assert stack.receiver.requests, "the webhook received batches (its secret was used)"
    for name in ("wrong_host", "wrong_password", "bad_config", "broken_yaml"):
        failed = by_args[("doctor", "-c", str(configs[name]))]
        assert failed.returncode != 0, failed.output
    assert "password authentication failed" in by_args[
        ("doctor", "-c", str(configs["wrong_password"]))].stderr

    leaks = [(secret, " ".join(run.args), run.output[max(0, run.output.find(secret) - 200):]
              [:400]) for run in runs for secret in SECRETS if secret in run.output]
    assert not leaks, leaks
    config_files = {*configs.values(), tmp_path / "pg-password"}
    written = [path for path in tmp_path.rglob("*") if path.is_file()
               and path not in config_files]
    written += [stack.postgres.log_path, stack.redis.log_path]
    assert any("log" in path.parts for path in written), "the event log was written"
    for path in written:
        text = path.read_bytes().decode("utf-8", "replace")
        assert not [s for s in SECRETS if s in text], f"a secret in {path}"
    assert os.environ.get("LEAK_OPENSEARCH_PASSWORD") is None
