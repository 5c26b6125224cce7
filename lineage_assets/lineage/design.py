"""The designed graph as OpenLineage static events: what Marquez can show before anything runs.

From what the loaded Dagster definitions say of each asset (``AssetDesign``, read by
``assets/design.py``, which knows Dagster) and from the dataset catalog (identities, producing jobs,
declared column lineage): one ``DatasetEvent`` per asset's dataset and one ``JobEvent`` per producing
job and per asset check's job, built with the same facets as the run events (``lineage/events.py``,
``lineage/run_datasets.py``).

Publishing is idempotent: each event's content without its time is hashed, and the hashes of what
was last published are kept in the lineage folder (``design.json``); only an event whose hash
changed is recorded again, so an unchanged graph sends nothing. What was published and is no longer
designed (an asset removed or renamed) is retired, in events too: its dataset DROPped, its job
published with no inputs or outputs and a ``retired`` tag (its runs stay reachable by id).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from openlineage.client.event_v2 import DatasetEvent, InputDataset, Job, JobEvent, OutputDataset, StaticDataset
from openlineage.client.facet_v2 import (
    DatasetFacet,
    JobFacet,
    documentation_dataset,
    documentation_job,
    lifecycle_state_change_dataset,
    ownership_dataset,
    schema_dataset,
    tags_dataset,
    tags_job,
)

from lineage_assets.datasets import CHECKS, DATASETS, Column, Dataset
from lineage_assets.lineage import events
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage.facets import PRODUCER
from lineage_assets.lineage.run_datasets import column_lineage_facet, dataset_facets
from lineage_assets.lineage.transport import event_line
from lineage_assets.private_files import replace_private
from lineage_assets.settings import Settings

TAG_SOURCE = "DAGSTER"
RETIRED = ("lineage_assets.design", "retired")  # the tag of a job no longer in the definitions


class DesignError(ValueError):
    """Definitions the catalog cannot describe: an asset it does not name."""


@dataclass(frozen=True)
class AssetDesign:
    """One asset as the loaded definitions declare it."""

    key: str  # "/"-separated, a key of the dataset catalog
    group: str
    kinds: tuple[str, ...]
    owners: tuple[str, ...]
    description: str
    columns: tuple[Column, ...]
    upstream: tuple[str, ...]  # asset keys it depends on
    checks: tuple[str, ...] = ()  # names of its asset checks


def _catalog(key: str) -> Dataset:
    if key not in DATASETS:
        raise DesignError(f"asset {key!r} is not in the dataset catalog (lineage_assets/datasets.py)")
    return DATASETS[key]


def _schema(columns: tuple[Column, ...]) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(
        fields=[
            schema_dataset.SchemaDatasetFacetFields(name=c.name, type=c.type, description=c.description)
            for c in columns
        ]
    )


def _declared_lineage(dataset: Dataset, settings: Settings) -> dict[str, DatasetFacet]:
    if not dataset.expected_lineage:
        return {}
    return {"columnLineage": column_lineage_facet(dataset.expected_lineage, settings)}


def dataset_event(asset: AssetDesign, settings: Settings, at: dt.datetime) -> DatasetEvent:
    """The asset's dataset: schema, documentation, owners, tags and, beside its schema, the column
    lineage the catalog declares, since Marquez shows a dataset with the facets of its event and keeps
    a job event's output facets on a version it never shows (nor column lineage without a run)."""
    dataset = _catalog(asset.key)
    identity = dataset.identity(settings)
    facets: dict[str, DatasetFacet] = {
        **dataset_facets(dataset, settings),
        "schema": _schema(asset.columns),
        **_declared_lineage(dataset, settings),
        "documentation": documentation_dataset.DocumentationDatasetFacet(
            description=f"{dataset.title} (Dagster asset `{asset.key}`). {asset.description}"
        ),
        "ownership": ownership_dataset.OwnershipDatasetFacet(
            owners=[ownership_dataset.Owner(name=owner) for owner in asset.owners]
        ),
        "tags": tags_dataset.TagsDatasetFacet(
            tags=[
                tags_dataset.TagsDatasetFacetFields(key=key, value=value, source=TAG_SOURCE)
                for key, value in (
                    ("dagster.asset_key", asset.key),
                    ("dagster.group", asset.group),
                    *(("dagster.kind", kind) for kind in sorted(asset.kinds)),
                )
            ]
        ),
    }
    return DatasetEvent(
        eventTime=at.isoformat(),
        dataset=StaticDataset(namespace=identity.namespace, name=identity.name, facets=facets),
        producer=PRODUCER,
    )


