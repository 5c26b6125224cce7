"""The tls profile's CA, certificates, users and secrets, generated once into ``settings.security_dir``.

The CA signs a server certificate for the settings' host (every TLS server of the stack presents it)
and a client certificate (Kafka's mutual TLS); its key is not kept, so nothing can be signed later.
The users and secrets are written in the forms their clients read (``lineage_assets/connections.py``):
Kafka client properties with the registry's basic auth, and the catalog's OAuth2 client credentials
(its client registered in the token server's realm) and Marquez's API key in ``secrets.env``
(``secret_in_effect``). Every file with a key or a secret is owner-only.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import cast

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from lineage_assets.kafka_properties import read_kafka_properties
from lineage_assets.private_files import private_folder, write_private
from lineage_assets.settings import ENV_PREFIX, PROFILE_CA, PROFILE_CLIENT_PROPERTIES, PROFILE_SECRETS, Settings

CA = PROFILE_CA
SERVER = "server.pem"  # the server's key, then its certificate and the CA's: Kafka's and nginx's one file
CLIENT_CERTIFICATE = "client-cert.pem"
CLIENT_KEY = "client-key.pem"
S3_KEYSTORE = "s3proxy.p12"
CLIENT_PROPERTIES = PROFILE_CLIENT_PROPERTIES
PLAIN_PROPERTIES = "client-plain.properties"
MTLS_PROPERTIES = "client-mtls.properties"
SCRAM_USER = "lineage-assets"
PLAIN_USER = "lineage-assets-plain"
REGISTRY_USER = "lineage-assets"
TOKEN_SERVER_CLIENT = "lineage-assets"  # the catalog's client in the token server's realm
VALIDITY = datetime.timedelta(days=3650)
MTLS_PORT_OFFSET = 10  # a broker's mutual-TLS listener: above the broker and controller ports of three nodes


def prepared(settings: Settings) -> Path:
    """The profile's folder, made the first time: later calls (every ``stack up``) keep what it holds."""
    folder = settings.security_dir
    if folder.is_dir():
        _add_missing_secrets(folder)
        return folder
    private_folder(settings.state_dir)
    # Made whole beside it, then renamed: a folder that exists is complete.
    partial = Path(tempfile.mkdtemp(prefix=".security-", dir=settings.state_dir))
    try:
        _generate(settings, partial)
        partial.rename(folder)
    except OSError:
        if not folder.is_dir():  # else another `stack up` made it meanwhile, and its copy stands
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def _generate(settings: Settings, folder: Path) -> None:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lineage-assets local CA")])
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    (folder / CA).write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    # The server's certificate also authenticates a broker to the others (mutual TLS among them).
    server_key, server = _issued(ca, ca_key, "lineage-assets server", _names(settings.host), server=True)
    write_private(folder / SERVER, _pem_key(server_key) + _pem(server, ca))
    client_key, client = _issued(ca, ca_key, "lineage-assets client", [], server=False)
    write_private(folder / CLIENT_KEY, _pem_key(client_key))
    (folder / CLIENT_CERTIFICATE).write_bytes(_pem(client, ca))

    ca_location = str(settings.security_dir / CA)
    registry = f"basic.auth.user.info={REGISTRY_USER}:{secrets.token_hex(24)}\n"
    write_private(
        folder / CLIENT_PROPERTIES,
        _sasl_properties("SCRAM-SHA-512", SCRAM_USER, ca_location) + registry,
    )
    write_private(folder / PLAIN_PROPERTIES, _sasl_properties("PLAIN", PLAIN_USER, ca_location) + registry)
    write_private(
        folder / MTLS_PROPERTIES,
        "security.protocol=SSL\n"
        f"bootstrap.servers={','.join(f'{settings.host}:{port}' for port in mtls_ports(settings))}\n"
        f"ssl.ca.location={ca_location}\n"
        f"ssl.certificate.location={settings.security_dir / CLIENT_CERTIFICATE}\n"
        f"ssl.key.location={settings.security_dir / CLIENT_KEY}\n" + registry,
    )
    write_private(folder / PROFILE_SECRETS, "".join(f"{name}={value}\n" for name, value in _new_secrets().items()))


def _new_secrets() -> dict[str, str]:
    """The profile's secret settings, made now."""
    return {
        f"{ENV_PREFIX}CATALOG_CREDENTIAL": f"{TOKEN_SERVER_CLIENT}:{secrets.token_hex(24)}",
        f"{ENV_PREFIX}MARQUEZ_API_KEY": secrets.token_hex(24),
    }


def _add_missing_secrets(folder: Path) -> None:
    """Add the secrets a profile folder made by an earlier version lacks (one made before the catalog's
    tokens came from the token server has a static catalog token instead)."""
    path = folder / PROFILE_SECRETS
    text = path.read_text()
    missing = {name: value for name, value in _new_secrets().items() if f"{name}=" not in text}
    if missing:
        write_private(path, text + "".join(f"{name}={value}\n" for name, value in missing.items()))


def _sasl_properties(mechanism: str, user: str, ca_location: str) -> str:
    return (
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        f"sasl.username={user}\n"
        f"sasl.password={secrets.token_hex(24)}\n"
        f"ssl.ca.location={ca_location}\n"
    )


def _names(host: str) -> list[x509.GeneralName]:
    """The server certificate's names: loopback by address and by name, and the settings' host."""
    names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    try:
        address: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        address = x509.DNSName(host)
    return names if address in names else [*names, address]


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def _issued(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, name: str, names: list[x509.GeneralName], server: bool
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    usages = (
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        if server
        else [ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    builder = (
        _builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), ca.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _pem(*certificates: x509.Certificate) -> bytes:
    return b"".join(certificate.public_bytes(serialization.Encoding.PEM) for certificate in certificates)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    # PKCS#8 and unencrypted: what Kafka's PEM keystore and the Java client read without a password.
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def server_pem(settings: Settings) -> Path:
    return settings.security_dir / SERVER


def server_keystore(settings: Settings) -> tuple[Path, str]:
    """The server's key and certificate as a PKCS#12 keystore (s3proxy's Jetty reads no PEM), under a
    password made now: its one other copy is in the configuration of the server it is made for."""
    pem = server_pem(settings).read_bytes()
    key = cast(ec.EllipticCurvePrivateKey, serialization.load_pem_private_key(pem, password=None))  # made here
    certificate, *chain = x509.load_pem_x509_certificates(pem)
    password = secrets.token_hex(24)
    store = pkcs12.serialize_key_and_certificates(
        b"server", key, certificate, chain, serialization.BestAvailableEncryption(password.encode())
    )
    return write_private(settings.security_dir / S3_KEYSTORE, store), password


def credentials(settings: Settings, properties: str) -> tuple[str, str]:
    """The SASL user and password of one of the profile's client properties files."""
    found = read_kafka_properties(settings.security_dir / properties)
    return found["sasl.username"], found["sasl.password"]


def mtls_ports(settings: Settings) -> list[int]:
    """Each broker's mutual-TLS listener (brokers among themselves, and the certificate's clients)."""
    return [mtls_port(settings, node) for node in range(1, settings.kafka_brokers + 1)]


def mtls_port(settings: Settings, node: int) -> int:
    return settings.kafka_node_ports(node)[0] + MTLS_PORT_OFFSET
