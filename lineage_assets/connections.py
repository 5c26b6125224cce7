"""How every client of the project connects to each service: Kafka, the schema registry, S3, the
Iceberg REST catalog and Marquez, with the security each one's settings name.

Kafka's security comes as its users write it, a client properties file (``kafka_client_properties``):
Java client keys (``sasl.jaas.config``, ``ssl.truststore.*``, ``ssl.keystore.*``) or librdkafka's
(``sasl.username``, ``ssl.ca.location``, ``ssl.certificate.location``), translated here for both
client families, so the Python clients (confluent-kafka, librdkafka) and Spark's Kafka source and sink
(the Java client, its ``kafka.`` options) always agree. The registry's ``basic.auth.user.info`` rides
in the same file, as in the client configurations Confluent Cloud hands out.

HTTPS services are trusted through ``ca_file`` besides the system's CAs: boto3 and the registry
client take the PEM file; Spark's JVMs a password-less PKCS#12 truststore made from it and the JDK's
own (``jvm_truststore``); requests (OpenLineage's HTTP transport) a bundle of certifi's and its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from lineage_assets.kafka_properties import (
    BOTH_KEY_PASSWORD,
    JAVA_KEYS,
    LIBRDKAFKA_KEYS,
    MECHANISMS,
    PROPERTIES_SETTING,
    SECRET_KEYS,
    SHARED_KEYS,
    KafkaPropertiesError,
    read_kafka_properties,
)
from lineage_assets.private_files import write_private
from lineage_assets.settings import ENV_PREFIX, Settings, SettingsError
from lineage_assets.settings_environment import secret_in_effect

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def kafka_properties(settings: Settings) -> dict[str, str]:
    """The client properties file in effect (``Settings.kafka_properties_path``), checked; {} for none."""
    path = settings.kafka_properties_path
    return {} if path is None else read_kafka_properties(path)


# A secret value shorter than this is not looked for in text: it would match ordinary words.
SHORTEST_REDACTED = 6


def secrets_in_effect(settings: Settings) -> tuple[str, ...]:
    """Every secret value the project's clients are given, longest first: the secret settings in effect
    (the tls profile's generated ones included) and the Kafka client properties' passwords, for text
    that leaves a process to be searched for them (``lineage.transport`` redacts them)."""
    values = {secret_in_effect(settings, f.name) for f in dataclasses.fields(settings) if f.metadata["secret"]}
    try:
        properties = kafka_properties(settings)
    except KafkaPropertiesError:  # a file no client can use: none of them quotes it either
        properties = {}
    values |= {value for key, value in properties.items() if key in SECRET_KEYS}
    if credentials := _credentials(properties):
        values.add(credentials[1])
    if user_info := properties.get("basic.auth.user.info"):
        values.add(user_info.partition(":")[2])
    return tuple(sorted((value for value in values if len(value) >= SHORTEST_REDACTED), key=len, reverse=True))


def _jaas_options(jaas: str) -> dict[str, str]:
    """The ``key="value"`` options of a ``sasl.jaas.config`` line."""
    return {key: value.replace('\\"', '"') for key, value in re.findall(r'(\w+)\s*=\s*"((?:\\.|[^"\\])*)"', jaas)}


def _credentials(properties: Mapping[str, str]) -> tuple[str, str] | None:
    """The SASL user and password, from librdkafka's keys or the Java client's JAAS line."""
    if "sasl.username" in properties:
        return properties["sasl.username"], properties.get("sasl.password", "")
    if "sasl.jaas.config" in properties:
        options = _jaas_options(properties["sasl.jaas.config"])
        if "username" in options:
            return options["username"], options.get("password", "")
    return None


def _store_type(properties: Mapping[str, str], store: str) -> str:
    return properties.get(f"ssl.{store}.type", "PKCS12" if properties.get(f"ssl.{store}.location") else "").upper()


# A confluent-kafka client's configuration, as its constructors type it.
LibrdkafkaConf = dict[str, str | int | float | bool]


def librdkafka_conf(properties: Mapping[str, str], bootstrap_servers: str) -> LibrdkafkaConf:
    """The client properties for confluent-kafka (librdkafka)."""
    conf: LibrdkafkaConf = {"bootstrap.servers": bootstrap_servers}
    conf |= {key: value for key, value in properties.items() if key in SHARED_KEYS | LIBRDKAFKA_KEYS}
    if BOTH_KEY_PASSWORD in properties:
        conf[BOTH_KEY_PASSWORD] = properties[BOTH_KEY_PASSWORD]
    if "security.protocol" in properties:
        conf["security.protocol"] = properties["security.protocol"].upper()
    if "sasl.username" not in properties and (credentials := _credentials(properties)):
        conf["sasl.username"], conf["sasl.password"] = credentials
    if "ssl.ca.location" not in properties and (truststore := properties.get("ssl.truststore.location")):
        if _store_type(properties, "truststore") != "PEM":
            raise KafkaPropertiesError(
                f"{PROPERTIES_SETTING}: ssl.truststore.location: librdkafka reads CA certificates as PEM only; "
                "give them as ssl.ca.location (or ssl.truststore.type=PEM)"
            )
        conf["ssl.ca.location"] = truststore
    if keystore := properties.get("ssl.keystore.location"):
        if _store_type(properties, "keystore") != "PKCS12":
            raise KafkaPropertiesError(
                f"{PROPERTIES_SETTING}: ssl.keystore.location: librdkafka reads a PKCS12 keystore only; "
                "give a PEM key and certificate as ssl.key.location and ssl.certificate.location"
            )
        conf["ssl.keystore.location"] = keystore
        conf["ssl.keystore.password"] = properties.get("ssl.keystore.password", "")
    return conf


def spark_kafka_options(properties: Mapping[str, str], bootstrap_servers: str) -> dict[str, str]:
    """The same client as Spark's Kafka source and sink take it: the Java client's properties, each
    with the ``kafka.`` prefix."""
    conf = {"bootstrap.servers": bootstrap_servers}
    conf |= {key: value for key, value in properties.items() if key in SHARED_KEYS | JAVA_KEYS}
    if "security.protocol" in conf:
        conf["security.protocol"] = conf["security.protocol"].upper()
    mechanism = properties.get("sasl.mechanism")
    if "sasl.jaas.config" not in properties and mechanism in MECHANISMS and (credentials := _credentials(properties)):
        user, password = (value.replace("\\", "\\\\").replace('"', '\\"') for value in credentials)
        conf["sasl.jaas.config"] = f'{MECHANISMS[mechanism]} required username="{user}" password="{password}";'
    if "ssl.truststore.location" not in properties and (ca := properties.get("ssl.ca.location")):
        conf |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": ca}
    if "ssl.keystore.location" not in properties and (certificate := properties.get("ssl.certificate.location")):
        # The Java client's PEM keystore takes the key and its chain as values (its file form wants
        # them in one file); the key must be PKCS#8, as `openssl pkcs8 -topk8` writes it.
        key = Path(properties.get("ssl.key.location", certificate)).read_text()
        conf |= {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": Path(certificate).read_text(),
            "ssl.keystore.key": key,
        }
    if BOTH_KEY_PASSWORD in properties:
        conf[BOTH_KEY_PASSWORD] = properties[BOTH_KEY_PASSWORD]
    return {f"kafka.{key}": value for key, value in conf.items()}


def kafka_conf(settings: Settings) -> LibrdkafkaConf:
    """confluent-kafka's configuration of the settings' Kafka, security included."""
    return librdkafka_conf(kafka_properties(settings), settings.kafka_servers)


def spark_kafka_conf(settings: Settings) -> dict[str, str]:
    """Spark's ``kafka.`` options of the settings' Kafka, for a session of this process."""
    return spark_kafka_options(kafka_properties(settings), settings.kafka_servers)


def kafka_arguments(settings: Settings) -> tuple[str, ...]:
    """How a Spark job is told its Kafka and registry security: the files' paths, never their contents."""
    path, ca = settings.kafka_properties_path, settings.ca_path
    return (*(("--kafka-properties", str(path)) if path else ()), *(("--ca-file", str(ca)) if ca else ()))


def registry_conf(url: str, properties: Mapping[str, str], ca_file: Path | str | None) -> dict[str, str]:
    """confluent-kafka's ``SchemaRegistryClient`` configuration: basic auth from the client
    properties' ``basic.auth.user.info``, TLS trusting ``ca_file``."""
    conf = {"url": url}
    if user_info := properties.get("basic.auth.user.info"):
        conf["basic.auth.user.info"] = user_info  # the Python client knows no other source, nor its key
    if ca_file:
        conf["ssl.ca.location"] = str(ca_file)
    return conf


def registry_client_conf(settings: Settings) -> dict[str, str]:
    return registry_conf(settings.schema_registry_url, kafka_properties(settings), settings.ca_path)


def s3_client(settings: Settings, read_timeout: float = 10, attempts: int = 2) -> S3Client:
    """boto3's S3 client: the settings' static keys, or else boto3's default credential chain
    (environment, ``AWS_PROFILE``'s shared files, web identity, container and instance metadata)."""
    import boto3
    from botocore.config import Config

    # A session of its own: the chain and AWS_PROFILE are read from the environment when a session is
    # made, and boto3's default session, made once per process, would keep what they said then.
    return boto3.session.Session().client(
        "s3",
        endpoint_url=settings.s3_url,
        region_name=settings.s3_region,
        verify=str(settings.ca_path) if settings.ca_path else None,
        aws_access_key_id=settings.s3_access_key or None,  # None: the chain
        aws_secret_access_key=settings.s3_secret_key if settings.s3_access_key else None,
        # Checksums only where an operation requires them: S3-compatible stores (s3proxy among them)
        # reject the flexible-checksum headers boto3 sends by default.
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": attempts},
            connect_timeout=2,
            read_timeout=read_timeout,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )


def https_context(settings: Settings) -> ssl.SSLContext:
    """The system's trust plus ``ca_file``, for the standard library's HTTPS calls."""
    context = ssl.create_default_context()
    if settings.ca_path:
        context.load_verify_locations(cafile=str(settings.ca_path))
    return context


def ca_bundle(settings: Settings) -> Path | None:
    """What requests (OpenLineage's HTTP transport) verifies TLS against when ``ca_file`` is set: it
    reads one bundle only, so certifi's CAs (its default) with ``ca_file``'s appended."""
    if not settings.ca_path:
        return None
    import certifi

    bundle = _derived_file(settings, "ca-bundle", settings.ca_path, ".pem")
    if not bundle.exists():
        write_private(bundle, Path(certifi.where()).read_text() + "\n" + settings.ca_path.read_text())
    return bundle


def _derived_file(settings: Settings, kind: str, source: Path, suffix: str) -> Path:
    """Where a store made from ``source`` is kept: in the state folder, as each stack of the tls
    profile has a CA of its own."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    return settings.state_dir / "trust" / f"{kind}-{digest}{suffix}"


JDK_CACERTS_PASSWORD = "changeit"  # the JDK's published default, not a secret


def jvm_truststore(settings: Settings) -> Path | None:
    """A password-less PKCS#12 truststore of the JDK's CAs and ``ca_file``'s, for Spark's JVMs (S3A,
    the Iceberg REST client): the JVM's only trust setting is one store, and a store without a
    password needs none on any command line. Made once per CA file, with the JDK's keytool."""
    if not settings.ca_path:
        return None
    store = _derived_file(settings, "truststore", settings.ca_path, ".p12")
    if store.exists():
        return store
    keytool = shutil.which("keytool") or "keytool"
    cacerts = Path(os.path.realpath(shutil.which("java") or "java")).parent.parent / "lib" / "security" / "cacerts"
    store.parent.mkdir(parents=True, exist_ok=True)
    # No integrity password and no encrypted certificates: what the JVM reads without a password.
    unprotected = ["-J-Dkeystore.pkcs12.certProtectionAlgorithm=NONE", "-J-Dkeystore.pkcs12.macAlgorithm=NONE"]
    passwords = {"SOURCE_PASSWORD": JDK_CACERTS_PASSWORD, "STORE_PASSWORD": JDK_CACERTS_PASSWORD}
    with tempfile.TemporaryDirectory(dir=store.parent) as folder:
        partial = Path(folder) / store.name
        steps = [
            [
                "-importkeystore",
                "-srckeystore",
                str(cacerts),
                "-srcstorepass:env",
                "SOURCE_PASSWORD",
                "-destkeystore",
                str(partial),
                "-deststoretype",
                "PKCS12",
                "-deststorepass:env",
                "STORE_PASSWORD",
            ],
            *(
                [
                    "-importcert",
                    "-noprompt",
                    "-alias",
                    f"ca-file-{number}",
                    "-file",
                    str(certificate),
                    "-keystore",
                    str(partial),
                    "-storepass:env",
                    "STORE_PASSWORD",
                ]
                for number, certificate in enumerate(_split_pem(settings.ca_path, Path(folder)))
            ),
        ]
        for step in steps:
            done = subprocess.run(
                [keytool, *unprotected, *step], env={**os.environ, **passwords}, capture_output=True, text=True
            )
            if done.returncode != 0:
                raise SettingsError(
                    f"{ENV_PREFIX}CA_FILE={str(settings.ca_path)!r}: keytool could not make a truststore of it: "
                    f"{(done.stdout + done.stderr).strip().splitlines()[-1:]}"
                )
        partial.replace(store)
    return store