def _input(key: str, settings: Settings) -> InputDataset:
    identity = _catalog(key).identity(settings)
    return InputDataset(namespace=identity.namespace, name=identity.name)


def job_event(asset: AssetDesign, settings: Settings, at: dt.datetime) -> JobEvent:
    """The asset's producing job: what it reads and writes, and the column lineage the catalog declares
    (the written dataset's schema is its own event's, so a schema change re-sends that one only)."""
    dataset = _catalog(asset.key)
    identity = dataset.identity(settings)
    facets = _declared_lineage(dataset, settings)
    return JobEvent(
        eventTime=at.isoformat(),
        job=events.job(dataset, settings),
        inputs=[_input(key, settings) for key in asset.upstream],
        outputs=[OutputDataset(namespace=identity.namespace, name=identity.name, facets=facets)],
        producer=PRODUCER,
    )


def check_job_event(name: str, settings: Settings, at: dt.datetime) -> JobEvent:
    check = CHECKS[name]
    return JobEvent(
        eventTime=at.isoformat(),
        job=events.check_job(check, settings),
        inputs=[_input(check.dataset, settings)],
        outputs=[],
        producer=PRODUCER,
    )


def design_events(assets: Iterable[AssetDesign], settings: Settings) -> list[DatasetEvent | JobEvent]:
    """The designed graph: per asset its dataset, then its producing job, then its checks' jobs."""
    at = dt.datetime.now(dt.UTC)
    designed: list[DatasetEvent | JobEvent] = []
    for asset in sorted(assets, key=lambda a: a.key):
        designed += [dataset_event(asset, settings, at), job_event(asset, settings, at)]
        # A check the catalog does not list is evaluated inside its asset's run: no job of its own.
        designed += [check_job_event(name, settings, at) for name in sorted(asset.checks) if name in CHECKS]
    return designed


def retired_dataset_event(namespace: str, name: str, at: dt.datetime) -> DatasetEvent:
    drop = lifecycle_state_change_dataset.LifecycleStateChange.DROP
    facets: dict[str, DatasetFacet] = {
        "lifecycleStateChange": lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(drop)
    }
    return DatasetEvent(
        eventTime=at.isoformat(),
        dataset=StaticDataset(namespace=namespace, name=name, facets=facets),
        producer=PRODUCER,
    )


def retired_job_event(namespace: str, name: str, at: dt.datetime) -> JobEvent:
    facets: dict[str, JobFacet] = {
        "documentation": documentation_job.DocumentationJobFacet(
            description="No longer in the project's definitions (removed or renamed); its runs are history."
        ),
        "tags": tags_job.TagsJobFacet(
            tags=[tags_job.TagsJobFacetFields(key=RETIRED[0], value=RETIRED[1], source="lineage_assets")]
        ),
    }
    return JobEvent(
        eventTime=at.isoformat(),
        job=Job(namespace=namespace, name=name, facets=facets),
        inputs=[],
        outputs=[],
        producer=PRODUCER,
    )


def _retired(event: dict[str, Any]) -> bool:
    if "dataset" in event:
        lifecycle = (event["dataset"].get("facets") or {}).get("lifecycleStateChange") or {}
        return lifecycle.get("lifecycleStateChange") == "DROP"
    tags = ((event["job"].get("facets") or {}).get("tags") or {}).get("tags", [])
    return any((tag["key"], tag["value"]) == RETIRED for tag in tags)


