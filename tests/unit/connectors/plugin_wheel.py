"""Build a pure-Python wheel from a small source tree with a PEP 621 ``pyproject.toml``,
offline and without a build backend (pip then installs it like any wheel)."""

from __future__ import annotations

import base64
import hashlib
import re
import tomllib
import zipfile
from pathlib import Path


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(source: Path, out_dir: Path) -> Path:
    """Pack ``source``'s packages, metadata and entry points into ``out_dir``."""
    pyproject = tomllib.loads((source / "pyproject.toml").read_text())
    project = pyproject["project"]
    packages = pyproject["tool"]["setuptools"]["packages"]
    dist = re.sub(r"[-_.]+", "_", project["name"]).lower()
    version = project["version"]
    info = f"{dist}-{version}.dist-info"
    files: dict[str, bytes] = {}
    for package in packages:
        for path in sorted((source / package).rglob("*.py")):
            files[path.relative_to(source).as_posix()] = path.read_bytes()
    metadata = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {version}"]
    metadata += [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    files[f"{info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: distributary-tests\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    entry_points = ""
    for group, points in project.get("entry-points", {}).items():
        entry_points += f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
    files[f"{info}/entry_points.txt"] = entry_points.encode()
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = out_dir / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel
