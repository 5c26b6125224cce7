"""Before a run does any work: its settings are well-formed, the data services they name answer, and
they accept its credentials.

A run that starts against a bad address fails late and leaves lineage naming datasets that do not
exist (a topic on a host that does not resolve); a wrong password, an untrusted certificate or a
plaintext client at a TLS listener fails a Spark job minutes in, in a stack trace. This check fails
each first, in one line per problem that names the service and the setting to change.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from lineage_assets.connections import (
    PROPERTIES_SETTING,
    TokenRefused,
    catalog_access_token,
    catalog_token_endpoint,
    https_context,
    kafka_conf,
    marquez_headers,
    registry_client_conf,
    s3_client,
)
from lineage_assets.settings import ENV_PREFIX, Settings, SettingsError
from lineage_assets.settings_environment import secret_in_effect
from lineage_assets.settings_validation import problems_of
from lineage_assets.stack.probes import port_open

CA_SETTING = ENV_PREFIX + "CA_FILE"


def _addresses(settings: Settings) -> list[tuple[str, str, int]]:
    """(setting that names it, host, port) of each data service a run reads or writes."""
    found = []
    kafka = "kafka_bootstrap" if settings.kafka_bootstrap else "kafka_port"
    for server in settings.kafka_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        found.append((kafka, host, int(port)))
    for override, local, url in (
        ("registry_url", "registry_port", settings.schema_registry_url),
        ("s3_endpoint", "s3_port", settings.s3_url),
        ("catalog_url", "iceberg_rest_port", settings.iceberg_catalog_url),
    ):
        setting = override if getattr(settings, override) else local
        parts = urllib.parse.urlsplit(url)
        if parts.hostname is None:
            raise SettingsError(f"{ENV_PREFIX}{setting.upper()}: {url!r} is not a URL with a host")
        found.append((setting, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)))
    return found


def unreachable(settings: Settings, timeout: float = 2.0) -> list[str]:
    """Each data service of ``settings`` whose host does not resolve or where nothing answers."""
    found = []
    for setting, host, port in _addresses(settings):
        named = f"{ENV_PREFIX}{setting.upper()}={getattr(settings, setting)!r}"
        try:
            socket.getaddrinfo(host, port)
        except socket.gaierror:
            found.append(f"{named}: host {host} does not resolve")
            continue
        if not port_open(host, port, timeout=timeout):
            local = " (the local stack's: `lineage-assets stack up`)" if setting.endswith("_port") else ""
            found.append(f"{named}: nothing answers at {host}:{port} within {timeout:.0f} s{local}")
    return found


class _LibrdkafkaLines(logging.Handler):
    """What a librdkafka client says (its log, through a logger of its own, and its errors)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.logger = logging.Logger("librdkafka")  # not the process's: each check has its own
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _kafka_refusal(settings: Settings, timeout: float) -> str | None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    said = _LibrdkafkaLines()
    # librdkafka tells why a connection failed in its log and error callback (served by poll), not in
    # the call that timed out; its log goes to a logger here instead of stderr.
    conf: dict[str, Any] = {
        **kafka_conf(settings),
        "error_cb": lambda error: said.lines.append(error.str()),
        "logger": said.logger,
    }
    admin = AdminClient(conf)
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.list_topics(timeout=0.5)
            return None
        except KafkaException as error:
            admin.poll(0)
            if said.lines or time.monotonic() >= deadline:
                reason = " ".join(dict.fromkeys(said.lines)) or error.args[0].str()
                break
    where = f"Kafka at {settings.kafka_servers}"
    file = settings.kafka_properties_path
    properties = f"{PROPERTIES_SETTING}={str(file)!r}" if file else f"{PROPERTIES_SETTING} (unset: plaintext)"
    if "Authentication failed" in reason or "SASL authentication error" in reason:
        return f"{where} refused the SASL user and password: sasl.* in {properties}"
    if "certificate verify failed" in reason:
        return f"{where}: its certificate is not one the client trusts: ssl.ca.location in {properties}"
    # A plaintext client's first request answered by a TLS listener's hang-up; TLS at a plaintext one.
    if "APIVERSION_QUERY" in reason or "SSL handshake failed" in reason or "security.protocol" in reason:
        protocol = kafka_conf(settings).get("security.protocol", "PLAINTEXT")
        return f"{where} closed the connection of a {protocol} client: security.protocol in {properties}"
    return f"{where}: {reason[:300]} ({properties})"


