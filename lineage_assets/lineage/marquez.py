"""Lineage as Marquez shows it: its HTTP API read into the same ``LineageGraph`` the event log gives.

The lineage check then compares Marquez's view with the asset graph exactly as it compares the event
log's, so a difference between what the project emits and what its users see in Marquez (a job
renamed under another parent, an invented parent, an extra writer, a lost transformation, a run
turned back to RUNNING) is a gap. Marquez's own Python client (marquez-python 0.50) does not fit: it
has no call for the lineage graph, reads events from a path Marquez 0.51 does not serve
(``/events`` for ``/events/lineage``) and imports pytz without declaring it. The seven GETs this
needs, and the DELETE that hides a retired job, go through the standard library.
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lineage_assets.connections import https_context, marquez_headers
from lineage_assets.lineage.graph import ColumnHop, JobSummary, LineageGraph, job_key, parse_kinds
from lineage_assets.settings import Settings

# Marquez's run states as the OpenLineage event types that lead to them.
RUN_STATE_EVENTS = {"NEW": "START", "RUNNING": "START", "COMPLETED": "COMPLETE", "FAILED": "FAIL", "ABORTED": "ABORT"}
PAGE = 1000


class MarquezError(RuntimeError):
    """Marquez could not be read; the message names the URL."""


@dataclass(frozen=True)
class MarquezApi:
    url: str  # the API's base URL, e.g. http://127.0.0.1:15000
    timeout: float = 10.0
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # its API key, when it needs one
    context: ssl.SSLContext | None = None  # the CAs its certificate chains to, when it serves HTTPS

    @classmethod
    def of(cls, settings: Settings, timeout: float = 10.0) -> MarquezApi:
        """The settings' Marquez, with their API key and CA."""
        return cls(settings.marquez_api_url, timeout, marquez_headers(settings), https_context(settings))

    def get(self, path: str, **params: str | int) -> dict[str, Any]:
        return self._request("GET", path, **params)

    def delete_job(self, namespace: str, job: str) -> dict[str, Any]:
        """Hide a job (Marquez keeps its runs; an event of it shows it again)."""
        return self._request("DELETE", f"namespaces/{_quote(namespace)}/jobs/{_quote(job)}")

    def _request(self, method: str, path: str, **params: str | int) -> dict[str, Any]:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        address = f"{self.url.rstrip('/')}/api/v1/{path}{query}"
        try:
            with urllib.request.urlopen(
                urllib.request.Request(address, method=method, headers=dict(self.headers)),
                timeout=self.timeout,
                context=self.context,
            ) as response:
                answer: dict[str, Any] = json.load(response)  # Marquez answers each of these calls with an object
                return answer
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return {}
            raise MarquezError(f"Marquez answered {error.code} for {address}") from error
        except (urllib.error.URLError, OSError) as error:
            raise MarquezError(f"Marquez is not reachable at {address}: {error}") from error

    def pages(self, path: str, key: str, page: int = PAGE) -> Iterator[dict[str, Any]]:
        """Every item of one of Marquez's listings, in its order, a page at a time: it answers at most
        ``limit`` items per call, and a year of hourly runs is several pages."""
        offset = 0
        while True:
            items = self.get(path, limit=page, offset=offset).get(key, [])
            yield from items
            if len(items) < page:
                return
            offset += page

    def jobs(self, namespace: str) -> list[dict[str, Any]]:
        return list(self.pages(f"namespaces/{_quote(namespace)}/jobs", "jobs"))

    def runs(self, namespace: str, job: str) -> list[dict[str, Any]]:
        """Every run of the job, newest started first."""
        return list(self.pages(f"namespaces/{_quote(namespace)}/jobs/{_quote(job)}/runs", "runs"))

    def datasets(self, namespace: str) -> list[dict[str, Any]]:
        return list(self.pages(f"namespaces/{_quote(namespace)}/datasets", "datasets"))

    def dataset(self, namespace: str, name: str) -> dict[str, Any]:
        return self.get(f"namespaces/{_quote(namespace)}/datasets/{_quote(name)}")

    def dataset_versions(self, namespace: str, name: str, page: int = PAGE) -> Iterator[dict[str, Any]]:
        """The dataset's versions, newest first, each with the run that made it (``createdByRun``),
        read as far as the caller goes (a deployment writes a version per interval, each with its
        fields and facets: a reader of the newest few asks for small pages)."""
        return self.pages(f"namespaces/{_quote(namespace)}/datasets/{_quote(name)}/versions", "versions", page)

    def newest_written_version(self, namespace: str, name: str, page: int = 5) -> dict[str, Any] | None:
        """The newest version of the dataset a run wrote, or None. Not Marquez's current version: a run
        whose START's schema (the designed one) differs from its COMPLETE's (the one written) makes two
        versions, and Marquez 0.51 points the dataset at each of the run's versions in an unordered query,
        so either may end up current."""
        return next((v for v in self.dataset_versions(namespace, name, page) if v.get("createdByRun")), None)

    def run(self, run_id: str) -> dict[str, Any]:
        return self.get(f"jobs/runs/{_quote(run_id)}")

    def events(self, limit: int = PAGE) -> list[dict[str, Any]]:
        """The OpenLineage events Marquez stored, newest first."""
        stored: list[dict[str, Any]] = self.get("events/lineage", limit=limit).get("events", [])
        return stored

    def lineage(self, namespace: str, name: str, depth: int = 20) -> dict[str, Any]:
        """Marquez's graph around a dataset: from a job that last wrote (or read) it, ``depth`` jobs out."""
        return self.get("lineage", nodeId=dataset_node(namespace, name), depth=depth)

    def column_lineage(self, namespace: str, name: str, field: str | None = None) -> dict[str, Any]:
        """The upstream column graph of one field, or of every field of the dataset when ``field`` is
        None (Marquez's nodes carry each hop's transformation). Marquez 0.51 starts its walk from
        fields that have inputs, so a source topic's field has no graph, even downstream."""
        return self.get("column-lineage", nodeId=dataset_node(namespace, name, field), depth=20, withDownstream="false")


