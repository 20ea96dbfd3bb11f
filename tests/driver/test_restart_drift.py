"""Drift made while the operator was down (or whose event the stopping runtime dropped) is
repaired at the next start, and only its parent is reconciled: no herd."""

from __future__ import annotations

import time

import pytest

from reconciler import KubernetesClient
from reconciler.testing import wait_idle
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until

MERGE = "application/merge-patch+json"


@pytest.mark.both_servers
def test_drift_made_while_down_is_repaired_at_start_without_a_herd(
    client: KubernetesClient, ns: str
) -> None:
    operator = make_operator(ns)
    names = ("edited", "deleted", "kept")
    with running(operator, client) as runtime:
        for name in names:
            client.create(thing(ns, name))
        assert wait_until(lambda: all(child_data(client, ns, n) for n in names))
        time.sleep(0.2)
        assert wait_idle(runtime, 10, settle=0.2)
        built = {n: child_data(client, ns, n) for n in names}
    # While the operator is down: a hand edit of one child, another child deleted.
    client.patch("v1", "ConfigMap", "edited-cfg", {"data": {"value": "by-hand"}},
                 patch_type=MERGE, namespace=ns)
    client.delete("v1", "ConfigMap", "deleted-cfg", namespace=ns)
    with running(operator, client) as restarted:
        repaired = wait_until(lambda: child_data(client, ns, "edited") == built["edited"]
                              and child_data(client, ns, "deleted") == built["deleted"], 15)
        assert repaired, (child_data(client, ns, "edited"), child_data(client, ns, "deleted"),
                          restarted.triggers())
        time.sleep(0.2)
        assert wait_idle(restarted, 10, settle=0.2)
        assert restarted.stats.reconciles[(ns, "kept")] == 0  # no herd at start