def _http_refusal(service: str, setting: str, call) -> str | None:
    """Why ``call`` (one request to the service) failed on credentials or TLS, or None."""
    try:
        call()
        return None
    except urllib.error.HTTPError as error:
        if error.code in (401, 403):
            return f"{service} refused the credentials ({error.code}): {setting}"
        return None  # answered: an error of the request itself is the run's to report
    except urllib.error.URLError as error:
        if isinstance(error.reason, ssl.SSLCertVerificationError):
            return (
                f"{service}: its certificate is not one the client trusts ({error.reason.verify_message}): {CA_SETTING}"
            )
        if isinstance(error.reason, ssl.SSLError):
            return f"{service}: TLS failed ({error.reason}): its URL's scheme and {CA_SETTING}"
        return None  # not answering is `unreachable`'s
    except OSError:  # slow or hung: the run's lineage waits for it, and the run need not
        return None


def _catalog_refusal(settings: Settings, timeout: float) -> str | None:
    """As the jobs' client reaches the catalog: with its token, or with one its OAuth2 client
    credentials are granted first."""
    catalog = f"the Iceberg REST catalog at {settings.iceberg_catalog_url}"
    headers = {"Authorization": f"Bearer {settings.catalog_token}"} if settings.catalog_token else {}
    setting = f"{ENV_PREFIX}CATALOG_TOKEN"
    if secret_in_effect(settings, "catalog_credential") and not settings.catalog_token:
        setting = f"{ENV_PREFIX}CATALOG_CREDENTIAL"
        endpoint = f"the OAuth2 token endpoint at {catalog_token_endpoint(settings)}"
        try:
            headers = {"Authorization": f"Bearer {catalog_access_token(settings, timeout)}"}
        except TokenRefused as refusal:
            return f"{endpoint} refused the credentials ({refusal}): {setting}"
        except Exception as error:  # requests: TLS and connection errors
            if "CERTIFICATE_VERIFY_FAILED" in str(error):
                return f"{endpoint}: its certificate is not one the client trusts: {CA_SETTING}"
            return None  # not answering, or answering oddly, is the run's to report
    return _http_refusal(
        catalog, setting, lambda: _request(f"{settings.iceberg_catalog_url}/v1/config", settings, headers, timeout)
    )


def _registry_refusal(settings: Settings) -> str | None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    where = f"the schema registry at {settings.schema_registry_url}"
    try:
        SchemaRegistryClient(registry_client_conf(settings)).get_subjects()
        return None
    except SchemaRegistryError as error:
        if error.http_status_code in (401, 403):
            return f"{where} refused the credentials: basic.auth.user.info in {PROPERTIES_SETTING}"
        return None
    except Exception as error:  # the client's HTTP library: TLS and connection errors
        if "CERTIFICATE_VERIFY_FAILED" in str(error):
            return f"{where}: its certificate is not one the client trusts: {CA_SETTING}"
        return None


def _s3_refusal(settings: Settings) -> str | None:
    from botocore.exceptions import ClientError, NoCredentialsError, SSLError

    where = f"S3 at {settings.s3_url}"
    keys = (
        f"{ENV_PREFIX}S3_ACCESS_KEY and {ENV_PREFIX}S3_SECRET_KEY"
        if settings.s3_access_key
        else "the AWS default credential chain (no static keys set)"
    )
    try:
        s3_client(settings, read_timeout=5, attempts=1).head_bucket(Bucket=settings.warehouse_bucket)
        return None
    except NoCredentialsError:
        return f"{where}: the AWS default credential chain found no credentials (no static keys set)"
    except SSLError:
        return f"{where}: its certificate is not one the client trusts: {CA_SETTING}"
    except ClientError as error:
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return f"{where} refused the credentials ({status}): {keys}" if status == 403 else None


def _request(url: str, settings: Settings, headers: dict[str, str], timeout: float) -> None:
    urllib.request.urlopen(
        urllib.request.Request(url, headers=headers), timeout=timeout, context=https_context(settings)
    ).close()


def refused(settings: Settings, timeout: float = 5.0) -> list[str]:
    """Each service that answers but refuses the settings' credentials, does not speak their protocol,
    or shows a certificate they do not trust."""
    found = [
        _kafka_refusal(settings, timeout),
        _registry_refusal(settings),
        _s3_refusal(settings),
        _catalog_refusal(settings, timeout),
        _http_refusal(
            f"Marquez at {settings.marquez_api_url}",
            f"{ENV_PREFIX}MARQUEZ_API_KEY",
            lambda: _request(
                f"{settings.marquez_api_url}/api/v1/namespaces?limit=1", settings, marquez_headers(settings), 2.0
            ),
        ),
    ]
    return [problem for problem in found if problem]


def require_services(settings: Settings) -> None:
    """SettingsError unless the settings are well-formed, every data service answers and each accepts
    the settings' credentials."""
    if problems := problems_of(settings) or unreachable(settings) or refused(settings):
        raise SettingsError("\n".join(problems))
