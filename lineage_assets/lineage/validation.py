"""Validation of OpenLineage events against the official JSON Schemas, resolved locally.

The core event is checked against ``OpenLineage.json`` (which holds every facet to the base facet
rules); each standard facet (``_schemaURL`` under the spec's facets) also against its own schema
file, matched by file name so a producer's facet version is checked against the spec version given.
The project's own facets (``_schemaURL`` ``urn:lineage_assets:schema:…``) are checked against the
schema packaged beside this module (``schemas/``, matched by ``$id``). Other custom facets (an
integration's own, such as Spark's) have no schema here beyond the base rules. No schema is fetched
over the network.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

FORMATS = Draft202012Validator.FORMAT_CHECKER  # uuid, date-time, ...
STANDARD_FACETS = "https://openlineage.io/spec/facets/"
PROJECT_FACETS = "urn:lineage_assets:schema:"
PROJECT_SCHEMAS = Path(__file__).parent / "schemas"


@cache
def _load(spec_dir: Path) -> tuple[Registry, dict, dict[str, dict], dict[str, dict]]:
    core = json.loads((spec_dir / "OpenLineage.json").read_text())
    facets = {path.name: json.loads(path.read_text()) for path in sorted((spec_dir / "facets").glob("*.json"))}
    own = {
        schema["$id"]: schema
        for schema in (json.loads(path.read_text()) for path in sorted(PROJECT_SCHEMAS.glob("*.json")))
    }
    registry = Registry().with_resources(
        [(core["$id"], Resource.from_contents(core))]
        + [(f["$id"], Resource.from_contents(f)) for f in [*facets.values(), *own.values()]]
    )
    return registry, core, facets, own


def _facet_maps(event: dict):
    yield "run", event.get("run", {}).get("facets", {})
    yield "job", event.get("job", {}).get("facets", {})
    for side in ("inputs", "outputs"):
        for dataset in event.get(side, []):
            yield f"{side}:{dataset.get('name')}", dataset.get("facets", {})
            yield f"{side}:{dataset.get('name')}:io", dataset.get("inputFacets", {}) or dataset.get("outputFacets", {})


def validate_event(event: dict, spec_dir: Path) -> list[str]:
    """Every violation of the core schema or of a facet's schema, as readable lines (empty = valid)."""
    registry, core, facets, own = _load(spec_dir.resolve())
    errors = [
        f"event: {e.message} at {list(e.absolute_path)}"
        for e in Draft202012Validator(core, registry=registry, format_checker=FORMATS).iter_errors(event)
    ]
    for where, facet_map in _facet_maps(event):
        for key, facet in (facet_map or {}).items():
            url = facet.get("_schemaURL", "")
            if url.startswith(STANDARD_FACETS):
                schema = facets.get(url.split("#")[0].rsplit("/", 1)[-1])
            elif url.startswith(PROJECT_FACETS):
                schema = own.get(url.split("#")[0])
            else:
                continue
            if schema is None:
                errors.append(f"{where}.{key}: no schema for _schemaURL {url!r}")
                continue
            validator = Draft202012Validator(schema, registry=registry, format_checker=FORMATS)
            errors += [
                f"{where}.{key}: {e.message} at {list(e.absolute_path)}" for e in validator.iter_errors({key: facet})
            ]
    return errors