def _split_pem(bundle: Path, folder: Path) -> list[Path]:
    """Each certificate of a PEM bundle in a file of its own: keytool imports one a call."""
    blocks = re.findall(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", bundle.read_text(), re.DOTALL)
    if not blocks:
        raise SettingsError(f"{ENV_PREFIX}CA_FILE={str(bundle)!r}: holds no PEM certificate")
    files = []
    for number, block in enumerate(blocks):
        (path := folder / f"ca-{number}.pem").write_text(block + "\n")
        files.append(path)
    return files


def jvm_trust_options(settings: Settings) -> list[str]:
    """The JVM options that make a Spark driver or executor trust ``ca_file``."""
    store = jvm_truststore(settings)
    return [f"-Djavax.net.ssl.trustStore={store}", "-Djavax.net.ssl.trustStoreType=PKCS12"] if store else []


def security_files(settings: Settings) -> list[Path]:
    """The files the clients' security reads (the client properties, the CAs, an mTLS key and
    certificate), with the trust stores derived from them made: what a container of the project needs
    to see at the same paths."""
    jvm_truststore(settings)
    ca_bundle(settings)
    properties = kafka_properties(settings)
    named = [properties[key] for key in sorted(properties) if key.endswith(".location")]
    return [Path(path) for path in [settings.kafka_properties_path, settings.ca_path, *named] if path]


class TokenRefused(Exception):
    """The catalog's token endpoint refused the client credentials."""


def catalog_token_endpoint(settings: Settings) -> str:
    """Where the catalog's OAuth2 client asks: the setting's or the tls profile's token server, else the
    catalog's own endpoint, as Iceberg's REST client does."""
    return settings.catalog_token_endpoint or f"{settings.iceberg_catalog_url}/v1/oauth/tokens"


def catalog_access_token(settings: Settings, timeout: float = 10.0) -> str:
    """A token for the catalog, asked for with its OAuth2 client credentials as Iceberg's REST client asks
    (client credentials grant, the id and secret in the form). Here only for the preflight and the
    proxy's probe, in Python: the jobs' client is Iceberg's own, in the JVM. TokenRefused on 400/401."""
    import requests

    client_id, _, secret = secret_in_effect(settings, "catalog_credential").partition(":")
    form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret}
    # Iceberg's client asks for its scope `catalog` unless one is set.
    form["scope"] = settings.catalog_oauth2_scope or "catalog"
    bundle = ca_bundle(settings)
    answer = requests.post(
        catalog_token_endpoint(settings), data=form, timeout=timeout, verify=str(bundle) if bundle else True
    )
    if answer.status_code in (400, 401):
        error = answer.json().get("error", "") if "json" in answer.headers.get("Content-Type", "") else ""
        raise TokenRefused(f"{answer.status_code}{': ' + error if error else ''}")
    answer.raise_for_status()
    return str(answer.json()["access_token"])


def marquez_headers(settings: Settings) -> dict[str, str]:
    """What the project's own calls to Marquez's API send: its API key as a bearer token."""
    key = secret_in_effect(settings, "marquez_api_key")
    return {"Authorization": f"Bearer {key}"} if key else {}
