"""The official OpenLineage JSON Schemas, pinned, and validation of events against them.

Each schema the tests accept is pinned in ``openlineage_schemas.lock.json`` by its published URL
(its ``$id``) and the sha256 of its canonical JSON (keys sorted, no spaces): the published copy and
the specification repository's differ in layout only. They are fetched once from those URLs into
``.cache/openlineage-spec/``, or read from the folder ``LINEAGE_ASSETS_OPENLINEAGE_SPEC`` names on a
machine without access (any layout: files are matched by ``$id``).

The event is checked against the definition its ``schemaURL`` names; each facet whose ``_schemaURL``
is under the specification's URLs against exactly the definition it names (a standard facet's own,
or the spec's base ``RunFacet`` that an integration's custom facet, such as Spark's, points at), and
a URL the pinned set lacks is a violation. The project's own facets (``urn:lineage_assets:schema:…``)
are checked against the schemas packaged with it, matched by ``$id``. Other custom facets have no
schema here.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from functools import cache
from pathlib import Path

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from lineage_assets.settings import ENV_PREFIX
from lineage_assets.settings_environment import settings_from_env

LOCK = Path(__file__).with_name("openlineage_schemas.lock.json")
OFFLINE_SETTING = f"{ENV_PREFIX}OPENLINEAGE_SPEC"
SPEC = "https://openlineage.io/spec/"
PROJECT_FACETS = "urn:lineage_assets:schema:"
PROJECT_SCHEMAS = Path(__file__).parent.parent / "lineage_assets" / "lineage" / "schemas"
FORMATS = Draft202012Validator.FORMAT_CHECKER  # uuid, date-time, ...


class SchemaUnavailable(RuntimeError):
    """A pinned schema that cannot be had, or one whose content is not what was pinned."""


def canonical_sha256(schema: dict) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _offline(folder: Path) -> dict[str, dict]:
    found = {}
    for path in sorted(folder.rglob("*.json")):
        schema = json.loads(path.read_text())
        if isinstance(schema, dict) and "$id" in schema:
            found[schema["$id"]] = schema
    return found


def _download(url: str, cached: Path) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read()
    except (urllib.error.URLError, OSError) as error:
        raise SchemaUnavailable(
            f"cannot download the OpenLineage schema {url}: {error}; without access to openlineage.io, set "
            f"{OFFLINE_SETTING} to a folder holding copies of the pinned schemas ({LOCK.name})"
        ) from None
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(body)
    return json.loads(body)


@cache
def pinned_schemas() -> dict[str, dict]:
    """Every pinned schema by its URL, each checked against its pin."""
    pins = json.loads(LOCK.read_text())["schemas"]
    folder = os.environ.get(OFFLINE_SETTING)
    offline = _offline(Path(folder)) if folder else {}
    cache_dir = settings_from_env().cache_dir / "openlineage-spec"
    schemas = {}
    for url, digest in pins.items():
        if folder:
            if url not in offline:
                raise SchemaUnavailable(f"{OFFLINE_SETTING}={folder} holds no schema with $id {url}")
            schema, origin = offline[url], f"{OFFLINE_SETTING}={folder}"
        else:
            cached = cache_dir / url.removeprefix(SPEC)
            schema = json.loads(cached.read_text()) if cached.is_file() else _download(url, cached)
            origin = str(cached)
        if canonical_sha256(schema) != digest:
            raise SchemaUnavailable(f"the schema {url} from {origin} is not the one pinned in {LOCK.name}")
        schemas[url] = schema
    return schemas


@cache
def _registry() -> tuple[Registry, dict[str, dict]]:
    own = {s["$id"]: s for s in (json.loads(p.read_text()) for p in sorted(PROJECT_SCHEMAS.glob("*.json")))}
    known = {**pinned_schemas(), **own}
    return Registry().with_resources((url, Resource.from_contents(schema)) for url, schema in known.items()), known


def _facet_maps(event: dict):
    yield "dataset", event.get("dataset", {}).get("facets", {})  # a static DatasetEvent's
    yield "run", event.get("run", {}).get("facets", {})
    yield "job", event.get("job", {}).get("facets", {})
    for side in ("inputs", "outputs"):
        for dataset in event.get(side, []):
            yield f"{side}:{dataset.get('name')}", dataset.get("facets", {})
            yield f"{side}:{dataset.get('name')}:io", dataset.get("inputFacets", {}) or dataset.get("outputFacets", {})


def _violations(where: str, instance: dict, url: str) -> list[str]:
    return [f"{where}: {e.message} at {list(e.absolute_path)}" for e in _validator(url).iter_errors(instance)]


@cache
def _validator(url: str) -> Draft202012Validator:
    """The validator of the definition ``url`` points at (``…#/$defs/X``), or of a whole schema; made
    once, so that the references it resolves are resolved once."""
    registry, known = _registry()
    schema = {"$ref": url} if "#" in url else known[url]
    return Draft202012Validator(schema, registry=registry, format_checker=FORMATS)


def validate_event(event: dict) -> list[str]:
    """Every violation of the core schema or of a facet's schema, as readable lines (empty = valid)."""
    known = _registry()[1]
    core_url = event.get("schemaURL", "").split("#")[0]
    if core_url not in known:
        return [f"event: no pinned schema for schemaURL {event.get('schemaURL')!r}"]
    # Against the definition the URL names (RunEvent, JobEvent, DatasetEvent): its violations are
    # readable, where the core schema's oneOf of all three only says that none matched.
    errors = _violations("event", event, event["schemaURL"])
    for where, facet_map in _facet_maps(event):
        for key, facet in (facet_map or {}).items():
            url = facet.get("_schemaURL", "")
            if not url.startswith((SPEC, PROJECT_FACETS)):
                continue
            schema = known.get(url.split("#")[0])
            if schema is None:
                errors.append(f"{where}.{key}: no pinned schema for _schemaURL {url!r}")
            elif "#" in url:  # the definition the URL points at (a facet's own, or the spec's base RunFacet)
                errors += _violations(f"{where}.{key}", facet, url)
            else:  # a schema whose properties name the facet by its key
                errors += _violations(f"{where}.{key}", {key: facet}, url)
    return errors