def dataset_node(namespace: str, name: str, field: str | None = None) -> str:
    """Marquez's id of a dataset (or of one of its fields) in its lineage graphs."""
    return f"datasetField:{namespace}:{name}:{field}" if field else f"dataset:{namespace}:{name}"


def lineage_page(settings: Settings, namespace: str, name: str, depth: int | None = None) -> str:
    """Marquez web's page of a dataset's lineage (``depth``: the page's Depth field, 2 unless given). A
    direct link: Marquez's search lists an Iceberg table's catalog name first, a symlink whose page
    draws no lineage."""
    page = f"{settings.marquez_web_url}/lineage/dataset/{_quote(namespace)}/{_quote(name)}"
    return page if depth is None else f"{page}?depth={depth}"


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def read_graph(api: MarquezApi, settings: Settings, jobs: list[dict[str, Any]] | None = None) -> LineageGraph:
    """Marquez's jobs in the project's namespace (with parents, inputs, outputs and newest runs) and the
    column lineage into every dataset they write; ``jobs`` is the job list when the caller has it. From the
    job list, not ``/lineage`` around a dataset: the list also names a job that is beside the asset graph,
    which a walk from its datasets never reaches."""
    graph = LineageGraph()
    for job in api.jobs(settings.lineage_namespace) if jobs is None else jobs:
        _add_job(graph, job)
    for namespace, name in sorted(set().union(*graph.outputs.values())):
        _add_column_lineage(graph, api.column_lineage(namespace, name))
    return graph


def _add_job(graph: LineageGraph, job: dict[str, Any]) -> None:
    """One of Marquez's jobs and its newest runs, those the job list carries (``latestRuns``, ten):
    Marquez builds every page of a job's runs from all the run facets it holds, so reading a year of
    runs back would cost a pass over its whole history per page; the log's check covers every run.
    The latest run is the newest started, not the job's ``latestRun``: Marquez moves that to the
    parent's run when the parent run's event arrives."""
    key = job_key(job["namespace"], job["name"])
    summary = graph.jobs.setdefault(key, JobSummary(key))
    if job.get("parentJobName"):
        summary.parent = job_key(job["namespace"], job["parentJobName"])
    for side, target in (("inputs", graph.inputs), ("outputs", graph.outputs)):
        for dataset in job.get(side) or []:
            target[key].add((dataset["namespace"], dataset["name"]))
    runs = sorted(job.get("latestRuns") or [], key=lambda run: run.get("startedAt") or run["createdAt"], reverse=True)
    for run in runs:
        summary.runs.add(run["id"])
        graph.run_states[run["id"]].append((key, RUN_STATE_EVENTS.get(run["state"], run["state"])))
    if runs:
        started, ended = (
            dt.datetime.fromisoformat(runs[0][at]) if runs[0].get(at) else None for at in ("startedAt", "endedAt")
        )
        summary.latest_run, summary.latest_state = (
            runs[0]["id"],
            RUN_STATE_EVENTS.get(runs[0]["state"], runs[0]["state"]),
        )
        summary.latest_started, summary.latest_time = started, ended or started


def _add_column_lineage(graph: LineageGraph, column_lineage: dict[str, Any]) -> None:
    """The edges of a ``/column-lineage`` answer: each field node lists its input fields, with the
    field's transformation (Marquez 0.51 keeps the per-column one, not a per-input one)."""
    for node in column_lineage.get("graph", []):
        data = node.get("data") or {}
        target = (data["namespace"], data["dataset"])
        for source in data.get("inputFields") or []:
            edge = ((source["namespace"], source["dataset"]), source["field"], target, data["field"])
            graph.column_lineage.setdefault((None, target), {})[edge] = ColumnHop(
                parse_kinds(source.get("transformationType")),
                source.get("transformationDescription") or "",
                merged=True,
            )


def lineage_nodes(api: MarquezApi, namespace: str, name: str, depth: int = 20) -> tuple[set[str], set[tuple[str, str]]]:
    """The jobs ("namespace/name") and datasets ((namespace, name)) of Marquez's lineage graph around a dataset."""
    jobs, datasets = set(), set()
    for node in api.lineage(namespace, name, depth).get("graph", []):
        data = node.get("data") or {}
        if node["type"] == "JOB":
            jobs.add(job_key(data["namespace"], data["name"]))
        elif node["type"] == "DATASET":
            datasets.add((data["namespace"], data["name"]))
    return jobs, datasets
