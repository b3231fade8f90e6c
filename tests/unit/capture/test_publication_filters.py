"""Column lists and row filters of publications (pure logic): how several publications
combine, which columns pgoutput sends on each version, and the snapshot's queries."""

from __future__ import annotations

import itertools

from cdc.capture.snapshot.catalog import PageRange, page_ranges, snapshot_query
from cdc.capture.snapshot.chunks import ChunkKey, KeyColumn, chunk_query
from cdc.capture.source.publication_filters import (
    EVERYTHING,
    PublishedTable,
    column_published,
    combine,
)


def test_one_publication_keeps_its_list_and_filter() -> None:
    assert combine([(["id", "a"], "(a > 10)")]) == \
        PublishedTable(frozenset({"id", "a"}), "(a > 10)")


def test_several_publications_union_columns_and_or_filters() -> None:
    combined = combine([(["id", "a"], "(a > 10)"), (["id", "b"], "(b = 'x')")])
    assert combined == PublishedTable(frozenset({"id", "a", "b"}),
                                      "((a > 10)) OR ((b = 'x'))")


def test_a_publication_without_filter_publishes_every_row() -> None:
    assert combine([(["id"], "(a > 10)"), (["id", "a"], None)]).row_filter is None
    assert combine([(None, "(a > 10)"), (["id"], "(a > 10)")]) == \
        PublishedTable(None, "(a > 10)")  # the same filter twice is one


def test_generated_columns_are_sent_on_18_only_when_published_and_stored() -> None:
    listed = PublishedTable(frozenset({"id", "g"}), None)
    assert column_published(listed, "g", "s", 180001)
    assert not column_published(listed, "g", "s", 170006)  # 15-17 never send them
    assert not column_published(listed, "g", "v", 180001)  # virtual: never
    assert not column_published(EVERYTHING, "g", "s", 180001)  # not published
    assert column_published(EVERYTHING, "b", "", 130000)
    assert not column_published(listed, "b", "", 180001)  # left out of the list


def test_snapshot_query_applies_the_row_filter() -> None:
    assert snapshot_query("public", "t", ("id", "a"), None).as_string(None) == \
        'SELECT "id", "a" FROM "public"."t"'
    assert snapshot_query("public", "t", ("id",), "(a ~~ 'x%'::text)").as_string(None) == \
        'SELECT "id" FROM "public"."t" WHERE ((a ~~ \'x%\'::text))'


def test_snapshot_query_reads_a_page_range_with_the_row_filter() -> None:
    ranged = snapshot_query("public", "t", ("id",), "(a > 1)", PageRange(10, 20))
    assert ranged.as_string(None) == ('SELECT "id" FROM "public"."t" WHERE ((a > 1)) AND '
                                      "ctid >= '(10,0)'::tid AND ctid < '(20,0)'::tid")
    last = snapshot_query("public", "t", ("id",), None, PageRange(20, None))
    assert last.as_string(None) == 'SELECT "id" FROM "public"."t" WHERE ctid >= \'(20,0)\'::tid'


def test_a_big_table_is_cut_into_ranges_covering_every_page() -> None:
    assert page_ranges(100 * 8192, 8192, 1 << 20) == [PageRange(0, None)]  # not bigger
    assert page_ranges(1 << 20, 8192, 1 << 20) == [PageRange(0, None)]
    ranges = page_ranges(1000 * 8192, 8192, 100 * 8192)
    assert len(ranges) == 10 and ranges[0].first == 0 and ranges[-1].end is None
    assert all(a.end == b.first for a, b in itertools.pairwise(ranges))
    uneven = page_ranges(1001 * 8192, 8192, 100 * 8192)
    assert len(uneven) == 11 and uneven[-1].end is None
    assert all(a.end == b.first for a, b in itertools.pairwise(uneven))


def test_chunk_query_ands_the_row_filter_with_the_operators_filter() -> None:
    key = ChunkKey((KeyColumn("id", "pg_catalog", "int4"),), "t_pkey")
    query, params = chunk_query("public", "t", ("id", "a"), key, ("7",), "a < 100", 10,
                                "(a ~~ 'x%'::text)")
    assert query.as_string(None) == (
        'SELECT CASE WHEN "id" IS NULL THEN NULL ELSE format(\'%%s\', "id") END, '
        'CASE WHEN "a" IS NULL THEN NULL ELSE format(\'%%s\', "a") END '
        'FROM "public"."t" WHERE ((a ~~ \'x%%\'::text)) AND '
        '("id") > (CAST(%s AS "pg_catalog"."int4")) AND (a < 100) ORDER BY "t"."id" '
        "LIMIT 10")
    assert params == ["7"]
