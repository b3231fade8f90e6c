"""Throwaway X.509 material made with the ``openssl`` command: a CA, and certificates it
signs for the server (SAN 127.0.0.1 and localhost) and for client roles (CN = role)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class CertificateAuthority:
    """A self-signed CA in ``directory``: ``<name>.crt`` and ``<name>.key``."""

    directory: Path
    name: str

    @property
    def cert(self) -> Path:
        return self.directory / f"{self.name}.crt"

    @property
    def key(self) -> Path:
        return self.directory / f"{self.name}.key"

    @classmethod
    def create(cls, directory: Path, name: str) -> CertificateAuthority:
        directory.mkdir(parents=True, exist_ok=True)
        _openssl("req", "-x509", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.crt",
                 "-days", "2", "-subj", f"/CN={name}", cwd=directory)
        return cls(directory, name)

    def issue(self, name: str, common_name: str, *, server: bool,
              alt_names: str = "IP:127.0.0.1,DNS:localhost") -> tuple[Path, Path]:
        """A certificate and key signed by this CA (a server's for ``alt_names``);
        returns (cert, key), key mode 0600."""
        extensions = self.directory / f"{name}.ext"
        usage = (f"subjectAltName={alt_names}\nextendedKeyUsage=serverAuth\n"
                 if server else "extendedKeyUsage=clientAuth\n")
        extensions.write_text("basicConstraints=CA:FALSE\n" + usage)
        _openssl("req", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={common_name}", cwd=self.directory)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", self.cert.name, "-CAkey",
                 self.key.name, "-CAcreateserial", "-out", f"{name}.crt", "-days", "2",
                 "-extfile", extensions.name, cwd=self.directory)
        key = self.directory / f"{name}.key"
        key.chmod(0o600)
        return self.directory / f"{name}.crt", key
