"""The optional extras of the ``distributary`` package, and the error a missing one gives.

A command or sink that needs an extra imports its library lazily; when the import fails
with ``ModuleNotFoundError``, :func:`missing_extra` names the extra to install, so the
user sees one line (``pip install 'distributary[spark]'``) instead of a traceback.
"""

from __future__ import annotations

# top-level module -> the extra of pyproject.toml that installs it
EXTRA_OF_MODULE = {
    "pyspark": "spark",
    "redis": "redis",
    "opensearchpy": "opensearch",
    "confluent_kafka": "kafka",
}


def install_hint(extra: str) -> str:
    """The pip command that installs ``extra``."""
    return f"pip install 'distributary[{extra}]'"


def missing_extra(error: BaseException | None) -> str | None:
    """The extra whose absence caused ``error`` (an import error, or one raised from it)."""
    while error is not None:
        if isinstance(error, ModuleNotFoundError) and error.name:
            return EXTRA_OF_MODULE.get(error.name.split(".", 1)[0])
        error = error.__cause__
    return None


class MissingExtraError(ImportError):
    """What was asked for needs an optional extra that is not installed.

    An ``ImportError`` (not a ``DistributaryError``): it is a matter of the installation,
    which no retry or error policy changes. The ``cdc`` command prints the message as one
    line and exits with status 2.
    """

    def __init__(self, what: str, extra: str) -> None:
        self.extra = extra
        super().__init__(f"{what} needs the {extra} extra: {install_hint(extra)}")
