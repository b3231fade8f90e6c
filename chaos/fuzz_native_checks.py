"""What every native fuzz target checks of an error: a Rust panic (PyO3's
``PanicException``, a ``BaseException``) must never reach Python, and a ``DecodeError``
must say where (message type, offset inside the payload, reason). And the native core a
target is given (``Core``), which the product's native paths call while it runs
(``calling``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeAlias, TypeVar

from cdc.capture.snapshot import native as snapshot_native
from cdc.capture.stream import native as stream_native
from cdc.errors import DecodeError

T = TypeVar("T")

Core: TypeAlias = Any
"""The native core a fuzz target calls: ``cdc.native.CORE`` (the module
``distributary_native``), or a stand-in with its functions (a test's counting proxy)."""


@contextmanager
def calling(core: Core) -> Iterator[None]:
    """While in the block, the product's native snapshot and stream paths
    (``NativeTable``, ``NativeChanges``) call ``core`` instead of ``cdc.native.CORE``."""
    namespaces = [vars(snapshot_native), vars(stream_native)]
    saved = [namespace["CORE"] for namespace in namespaces]
    for namespace in namespaces:
        namespace["CORE"] = core
    try:
        yield
    finally:
        for namespace, before in zip(namespaces, saved, strict=True):
            namespace["CORE"] = before


class NativeFault(AssertionError):
    """The native core crashed into Python (a panic) or raised something untyped."""


def native_call(name: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)``; a panic or a bare ``BaseException`` becomes a
    ``NativeFault`` naming ``name`` (ordinary exceptions pass through, to be compared)."""
    try:
        return function(*args, **kwargs)
    except Exception as error:
        if type(error).__name__ == "PanicException":
            raise NativeFault(f"native {name} panicked: {error!r}") from error
        if not str(error):
            raise NativeFault(f"native {name} raised {type(error).__name__} without a "
                              f"message") from error
        raise
    except BaseException as error:
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        raise NativeFault(f"native {name} panicked: {error!r}") from error


def check_decode_error(error: DecodeError, payload: bytes) -> None:
    """A DecodeError names the message type, an offset inside ``payload`` and why."""
    if not (error.message_type and error.reason and 0 <= error.offset <= len(payload)):
        raise AssertionError(f"a DecodeError without its place: {error!r}") from error
