"""Derived views: declarative definitions shared by the streaming sinks and Spark rebuilds.

A :class:`ViewDefinition` (validated from a connector's ``views:`` list) says which table
feeds which derived record, which columns it copies (``fields``/``exclude``), under which
names (``rename``), which fields it computes and which rows it keeps (``filter``).
:func:`apply_view` is the one implementation: a sink applies it to each event's new row,
a Spark rebuild to each row of the materialized table, so the two cannot disagree.
Unchanged TOAST columns (an update did not resend them) are filled by one rule,
:func:`fill_unchanged` (``derived.toast``).

Expressions are a small, safe subset of Spark SQL, parsed here and evaluated in Python
(never ``eval``): column names (``amount``, or ```odd name```), literals (``42``,
``1.50`` exact, ``1e3`` floating, ``'text'`` with ``''`` for a quote, ``TRUE``,
``FALSE``, ``NULL``), ``+ - * /``, comparisons ``= != <> < <= > >=``, ``AND OR NOT``,
``IS [NOT] NULL``, ``[NOT] IN (...)``, and the functions ``concat``, ``concat_ws``,
``coalesce``, ``lower``, ``upper``, ``trim``, ``length``. ``numeric`` columns (exact
text in events) take part in arithmetic as exact decimals, and computed decimals are
written back as exact text. See ``derived.values`` and ``derived.evaluate``.

The syntax reads like Spark SQL, but the semantics are this package's (``7 / 2`` is the
exact ``3.5``, not a double; numeric text is a decimal): a Spark rebuild applies views
with ``apply_view`` (in ``mapInPandas`` or a Python UDF), never by handing the text to
Spark SQL, so the rebuilt records equal the streamed ones by construction.
"""

from .apply import (
    Record,
    UnchangedPlan,
    apply_view,
    apply_view_keeping,
    plan_unchanged,
    recover_columns,
)
from .evaluate import compile_expression
from .join_build import (
    JoinRows,
    RowsInMemory,
    build_record,
    build_records,
    join_values,
    sort_value,
)
from .joins import JoinedTable, JoinedView, JoinLevel, JoinSettings, join_problems
from .keys import encode_key, key_text
from .syntax import ExpressionError, columns_of, parse_expression
from .toast import Completed, Filled, complete_record, fill_unchanged
from .view import KEY_PLACEHOLDERS, ViewDefinition

__all__ = [
    "KEY_PLACEHOLDERS",
    "Completed",
    "ExpressionError",
    "Filled",
    "JoinLevel",
    "JoinRows",
    "JoinSettings",
    "JoinedTable",
    "JoinedView",
    "Record",
    "RowsInMemory",
    "UnchangedPlan",
    "ViewDefinition",
    "apply_view",
    "apply_view_keeping",
    "build_record",
    "build_records",
    "columns_of",
    "compile_expression",
    "complete_record",
    "encode_key",
    "fill_unchanged",
    "join_problems",
    "join_values",
    "key_text",
    "parse_expression",
    "plan_unchanged",
    "recover_columns",
    "sort_value",
]
