"""Which errors mean "a catalog query raced DDL", and how ``outlast_ddl`` asks again."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from cdc.capture.source.ddl_race import CatalogRaceError, outlast_ddl, raced_ddl
from cdc.errors import SourceError


@pytest.mark.parametrize("exc", [
    errors.InternalError_("could not open relation with OID 16385"),
    errors.InternalError_("cache lookup failed for relation 16390"),
    errors.InternalError_("cache lookup failed for type 16401"),
    errors.InternalError_("tuple concurrently updated"),
    errors.UndefinedTable('relation "public.t" does not exist'),
    errors.DeadlockDetected("deadlock detected"),
])
def test_races_with_ddl_are_recognised(exc: psycopg.Error) -> None:
    assert raced_ddl(exc)


@pytest.mark.parametrize("exc", [
    errors.InternalError_("invalid memory alloc request size 1073741824"),
    errors.InsufficientPrivilege("permission denied for table t"),
    errors.SyntaxError("syntax error at or near \"WHERE\""),
    errors.UndefinedColumn('column "nope" does not exist'),
    psycopg.OperationalError("server closed the connection unexpectedly"),
    ValueError("not a database error"),
])
def test_other_errors_are_not(exc: Exception) -> None:
    assert not raced_ddl(exc)


def test_a_raced_read_is_asked_again_until_it_answers() -> None:
    answers: list[Exception | str] = [
        errors.InternalError_("could not open relation with OID 16385"),
        errors.UndefinedTable('relation "t" does not exist'), "rows"]
    waits: list[float] = []

    def read() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert outlast_ddl(read, what="listing tables", sleep=waits.append) == "rows"
    assert waits == [0.01, 0.02]  # growing backoff between the attempts


def test_any_other_error_is_raised_at_once() -> None:
    calls = 0

    def read() -> None:
        nonlocal calls
        calls += 1
        raise errors.InsufficientPrivilege("permission denied for table t")

    with pytest.raises(errors.InsufficientPrivilege):
        outlast_ddl(read, what="listing tables", sleep=lambda _: None)
    assert calls == 1


def test_a_read_racing_past_its_budget_ends_the_session_with_a_clear_error() -> None:
    def read() -> None:
        raise errors.InternalError_("could not open relation with OID 16385")

    with pytest.raises(CatalogRaceError) as raised:
        outlast_ddl(read, what="listing the tables of publication p", budget_s=0.0,
                    sleep=lambda _: None)
    assert isinstance(raised.value, SourceError)  # the capture reconnects on it
    message = str(raised.value)
    assert message.startswith("listing the tables of publication p kept failing against "
                              "concurrent DDL for 0 s (1 attempts")
    assert "could not open relation with OID 16385" in message
    assert isinstance(raised.value.__cause__, errors.InternalError_)
