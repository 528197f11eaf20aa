"""Tenant names are spliced into key names the bridge builds and into ACL key patterns, so the
bridge holds them to the same rule the Redis start scripts do."""

from __future__ import annotations

import pytest

from bridge.service import tenants
from tests.deploy.conftest import CLIENTS, HOSTILE_CLIENT_NAMES, LONG_CLIENT_NAME


@pytest.mark.parametrize("name", [*HOSTILE_CLIENT_NAMES, LONG_CLIENT_NAME, "a:b", "a\n", "ä"])
def test_a_name_that_could_reach_other_keys_is_no_tenant(name: str) -> None:
    assert not tenants.is_tenant(name)
    with pytest.raises(ValueError, match="not a tenant name"):
        tenants.slot_key(name, 0)


@pytest.mark.parametrize("name", [*CLIENTS, "a", "x" * 32, "0-9"])
def test_the_start_scripts_names_are_tenants(name: str) -> None:
    assert tenants.is_tenant(name)
    assert tenants.slot_key(name, 7) == f"airlock:tenant:{name}:in:7"
