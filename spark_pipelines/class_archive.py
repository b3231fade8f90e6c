"""A class archive for the jobs' JVM (Java's application class data sharing): the classes
a job loads from Spark's jars, parsed and verified once, then mapped from one file by every
later job — about 3 s less per job start on a 2-core machine (``docs/performance.md``).

``cdc replay class-archive`` (run by ``make setup``) builds it: a child process runs a small
job of every kind of work the jobs do (JSON and Parquet read and written, the per-key
state, typing, the checksum) in a JVM started with ``-XX:ArchiveClassesAtExit``, and
closes that JVM so it writes the archive on exit; the archive is moved into place whole.
Its name holds a digest of the JVM's build and of Spark's jars (their path, names, sizes
and modification times, as the JVM checks them), so a JDK or Spark upgraded or reinstalled
since simply finds none and starts as before (building the new one removes all but the
newest two archives of other keys). A job's session maps it when it exists
(``with_class_archive``), with the JVM's CDS messages off: one that cannot be mapped
anyway is skipped quietly by the JVM.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

ARCHIVE_DIR_ENV = "DISTRIBUTARY_CLASS_ARCHIVE_DIR"
"""Where archives live (default: ``~/.cache/distributary/spark-class-archive``)."""
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_KEY_CACHE: dict[str, str | None] = {}
KEEP_OTHER_ARCHIVES = 2
"""Archives of other keys kept beside a new one (the newest): each checkout's own Spark
(its path is in the key) has one of ~160 MiB, so the directory would grow by one per
fresh checkout."""


def archive_dir() -> Path:
    """The directory of the archives."""
    configured = os.environ.get(ARCHIVE_DIR_ENV)
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "distributary" / "spark-class-archive"


def java_executable() -> str | None:
    """The ``java`` Spark starts: ``$JAVA_HOME/bin/java``, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").is_file():
        return str(Path(home, "bin", "java"))
    return shutil.which("java")


def archive_key(java: str | None = None) -> str | None:
    """A digest of the JVM's build and Spark's jars (None without a ``java``)."""
    java = java or java_executable()
    if java is None:
        return None
    if java not in _KEY_CACHE:
        try:
            version = subprocess.run([java, "-version"], capture_output=True, text=True,
                                     timeout=60, check=False).stderr
        except (OSError, subprocess.TimeoutExpired):
            _KEY_CACHE[java] = None
            return None
        jars = spark_jars()
        listing = "\n".join(sorted(_jar_identity(path) for path in jars.glob("*.jar")))
        digest = hashlib.sha256(f"{version}\n{jars.resolve()}\n{listing}".encode())
        _KEY_CACHE[java] = digest.hexdigest()[:16]
    return _KEY_CACHE[java]


def _jar_identity(jar: Path) -> str:
    """A jar's name, size and modification second: what the JVM checks of every class-path
    entry before it maps an archive (Spark reinstalled in place keeps its path and names,
    and its archive would no longer map)."""
    found = jar.stat()
    return f"{jar.name} {found.st_size} {int(found.st_mtime)}"


def spark_jars() -> Path:
    """The jars directory of the installed Spark (pyspark's)."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def archive_path(key: str) -> Path:
    """The archive for the JVM and Spark whose digest is ``key``."""
    return archive_dir() / f"spark-{key}.jsa"


def with_class_archive(settings: Mapping[str, object],
                       archive: Path | None = None) -> dict[str, object]:
    """``settings`` with the driver JVM mapping the class archive, when one exists for this
    JVM and Spark and the settings choose nothing about class sharing themselves."""
    found = dict(settings)
    options = str(found.get(_JAVA_OPTIONS, ""))
    if "SharedArchiveFile" in options or "ArchiveClassesAtExit" in options \
            or "-Xshare:off" in options:
        return found
    if archive is None:
        key = archive_key()
        archive = archive_path(key) if key is not None else None
    if archive is None or not archive.is_file():
        return found
    found[_JAVA_OPTIONS] = f"{options} -XX:SharedArchiveFile={archive} {QUIET_CDS}".strip()
    return found


def prune_other_archives(keep: Path, others: int = KEEP_OTHER_ARCHIVES) -> list[Path]:
    """Remove the archives beside ``keep`` but for the ``others`` newest; the removed."""
    found = sorted((path for path in keep.parent.glob("spark-*.jsa") if path != keep),
                   key=lambda path: path.stat().st_mtime, reverse=True)
    removed = found[others:]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


def build_archive(target: Path, timeout: float = 900) -> None:
    """Write the archive at ``target`` (see the module docstring); ``RuntimeError`` with
    the child's output when it could not."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="class-archive-", dir=target.parent) as scratch:
        dumped = Path(scratch) / "spark.jsa"
        done = subprocess.run(
            [sys.executable, "-m", "spark_pipelines.class_archive_job", str(dumped),
             str(Path(scratch) / "work")],
            capture_output=True, text=True, timeout=timeout, check=False,
            env={**os.environ, ARCHIVE_DIR_ENV: scratch})  # the child maps none itself
        if done.returncode != 0 or not dumped.is_file() or dumped.stat().st_size == 0:
            raise RuntimeError(f"the class archive was not written (exit {done.returncode}):"
                               f"\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
        os.replace(dumped, target)
