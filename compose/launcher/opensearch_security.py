"""How ``OpenSearchServer`` runs with OpenSearch's security plugin: HTTPS with basic-auth
users, TLS on the transport too, from a PEM certificate the caller issues.

The plugin comes as its distribution zip (``compose/jars/opensearch-security.xml``, the
core raised to the plugin's version, which must match) and is installed as a real plugin
in ``<home>/plugins/opensearch-security``: its jars load in their own class loader, except
those the node's class path already has (netty, Apache HTTP client, the modules' client
jars, ...), which are left out, else OpenSearch refuses the duplicate classes ("jar hell").

The plugin initialises its index from ``config/opensearch-security/*.yml`` at the first
start (``allow_default_init_securityindex``): every user has the backend role
``BACKEND_ROLE``, mapped to ``all_access``, which may also use the security REST API
(``PUT _plugins/_security/api/internalusers/<name>`` changes a password).
Password hashes (bcrypt) come from the plugin's own ``Hasher``. No certificate is an
admin's (``authcz.admin_dn`` names nobody): the REST API is the way to change users.
"""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import subprocess
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .base import ServerError, run_checked
from .jars import jdk_tool

PLUGIN = "opensearch-security"
_HASHER = "org.opensearch.security.tools.Hasher"
_PASSWORD_VAR = "DISTRIBUTARY_HASHED_PASSWORD"
BACKEND_ROLE = "distributary_admin"  # every user's, mapped to all_access
# Files of the plugin's zip the plugin folder needs (besides jars); config/ and tools/
# belong elsewhere in a distribution and are not used here.
_PLUGIN_FILES = ("plugin-descriptor.properties", "plugin-security.policy")
# The plugin's stock files kept as they are (the others are written here).
_STOCK_CONFIG = ("roles.yml", "action_groups.yml", "tenants.yml", "nodes_dn.yml",
                 "allowlist.yml", "audit.yml")
_CONFIG = """\
_meta: {type: config, config_version: 2}
config:
  dynamic:
    http: {anonymous_auth_enabled: false}
    authc:
      basic_internal_auth_domain:
        http_enabled: true
        transport_enabled: true
        order: 0
        http_authenticator: {type: basic, challenge: true}
        authentication_backend: {type: intern}
"""
_ROLES_MAPPING = f"""\
_meta: {{type: rolesmapping, config_version: 2}}
all_access:
  backend_roles: ["{BACKEND_ROLE}"]
"""


@dataclass(frozen=True)
class SecurityOptions:
    """The node's ``certificate`` and ``key`` (PEM files, the key unencrypted PKCS#8),
    used for HTTPS and the transport, and ``ca``, the CA that issued it; ``users`` (name →
    password) log in with basic auth, each with every permission."""

    certificate: Path
    key: Path
    ca: Path
    users: Mapping[str, str]

    def __post_init__(self) -> None:
        if not self.users:
            raise ValueError("the security plugin needs at least one user")
        for name in self.users:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"user name {name!r}: letters, digits, '_', '.', '-' only")

    def basic_auth(self) -> str:
        """An ``Authorization`` header value for the first user."""
        name, password = next(iter(self.users.items()))
        return "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting ``ca`` (any host name: only for readiness checks)."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.check_hostname = False
        return context


