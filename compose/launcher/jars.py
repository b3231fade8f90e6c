"""Jars from Maven Central for the launcher's JVM servers, cached under ``cache_dir()``.

A bundle is a POM in ``compose/jars/<bundle>.xml``; ``resolve_jars`` copies its runtime
dependencies into ``cache_dir()/jars/<bundle>[-<version>]`` with Maven, using a local
repository in ``cache_dir()/m2`` so that every download lives in the one ignored folder.
A marker file, written only after Maven succeeded, records a fingerprint of the POM and
the properties: a second call with the same inputs returns at once, without Maven or the
network; a changed POM or property resolves the bundle again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from .base import ServerError, cache_dir

_POM_DIR = Path(__file__).resolve().parents[1] / "jars"
_MARKER = ".resolved"
_MAVEN_TIMEOUT = 1800.0
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MAVEN_BOILERPLATE = re.compile(r"\[ERROR\] *($|To see |Re-run |For more information|\[Help )")


def resolve_jars(bundle: str, properties: dict[str, str] | None = None) -> list[Path]:
    """Return the jars of ``bundle``, resolving them with Maven the first time.

    ``properties`` are passed to Maven as ``-Dkey=value``; values of ``*.version`` keys
    also name the cache folder (``spark-kafka-4.0.5``).
    """
    props = dict(properties or {})
    pom = _POM_DIR / f"{bundle}.xml"
    if not pom.is_file():
        raise ServerError(f"jar bundle {bundle!r}: no POM at {pom}")
    versions = [value for key, value in sorted(props.items()) if key.endswith("version")]
    root = cache_dir() / "jars"
    out = root / "-".join([bundle, *versions])
    fingerprint = hashlib.sha256(
        pom.read_bytes() + json.dumps(props, sort_keys=True).encode()).hexdigest()
    with _locked(root / f"{out.name}.lock"):
        marker = out / _MARKER
        if not (marker.is_file() and marker.read_text().strip() == fingerprint):
            shutil.rmtree(out, ignore_errors=True)
            _copy_dependencies(bundle, pom, out, props)
            out.mkdir(parents=True, exist_ok=True)
            marker.write_text(fingerprint + "\n")
    jars = sorted(out.glob("*.jar"))
    if not jars:
        raise ServerError(f"jar bundle {bundle!r}: Maven copied no jars into {out}")
    return jars


def spark_kafka_jars() -> list[Path]:
    """The jars that give the installed PySpark its Kafka source and sink (``spark.jars``)."""
    try:
        import pyspark
    except ImportError as exc:
        raise ImportError("spark_kafka_jars needs PySpark: pip install 'distributary[spark]'") \
            from exc
    version: str = pyspark.__version__
    return resolve_jars("spark-kafka",
                        {"spark.version": version, "spark.range": _patch_range(version)})


def jdk_tool(name: str) -> str:
    """Path of a JDK program (``java``, ``javac``): ``$JAVA_HOME/bin`` first, then ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).is_file():
        return str(Path(java_home) / "bin" / name)
    found = shutil.which(name)
    if found is None:
        raise ServerError(f"{name} not found: install a JDK 17+ or set JAVA_HOME")
    return found


def _patch_range(version: str) -> str:
    """A Maven range: ``version`` or the newest earlier patch of its line, never a preview.

    Maven orders ``4.0.0-preview2`` after ``4.0.0``, hence the two-part range.
    """
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if match is None:
        return f"[{version}]"
    line, patch = f"{match[1]}.{match[2]}", int(match[3])
    if patch == 0:
        return f"[{line}.0]"
    return f"[{line}.0,{line}.0],[{line}.1,{version}]"


def _copy_dependencies(bundle: str, pom: Path, out: Path, props: dict[str, str]) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServerError(f"jar bundle {bundle!r}: mvn not found (apt-get install maven)")
    argv = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(pom),
            "dependency:copy-dependencies", f"-DoutputDirectory={out}",
            "-DincludeScope=runtime", f"-Dmaven.repo.local={cache_dir() / 'm2'}",
            *(f"-D{key}={value}" for key, value in sorted(props.items()))]
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=_MAVEN_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ServerError(f"jar bundle {bundle!r}: Maven still running after "
                          f"{_MAVEN_TIMEOUT:.0f} s") from exc
    if done.returncode != 0:
        lines = [line for line in _ANSI.sub("", done.stdout).splitlines()
                 if line.strip() and not _MAVEN_BOILERPLATE.match(line)]
        tail = "\n".join(lines[-15:])
        raise ServerError(f"jar bundle {bundle!r}: Maven failed (exit {done.returncode}):\n{tail}")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` so parallel runs resolve a bundle only once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
