"""Tests of the project's assets as a repository using it writes them: docs/testing.md shows this
file whole, block by block (tests/unit/test_testing_page.py holds the page to it)."""

import dagster as dg
import pytest

from lineage_assets.assets.orders import OrdersConfig, orders
from lineage_assets.definitions import build_definitions
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.testing import build_asset_context, materialize, pipeline_of_its_own


def test_an_asset_given_no_resources_is_refused_before_it_runs():
    refused = "resource with key 'environment' required by op 'orders' was not provided"
    with pytest.raises(dg.DagsterInvalidDefinitionError, match=refused):
        dg.materialize([orders])


def test_orders_materialized_into_a_pipeline_of_its_own(stack, settings):
    own = pipeline_of_its_own(settings, "docs-materialize")
    result = materialize([orders], own, run_config=dg.RunConfig({"orders": OrdersConfig(count=10)}))
    (produced,) = result.asset_materializations_for_node("orders")
    assert produced.metadata["rows_out"].value == 10
    assert list(produced.metadata["kafka/end_offsets"].value) == [own.orders_topic]


def test_orders_invoked_directly(stack, settings):
    own = pipeline_of_its_own(settings, "docs-direct")
    with build_asset_context(orders, own) as context:
        result = orders(context, OrdersConfig(count=5))
    assert result.metadata["rows_out"] == 5


def test_the_resources_of_an_environments_definitions_run_an_asset_of_its_module(stack, settings):
    own = build_definitions(SettingsResource.of(pipeline_of_its_own(settings, "docs-definitions")))
    result = dg.materialize([orders], resources=own.resources, run_config={"ops": {"orders": {"config": {"count": 3}}}})
    assert result.asset_materializations_for_node("orders")[0].metadata["rows_out"].value == 3
