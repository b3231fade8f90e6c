"""Throwaway X.509 material made with the ``openssl`` command: a CA, and certificates it
signs for the server (SAN 127.0.0.1 and localhost) and for client roles (CN = role); and
a CA's certificate as it would be once expired (the same key and name, its validity over
in 2020), for the "certificate has expired" case without restarting a server."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
_EXPIRED_CA = """[ ca ]
default_ca = expired
[ expired ]
database = expired-index.txt
new_certs_dir = .
serial = expired-serial
default_md = sha256
policy = any
unique_subject = no
x509_extensions = authority
[ any ]
commonName = supplied
[ authority ]
basicConstraints = critical,CA:TRUE
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
keyUsage = critical,keyCertSign,cRLSign
"""


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

    def expired(self) -> Path:
        """This CA's certificate re-issued with the same key and name but a validity that
        ended in 2020 (``openssl ca -selfsign``: ``req -x509`` takes no start date): a
        client trusting it meets "certificate has expired", as when a CA runs out."""
        name = f"{self.name}-expired"
        (self.directory / f"{name}.cnf").write_text(_EXPIRED_CA)
        (self.directory / "expired-index.txt").write_text("")
        (self.directory / "expired-serial").write_text("01\n")
        _openssl("req", "-new", "-key", self.key.name, "-subj", f"/CN={self.name}", "-out",
                 f"{name}.csr", cwd=self.directory)
        _openssl("ca", "-batch", "-config", f"{name}.cnf", "-selfsign", "-keyfile",
                 self.key.name, "-in", f"{name}.csr", "-out", f"{name}.crt", "-notext",
                 "-startdate", "20200101000000Z", "-enddate", "20200102000000Z",
                 cwd=self.directory)
        return self.directory / f"{name}.crt"

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
