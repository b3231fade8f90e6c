"""Jars from Maven Central for the launcher's JVM servers, cached under ``cache_dir()``.

A bundle is a POM in ``compose/jars/<bundle>.xml``; ``resolve_jars`` copies its runtime
dependencies into ``cache_dir()/jars/<bundle>[-<version>]-<fingerprint>`` with Maven, using
a local repository in ``cache_dir()/m2`` so that every download lives in the one cache
folder. The fingerprint is of the POM and the properties, so clones at different commits
sharing the machine-wide cache each keep their own folder. A marker file, written only
after Maven succeeded, records it: a second call with the same inputs returns at once,
without Maven or the network. Maven runs under a lock on the bundle's folder and one on
the local repository, so parallel runs download each jar once and never meet half-written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from .base import ServerError, cache_dir, file_lock

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
    fingerprint = hashlib.sha256(
        pom.read_bytes() + json.dumps(props, sort_keys=True).encode()).hexdigest()
    root = cache_dir() / "jars"
    out = root / "-".join([bundle, *versions, fingerprint[:12]])
    marker = out / _MARKER
    if not (marker.is_file() and marker.read_text().strip() == fingerprint):
        with file_lock(root / f"{out.name}.lock"):
            if not (marker.is_file() and marker.read_text().strip() == fingerprint):
                shutil.rmtree(out, ignore_errors=True)  # a run stopped half-way left it
                with file_lock(cache_dir() / "m2.lock"):
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


SERVER_JVM_OPTIONS_ENV = "DISTRIBUTARY_SERVER_JVM_OPTIONS"
"""Options given to every server JVM the launcher starts (``make test`` sets
``-XX:TieredStopAtLevel=1``: its servers live for minutes and start often, and C2's
compilations cost about half their CPU at start)."""


def server_java() -> list[str]:
    """The ``java`` command of a launched server: ``java`` and the options
    ``$DISTRIBUTARY_SERVER_JVM_OPTIONS`` holds."""
    return [jdk_tool("java"), *shlex.split(os.environ.get(SERVER_JVM_OPTIONS_ENV, ""))]


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
                              text=True, timeout=_MAVEN_TIMEOUT, check=False,
                              umask=0o022)  # the cache is readable by all users
    except subprocess.TimeoutExpired as exc:
        raise ServerError(f"jar bundle {bundle!r}: Maven still running after "
                          f"{_MAVEN_TIMEOUT:.0f} s") from exc
    if done.returncode != 0:
        lines = [line for line in _ANSI.sub("", done.stdout).splitlines()
                 if line.strip() and not _MAVEN_BOILERPLATE.match(line)]
        tail = "\n".join(lines[-15:])
        raise ServerError(f"jar bundle {bundle!r}: Maven failed (exit {done.returncode}):\n{tail}")
