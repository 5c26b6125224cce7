"""A Kafka client properties file, as Kafka users write it: read, and checked before any client uses it.

No library on PyPI that is kept up reads Java's ``.properties`` format, and the few lines here are all
of it. Which keys a file may hold is the translation's (``connections``) to say; they live here so the
settings can check a file without importing the clients.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path

PROPERTIES_SETTING = "LINEAGE_ASSETS_KAFKA_CLIENT_PROPERTIES"

# Keys both client families read under the same name and meaning.
SHARED_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "ssl.endpoint.identification.algorithm",
        "client.id",
        "client.dns.lookup",
    }
)
# Keys read by one family, which the other is given in its own terms.
JAVA_KEYS = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.keystore.password",
    }
)
LIBRDKAFKA_KEYS = frozenset(
    {"sasl.username", "sasl.password", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location"}
)
BOTH_KEY_PASSWORD = "ssl.key.password"  # the private key's password, in either family's key file
# The addresses, taken when the settings leave them empty (the file Confluent Cloud hands out has them).
ADDRESS_KEYS = frozenset({"bootstrap.servers", "schema.registry.url"})
REGISTRY_KEYS = frozenset({"basic.auth.user.info", "basic.auth.credentials.source"})
KNOWN_KEYS = SHARED_KEYS | JAVA_KEYS | LIBRDKAFKA_KEYS | ADDRESS_KEYS | REGISTRY_KEYS | {BOTH_KEY_PASSWORD}
SECRET_KEYS = frozenset(
    {
        "sasl.jaas.config",
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "basic.auth.user.info",
    }
)
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class KafkaPropertiesError(ValueError):
    """A client properties file that cannot be used; the message names the file and the key, never a secret."""


def parse_properties(text: str) -> dict[str, str]:
    """A Java ``.properties`` text as ``Properties.load`` reads it: ``key=value`` or ``key: value``,
    ``#``/``!`` comments, a trailing backslash continuing a line (as a long ``sasl.jaas.config`` is
    often written), backslash escapes."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = (pending + raw.lstrip()) if pending else raw.strip()
        ends_escaped = (len(line) - len(line.rstrip("\\"))) % 2 == 1
        if ends_escaped:
            pending = line[:-1]
            continue
        pending = ""
        if line and not line.startswith(("#", "!")):
            lines.append(line)
    if pending:
        lines.append(pending)
    found = {}
    for line in lines:
        match = re.match(r"((?:\\.|[^\s=:\\])+)\s*[=:]?\s*(.*)", line)
        if match:
            found[_unescape(match.group(1))] = _unescape(match.group(2))
    return found


def _unescape(text: str) -> str:
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda m: _escaped(m.group(1), escapes), text)


def _escaped(code: str, escapes: Mapping[str, str]) -> str:
    if len(code) == 5 and code[0] == "u":
        return chr(int(code[1:], 16))
    return escapes.get(code, code)


@functools.cache
def _read(path: Path, modified_ns: int) -> dict[str, str]:
    del modified_ns  # part of the cache key only: an edited file is read again
    return parse_properties(path.read_text())


def read_kafka_properties(path: Path) -> dict[str, str]:
    """A client properties file, checked: its keys known, its protocol and mechanism real ones, and
    owner-only when it holds a secret."""
    where = f"{PROPERTIES_SETTING}={str(path)!r}"
    try:
        status = path.stat()
        properties = _read(path, status.st_mtime_ns)
    except OSError as error:
        raise KafkaPropertiesError(f"{where}: cannot be read ({error.strerror})") from None
    unknown = sorted(set(properties) - KNOWN_KEYS)
    if unknown:
        raise KafkaPropertiesError(
            f"{where}: {', '.join(unknown)}: not a client security setting this project passes on "
            f"(it takes {', '.join(sorted(KNOWN_KEYS))})"
        )
    secrets = sorted(SECRET_KEYS & set(properties))
    if secrets and status.st_mode & 0o077:
        raise KafkaPropertiesError(
            f"{where}: holds {', '.join(secrets)} but others may read it (mode {status.st_mode & 0o777:o}); "
            f"`chmod 600 {path}`"
        )
    protocol = properties.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise KafkaPropertiesError(f"{where}: security.protocol={protocol!r}: one of {', '.join(PROTOCOLS)}")
    mechanism = properties.get("sasl.mechanism", "GSSAPI" if protocol.startswith("SASL") else "")
    if protocol.startswith("SASL") and mechanism not in MECHANISMS:
        raise KafkaPropertiesError(
            f"{where}: sasl.mechanism={mechanism!r}: this project's clients take {', '.join(MECHANISMS)}"
        )
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        if properties.get(key, "PKCS12").upper() not in ("PKCS12", "PEM", "JKS"):
            raise KafkaPropertiesError(f"{where}: {key}={properties[key]!r}: PKCS12, PEM or JKS")
    return properties