def _identity(event: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name) of what a static event describes."""
    kind = "dataset" if "dataset" in event else "job"
    return kind, event[kind]["namespace"], event[kind]["name"]


def subject(event: dict[str, Any]) -> str:
    """What a static event describes: ``job NAMESPACE/NAME`` or ``dataset NAMESPACE NAME``."""
    kind, namespace, name = _identity(event)
    return f"dataset {namespace} {name}" if kind == "dataset" else f"job {namespace}/{name}"


def _digest(event: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps({**event, "eventTime": None}, sort_keys=True).encode()).hexdigest()


class _Publication(TypedDict):
    """What ``design.json`` keeps of a subject's event last published."""

    digest: str  # of its content without its time
    kind: str  # dataset or job
    namespace: str
    name: str
    retired: NotRequired[bool]


@dataclass(frozen=True)
class Published:
    sent: tuple[str, ...]  # subjects whose event was recorded for delivery
    unchanged: int  # events left out: the same content was published before
    retired: tuple[str, ...] = ()  # subjects published before and no longer designed, retired now
    hidden: tuple[str, ...] = ()  # retired jobs hidden in Marquez since ("namespace/name")


def publish(designed: list[DatasetEvent | JobEvent], emitter: LineageEmitter, force: bool = False) -> Published:
    """Record for delivery every designed event whose content differs from what was last published
    (all of them with ``force``), and the retirement of what was published and is designed no more,
    through the emitter's durable log; never raises for delivery."""
    record_path = emitter.folder / "design.json"
    record: dict[str, _Publication]  # by subject
    try:
        record = json.loads(record_path.read_text())
    except (FileNotFoundError, ValueError):
        record = {}
    sent, retired = [], []
    at = dt.datetime.now(dt.UTC)
    bodies = [json.loads(event_line(event)) for event in designed]
    for kind, namespace, name in {
        (e["kind"], e["namespace"], e["name"]) for e in record.values() if not e.get("retired")
    } - {_identity(body) for body in bodies}:
        retirement = (retired_dataset_event if kind == "dataset" else retired_job_event)(namespace, name, at)
        bodies.append(json.loads(event_line(retirement)))
    for body in bodies:
        name, digest = subject(body), _digest(body)
        if not force and (previous := record.get(name)) and previous.get("digest") == digest:
            continue
        emitter.emit(event_line(body))
        kind, namespace, dataset_or_job = _identity(body)
        record[name] = {"digest": digest, "kind": kind, "namespace": namespace, "name": dataset_or_job}
        if _retired(body):
            record[name]["retired"] = True
            retired.append(name)
        else:
            sent.append(name)
    if sent or retired:
        replace_private(record_path, json.dumps(record, indent=1, sort_keys=True))
    return Published(tuple(sent), len(designed) - len(sent), tuple(retired))


@dataclass(frozen=True)
class PublishedDesign:
    """The designed graph as last published: each job's inputs and outputs, each dataset's columns."""

    jobs: dict[str, tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]]]]  # "namespace/name" -> (in, out)
    schemas: dict[tuple[str, str], dict[str, str]]  # dataset -> column -> type
    retired: frozenset[tuple[str, str]] = frozenset()  # (namespace, name) of jobs published, then retired

    @classmethod
    def from_events(cls, static: list[dict[str, Any]]) -> PublishedDesign:
        """From the static events recorded, in order: a later event of a job or dataset replaces its earlier one."""
        jobs: dict[str, tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]]]] = {}
        schemas: dict[tuple[str, str], dict[str, str]] = {}
        retired: set[tuple[str, str]] = set()
        for event in static:
            kind, namespace, name = _identity(event)
            if kind == "job":
                (retired.add if _retired(event) else retired.discard)((namespace, name))
            if _retired(event):
                if kind == "dataset":
                    schemas.pop((namespace, name), None)
                else:
                    jobs.pop(f"{namespace}/{name}", None)
            elif "dataset" in event:
                node = (event["dataset"]["namespace"], event["dataset"]["name"])
                fields = ((event["dataset"].get("facets") or {}).get("schema") or {}).get("fields", [])
                schemas[node] = {field["name"]: field.get("type", "") for field in fields}
            else:
                sides = [
                    frozenset((d["namespace"], d["name"]) for d in event.get(side) or [])
                    for side in ("inputs", "outputs")
                ]
                jobs[f"{event['job']['namespace']}/{event['job']['name']}"] = (sides[0], sides[1])
        return cls(jobs, schemas, frozenset(retired))
