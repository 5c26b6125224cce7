"""One client properties file, as Kafka users write it, gives confluent-kafka and Spark's Kafka client
the same connection; the HTTPS services' credentials and CA reach each of their clients."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineage_assets.connections import (
    kafka_conf,
    librdkafka_conf,
    registry_client_conf,
    secrets_in_effect,
    spark_kafka_options,
)
from lineage_assets.kafka_properties import KafkaPropertiesError, parse_properties, read_kafka_properties
from lineage_assets.lineage.delivery import Backend, marquez_backend
from lineage_assets.settings import PROFILE_SECRETS, Settings, SettingsError
from lineage_assets.settings_environment import secret_in_effect
from lineage_assets.settings_validation import validated
from lineage_assets.spark_conf import spark_conf, spark_submit_command

SCRAM_JAVA = """\
# as Confluent Cloud hands it out, for a Java client
bootstrap.servers=broker-1.example:9092
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="orders-app" password="p@ss w0rd";
basic.auth.credentials.source=USER_INFO
basic.auth.user.info=registry-key:registry-secret
schema.registry.url=https://registry.example/apis/ccompat/v7
"""


def private_file(folder: Path, text: str, name: str = "client.properties") -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_java_properties_are_read_as_java_reads_them():
    text = "! comment\n# comment\na=1\nb : two words\nc\\=d=e\nlong=first \\\n   second\nunicode=\\u00e9\n"
    assert parse_properties(text) == {"a": "1", "b": "two words", "c=d": "e", "long": "first second", "unicode": "é"}


def test_a_java_client_file_gives_librdkafka_the_same_user_and_spark_the_same_login(tmp_path):
    properties = read_kafka_properties(private_file(tmp_path, SCRAM_JAVA))
    python = librdkafka_conf(properties, "broker-1.example:9092")
    assert python["security.protocol"] == "SASL_SSL"
    assert python["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (python["sasl.username"], python["sasl.password"]) == ("orders-app", "p@ss w0rd")
    assert "sasl.jaas.config" not in python  # librdkafka refuses keys it does not know
    spark = spark_kafka_options(properties, "broker-1.example:9092")
    assert spark["kafka.sasl.jaas.config"] == properties["sasl.jaas.config"]
    assert spark["kafka.bootstrap.servers"] == "broker-1.example:9092"
    assert not any("basic.auth" in key for key in [*python, *spark])  # the registry's, not Kafka's


def test_a_librdkafka_file_gives_spark_a_login_module_a_pem_truststore_and_a_pem_keystore(tmp_path):
    (tmp_path / "ca.pem").write_text("CA")
    (tmp_path / "client.pem").write_text("CHAIN")
    (tmp_path / "client.key").write_text("KEY")
    for mechanism, module in [("SCRAM-SHA-512", "scram.ScramLoginModule"), ("PLAIN", "plain.PlainLoginModule")]:
        path = private_file(
            tmp_path,
            f"security.protocol=sasl_ssl\nsasl.mechanism={mechanism}\nsasl.username=app\n"
            f'sasl.password=se"cret\nssl.ca.location={tmp_path}/ca.pem\n'
            f"ssl.certificate.location={tmp_path}/client.pem\nssl.key.location={tmp_path}/client.key\n",
            f"{mechanism}.properties",
        )
        spark = spark_kafka_options(read_kafka_properties(path), "b:9093")
        assert spark["kafka.security.protocol"] == "SASL_SSL"
        assert spark["kafka.sasl.jaas.config"] == (
            f'org.apache.kafka.common.security.{module} required username="app" password="se\\"cret";'
        )
        assert (spark["kafka.ssl.truststore.type"], spark["kafka.ssl.truststore.location"]) == (
            "PEM",
            f"{tmp_path}/ca.pem",
        )
        assert spark["kafka.ssl.keystore.type"] == "PEM"
        assert (spark["kafka.ssl.keystore.certificate.chain"], spark["kafka.ssl.keystore.key"]) == ("CHAIN", "KEY")


def test_a_truststore_librdkafka_cannot_read_is_named_with_what_to_give_instead(tmp_path):
    path = private_file(tmp_path, "security.protocol=SSL\nssl.truststore.location=/etc/kafka/trust.jks\n")
    with pytest.raises(
        KafkaPropertiesError, match=r"ssl.truststore.location: .* PEM only; give them as ssl.ca.location"
    ):
        librdkafka_conf(read_kafka_properties(path), "b:9093")
    pem = private_file(tmp_path, "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\n")
    assert librdkafka_conf(read_kafka_properties(pem), "b:9093")["ssl.ca.location"] == "/ca.pem"


def test_a_file_others_may_read_is_refused_when_it_holds_a_secret_and_the_secret_is_not_shown(tmp_path):
    path = private_file(tmp_path, SCRAM_JAVA)
    path.chmod(0o644)
    with pytest.raises(KafkaPropertiesError) as refused:
        read_kafka_properties(path)
    assert str(path) in str(refused.value) and "sasl.jaas.config" in str(refused.value)
    assert "p@ss" not in str(refused.value) and "registry-secret" not in str(refused.value)
    path.write_text("security.protocol=SSL\n")  # nothing secret: readable is fine
    assert read_kafka_properties(path) == {"security.protocol": "SSL"}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n", "sasl.mechanism='OAUTHBEARER'"),
        ("security.protocol=TLS\n", "security.protocol='TLS'"),
        ("security.protocol=SSL\nssl.enabled.protocols=TLSv1.3\n", "ssl.enabled.protocols: not a client security"),
    ],
)
def test_a_file_the_clients_could_not_use_is_refused_by_the_settings_naming_the_key(tmp_path, text, named):
    path = private_file(tmp_path, text)
    with pytest.raises(SettingsError) as refused:
        validated(Settings(kafka_client_properties=str(path)))
    assert named in str(refused.value) and "LINEAGE_ASSETS_KAFKA_CLIENT_PROPERTIES" in str(refused.value)


def test_the_addresses_and_the_registry_credentials_come_from_the_file_unless_the_settings_give_them(tmp_path):
    path = private_file(tmp_path, SCRAM_JAVA)
    (tmp_path / "ca.pem").write_text("CA")
    settings = Settings(kafka_client_properties=str(path), ca_file=str(tmp_path / "ca.pem"))
    assert kafka_conf(settings)["bootstrap.servers"] == "broker-1.example:9092"
    assert registry_client_conf(settings) == {
        "url": "https://registry.example/apis/ccompat/v7",
        "basic.auth.user.info": "registry-key:registry-secret",
        "ssl.ca.location": str(tmp_path / "ca.pem"),
    }
    mine = Settings(kafka_client_properties=str(path), kafka_bootstrap="mine:9092", registry_url="https://mine/")
    assert (mine.kafka_servers, registry_client_conf(mine)["url"]) == ("mine:9092", "https://mine/")


def test_without_static_keys_spark_and_boto3_take_the_aws_default_chain(tmp_path):
    conf = spark_conf(Settings(state_dir=tmp_path, s3_access_key="", s3_secret_key=""))
    assert not any(key.endswith((".access.key", ".secret.key")) for key in conf)
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"] == (
        "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
    )
    assert "spark.hadoop.fs.s3a.aws.credentials.provider" not in spark_conf(Settings(state_dir=tmp_path))


def test_the_catalog_s_credentials_reach_its_client_through_the_owner_only_file_never_the_command_line(tmp_path):
    settings = Settings(
        state_dir=tmp_path,
        catalog_credential="client-id:client-secret",
        catalog_oauth2_server_uri="https://auth.example/oauth/token",
        catalog_scope="PRINCIPAL_ROLE:ALL",
    )
    command = spark_submit_command(settings, Path("job.py"), [], secrets_file=tmp_path / "secrets.properties")
    assert "client-secret" not in " ".join(command)
    assert "spark.sql.catalog.lakehouse.credential=client-id:client-secret\n" in (
        (tmp_path / "secrets.properties").read_text()
    )
    assert "spark.sql.catalog.lakehouse.oauth2-server-uri=https://auth.example/oauth/token" in command
    assert "spark.sql.catalog.lakehouse.scope=PRINCIPAL_ROLE:ALL" in command


def test_the_tls_profile_s_generated_secrets_are_read_only_when_the_settings_name_none(tmp_path):
    settings = Settings(state_dir=tmp_path, security="tls")
    assert settings.marquez_api_url.startswith("https://") and settings.s3_url.startswith("https://")
    assert secret_in_effect(settings, "marquez_api_key") == ""  # the stack has not written its secrets yet
    settings.security_dir.mkdir()
    private_file(settings.security_dir, "LINEAGE_ASSETS_MARQUEZ_API_KEY=generated\n", PROFILE_SECRETS)
    (settings.security_dir / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\nprofile CA\n")
    assert secret_in_effect(settings, "marquez_api_key") == "generated"
    transport = marquez_backend(settings).client_config["transport"]
    assert (transport["url"], transport["auth"]) == (
        settings.marquez_api_url,
        {"type": "api_key", "apiKey": "generated"},
    )
    bundle = Path(transport["verify"])  # the system's CAs and the profile's, for requests
    assert bundle.read_text().endswith("profile CA\n") and bundle.stat().st_size > 10_000
    assert (
        secret_in_effect(Settings(state_dir=tmp_path, security="tls", marquez_api_key="own"), "marquez_api_key")
        == "own"
    )
    assert secret_in_effect(Settings(state_dir=tmp_path), "marquez_api_key") == ""
    assert Backend.marquez("https://m").transport().kind == "http"


def test_the_secrets_looked_for_are_the_settings_the_profile_s_and_the_client_file_s_and_none_too_short(tmp_path):
    settings = Settings(
        state_dir=tmp_path,
        s3_secret_key="s3-secret-value",
        catalog_token="short",  # too short to tell from ordinary text
        kafka_client_properties=str(private_file(tmp_path, SCRAM_JAVA)),
    )
    properties = read_kafka_properties(Path(settings.kafka_client_properties))
    found = secrets_in_effect(settings)
    assert {"s3-secret-value", "p@ss w0rd", "registry-secret", properties["sasl.jaas.config"]} <= set(found)
    assert "short" not in found and "orders-app" not in found and "registry-key" not in found
    assert [len(value) for value in found] == sorted((len(value) for value in found), reverse=True)

    profile = Settings(state_dir=tmp_path / "tls", security="tls")
    profile.security_dir.mkdir(parents=True)
    private_file(profile.security_dir, "LINEAGE_ASSETS_MARQUEZ_API_KEY=generated-key\n", PROFILE_SECRETS)
    assert "generated-key" in secrets_in_effect(profile)
