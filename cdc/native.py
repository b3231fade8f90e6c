"""The native core (Rust, in ``native/``): part of the package, and required.

The wheel ships the extension module ``distributary_native`` beside the Python packages
(``pip install .`` builds it with maturin); its stub (``distributary_native.pyi``)
types it for mypy. The hot paths call it through ``CORE``: the log's record codec and
murmur2, the snapshot's COPY rows into records, the stream's row changes into records, the
sinks' batch renderers. The readable Python definitions of what it computes live in
``tests/reference/``, where differential and property tests hold it to them byte for byte.
"""

from __future__ import annotations

try:
    import distributary_native as CORE
except ImportError as error:  # an install from the sources that skipped the build
    raise ImportError(
        "distributary's native core (the module distributary_native) is not installed: "
        "install the package with pip (`pip install distributary`, or `pip install .` in a "
        "checkout, which builds it and needs Rust >= 1.74), or run `make setup`") from error

__all__ = ["CORE"]
