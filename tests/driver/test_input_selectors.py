"""Label-selector inputs in the running driver, on both servers.

Things ``a`` and ``b`` each read the ConfigMaps labelled ``team=<their spec.team>``
(``SelectorRef``) and write their names, sorted, into their own ConfigMap. Each change to the
ConfigMaps reconciles exactly the parents whose selector matches the object before or after it:
a new match, a matching one edited, one relabelled from one team to the other (both), one
deleted; a ConfigMap no selector matches reconciles nobody. The selectors are answered from the
one ConfigMap informer of the namespace.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import builders as b
from builders import objects
from builders.inputs import SelectorRef
from reconciler import KubernetesClient
from reconciler._driver.runtime import OperatorRuntime
from reconciler.testing import wait_idle
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until

pytestmark = pytest.mark.both_servers

MERGE = "application/merge-patch+json"


def _selector(parent: dict[str, Any]) -> SelectorRef:
    return SelectorRef(api_version="v1", kind="ConfigMap",
                       namespace=parent["metadata"]["namespace"],
                       match_labels={"team": parent["spec"]["team"]})


def build(parent: dict[str, Any], inputs: b.Inputs) -> list[b.ResourceBuilder]:
    """One ConfigMap listing the names of the team's ConfigMaps."""
    names = ",".join(o["metadata"]["name"] for o in inputs.selected(_selector(parent)))

    @b.resource_builder
    def cfg(parent: dict[str, Any]) -> dict[str, Any]:
        return objects.config_map(metadata={"name": f"{parent['metadata']['name']}-cfg"},
                                  data={"matched": names})

    return [cfg(parent)]


def _team_cm(ns: str, name: str, team: str, value: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"team": team}},
            "data": {"v": value}}


def _step(runtime: OperatorRuntime, ns: str, expected: set[str], change: Any) -> None:
    """Do ``change``; exactly the parents ``expected`` are reconciled, once each."""
    assert wait_idle(runtime, 30, settle=0.1)
    before = dict(runtime.stats.reconciles)
    triggered = runtime.stats.triggers["input"]
    change()
    if expected:
        assert wait_until(lambda: all(runtime.stats.reconciles[(ns, p)] > before.get((ns, p), 0)
                                      for p in expected), 15), runtime.stats.reconciles
    time.sleep(0.25)  # room for a reconcile that should not come
    assert wait_idle(runtime, 30, settle=0.1)
    changed = {k[1]: n - before.get(k, 0) for k, n in runtime.stats.reconciles.items()
               if n != before.get(k, 0)}
    assert changed == dict.fromkeys(expected, 1), changed
    assert runtime.stats.triggers["input"] - triggered == len(expected)


def test_a_selector_input_reconciles_exactly_the_parents_it_matches_before_or_after(
    client: KubernetesClient, ns: str
) -> None:
    client.create(_team_cm(ns, "x", "a"))
    operator = make_operator(ns, build=build, inputs=lambda parent: [_selector(parent)])
    with running(operator, client) as runtime:
        for team in ("a", "b"):
            client.create(thing(ns, team) | {"spec": {"team": team}})
        assert wait_until(lambda: child_data(client, ns, "a") == {"matched": "x"}
                          and child_data(client, ns, "b") == {"matched": ""}), (
            child_data(client, ns, "a"), child_data(client, ns, "b"))
        assert runtime.inputs is not None
        assert runtime.inputs.scopes == [("v1", "ConfigMap", ns, "")]  # one informer for both

        _step(runtime, ns, {"b"}, lambda: client.create(_team_cm(ns, "y", "b")))
        assert child_data(client, ns, "b") == {"matched": "y"}
        _step(runtime, ns, {"a"}, lambda: client.patch(
            "v1", "ConfigMap", "x", {"data": {"v": "2"}}, patch_type=MERGE, namespace=ns))
        _step(runtime, ns, set(), lambda: client.create(_team_cm(ns, "z", "c")))
        _step(runtime, ns, {"a", "b"}, lambda: client.patch(
            "v1", "ConfigMap", "x", {"metadata": {"labels": {"team": "b"}}}, patch_type=MERGE,
            namespace=ns))
        assert child_data(client, ns, "a") == {"matched": ""}
        assert child_data(client, ns, "b") == {"matched": "x,y"}  # sorted by name
        _step(runtime, ns, {"b"}, lambda: client.delete("v1", "ConfigMap", "y", namespace=ns))
        assert child_data(client, ns, "b") == {"matched": "x"}