def install(options: SecurityOptions, *, home: Path, bundle: list[Path]) -> None:
    """Install the plugin under ``home`` and write its settings and configuration into
    ``home/config`` (``opensearch.yml`` gets the ``plugins.security.*`` lines appended)."""
    zips = sorted(bundle[0].parent.glob(f"{PLUGIN}-*.zip"))
    if not zips:
        raise ServerError(f"no {PLUGIN} zip beside the jars in {bundle[0].parent}")
    plugin = home / "plugins" / PLUGIN
    config = home / "config"
    security = config / PLUGIN
    for folder in (plugin, security):
        folder.mkdir(parents=True, exist_ok=True)
    on_class_path = {_artifact(jar.name) for jar in bundle}
    with zipfile.ZipFile(zips[0]) as archive:
        for member in archive.namelist():
            if member in _PLUGIN_FILES or (
                    "/" not in member and member.endswith(".jar")
                    and _artifact(member) not in on_class_path):
                (plugin / member).write_bytes(archive.read(member))
        for name in _STOCK_CONFIG:
            (security / name).write_bytes(archive.read(f"config/{name}"))
    for source, name in ((options.certificate, "node.crt"), (options.key, "node.key"),
                         (options.ca, "ca.crt")):
        (config / name).write_bytes(source.read_bytes())
    (config / "node.key").chmod(0o600)
    (security / "config.yml").write_text(_CONFIG)
    (security / "roles_mapping.yml").write_text(_ROLES_MAPPING)
    (security / "internal_users.yml").write_text(_internal_users(options.users, plugin, bundle))
    settings = config / "opensearch.yml"
    with settings.open("a") as out:
        out.write(_yaml(_settings(node_dn=_subject(options.certificate))))


def _settings(*, node_dn: str) -> dict[str, object]:
    settings: dict[str, object] = {}
    for layer in ("transport", "http"):
        prefix = f"plugins.security.ssl.{layer}."
        settings.update({prefix + "pemcert_filepath": "node.crt",
                         prefix + "pemkey_filepath": "node.key",
                         prefix + "pemtrustedcas_filepath": "ca.crt"})
    settings.update({
        "plugins.security.ssl.transport.enforce_hostname_verification": False,
        "plugins.security.ssl.http.enabled": True,
        "plugins.security.allow_default_init_securityindex": True,
        "plugins.security.nodes_dn": [node_dn],
        "plugins.security.authcz.admin_dn": ["CN=no-admin-certificate"],
        "plugins.security.restapi.roles_enabled": ["all_access"],
        "plugins.security.audit.type": "noop",
    })
    return settings


def _yaml(settings: Mapping[str, object]) -> str:
    """``settings`` as YAML lines (strings and lists JSON-quoted: valid YAML)."""
    return "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())


def _internal_users(users: Mapping[str, str], plugin: Path, bundle: list[Path]) -> str:
    lines = ["_meta: {type: internalusers, config_version: 2}"]
    for name, password in users.items():
        lines += [f"{name}:", f'  hash: "{_bcrypt(password, plugin, bundle)}"',
                  f'  backend_roles: ["{BACKEND_ROLE}"]']
    return "\n".join(lines) + "\n"


def _bcrypt(password: str, plugin: Path, bundle: Iterable[Path]) -> str:
    """The plugin's bcrypt hash of ``password`` (its ``Hasher``, reading it from the
    environment, so that it never shows in a process list)."""
    classpath = os.pathsep.join([str(plugin / "*"), *map(str, bundle)])
    done = subprocess.run([jdk_tool("java"), "-cp", classpath, _HASHER, "-env", _PASSWORD_VAR],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, _PASSWORD_VAR: password})
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("$2"):
        raise ServerError(f"the security plugin's Hasher gave no bcrypt hash (exit "
                          f"{done.returncode}): {(done.stderr or done.stdout)[-1000:]}")
    return lines[-1]


def _subject(certificate: Path) -> str:
    """The certificate's subject DN as the plugin writes it (RFC 2253: ``CN=node,O=x``)."""
    out = run_checked(["openssl", "x509", "-in", str(certificate), "-noout", "-subject",
                       "-nameopt", "RFC2253"], what=f"reading the subject of {certificate}")
    return out.strip().removeprefix("subject=").strip()


def _artifact(jar: str) -> str:
    """A jar's artifact name, without its version: ``netty-buffer-4.1.125.Final.jar`` →
    ``netty-buffer``, ``bcprov-jdk18on-1.82.jar`` → ``bcprov-jdk18on``."""
    match = re.match(r"(.+?)-\d", jar)
    return match[1] if match else jar.removesuffix(".jar")
