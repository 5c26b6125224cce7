"""The command line every streaming job takes: source, registry, checkpoint, mode, report."""

from __future__ import annotations

import argparse

CATCH_UP = "catch-up"


CONTINUOUS = "continuous"


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def streaming_arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True, help="source topic")
    parser.add_argument(
        "--value-schema",
        required=True,
        help="Avro schema (JSON) the job reads the values as: the catalog's reader schema",
    )
    parser.add_argument(
        "--kafka-properties",
        help="Kafka client properties file (security.protocol, sasl.*, ssl.*, the registry's basic.auth.user.info)",
    )
    parser.add_argument("--ca-file", help="PEM file of the CAs the schema registry's certificate chains to")
    parser.add_argument("--registry-url", required=True, help="schema registry (Confluent API) of the writer versions")
    parser.add_argument("--subject", required=True, help="registry subject of the source values, e.g. orders-value")
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder of the query")
    parser.add_argument(
        "--mode",
        choices=[CATCH_UP, CONTINUOUS],
        default=CATCH_UP,
        help="catch-up: process what is available, commit, exit; continuous: run until stopped",
    )
    parser.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval in continuous mode")
    parser.add_argument(
        "--max-records-per-batch",
        type=positive_int,
        help="most records one micro-batch reads (maxOffsetsPerTrigger); default: all available",
    )
    parser.add_argument("--report", required=True, help="where to write the JSON report")
    parser.add_argument("--progress-file", help="append one JSON line per progress report to this file")
    parser.add_argument(
        "--drain-file", help="continuous mode: when this file appears, process what is available, stop and exit 0"
    )
    return parser
