"""A new operator version reaches existing parents at a restart; the same version does not
reconcile anything (reconciler._driver.upgrades, the fingerprint in the heartbeat Lease)."""

from __future__ import annotations

import logging
import textwrap
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from reconciler import KubernetesClient
from reconciler._driver.upgrades import operator_fingerprint
from reconciler.testing import wait_idle
from tests.driver.conftest import (
    child_data,
    import_file,
    make_operator,
    running,
    thing,
    wait_until,
)

_SOURCE = '''
"""Version {version} of a Thing operator."""
from builders import child_name, resource_builder
from builders.objects import config_map


@resource_builder
def settings(parent):
    return config_map(metadata={{"name": child_name(parent["metadata"]["name"], "cfg")}},
                      data={{"value": str(parent["spec"]["value"]), {extra}}})


def build(parent):
    return [settings(parent)]
'''


def _version(tmp_path: Path, version: str, extra: str) -> ModuleType:
    """Write and import one version of the operator's code (its own directory and module)."""
    folder = tmp_path / f"v{version}"
    folder.mkdir()
    path = folder / "thing_operator.py"
    path.write_text(textwrap.dedent(_SOURCE.format(version=version, extra=extra)))
    return import_file(path)


def test_a_changed_builder_updates_existing_children_at_the_restart(
    client: KubernetesClient, ns: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    one = _version(tmp_path, "1", "")
    two = _version(tmp_path, "2", '"release": "2"')
    name = f"u-{uuid.uuid4().hex[:6]}"
    old, new = make_operator(ns, build=one.build, name=name), make_operator(
        ns, build=two.build, name=name)
    assert operator_fingerprint(old) != operator_fingerprint(new)
    names = [f"p{i}" for i in range(3)]
    with running(old, client) as runtime:
        for parent in names:
            client.create(thing(ns, parent))
        assert wait_until(lambda: all(child_data(client, ns, n) == {"value": "1"}
                                      for n in names))
        assert wait_idle(runtime, 5)
    with caplog.at_level(logging.INFO, logger="optk"), running(new, client) as runtime:
        assert wait_until(lambda: all(child_data(client, ns, n) == {"value": "1", "release": "2"}
                                      for n in names), timeout=10)
        assert runtime.stats.triggers["operator-changed"] == 3
        assert wait_until(lambda: runtime.upgrade.completed)
    assert any("operator changed (fingerprint" in r.getMessage()
               and "reconciling all 3 parents" in r.getMessage() for r in caplog.records)
    lease = client.get("coordination.k8s.io/v1", "Lease", f"{name}-resync", namespace="default")
    assert lease["metadata"]["annotations"]["optk.dev/operator-fingerprint"] == (
        operator_fingerprint(new))


def test_a_restart_with_the_same_code_reconciles_nothing(
    client: KubernetesClient, ns: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    one = _version(tmp_path, "1", "")
    operator = make_operator(ns, build=one.build)
    with running(operator, client) as runtime:
        client.create(thing(ns, "same"))
        assert wait_until(lambda: child_data(client, ns, "same") == {"value": "1"})
        assert wait_idle(runtime, 5)
        assert wait_until(lambda: runtime.upgrade.completed)
    with caplog.at_level(logging.INFO, logger="optk"), running(operator, client) as runtime:
        assert wait_until(lambda: runtime.upgrade.completed)
        assert wait_idle(runtime, 5, settle=0.3)
        assert runtime.stats.total == 0
        assert runtime.stats.writes == 0
    assert any("resuming the periodic resync" in r.getMessage()
               and "0 of 1 parents due" in r.getMessage() for r in caplog.records)



def test_the_first_start_says_it_is_the_first(
    client: KubernetesClient, ns: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    one = _version(tmp_path, "1", "")
    operator = make_operator(ns, build=one.build, name=f"first-{uuid.uuid4().hex[:6]}")
    with caplog.at_level(logging.INFO, logger="optk"), running(operator, client) as runtime:
        client.create(thing(ns, "new"))
        assert wait_until(lambda: runtime.upgrade.completed)
    messages = [r.getMessage() for r in caplog.records]
    assert any("first start of operator" in m and "no resync heartbeat yet" in m
               for m in messages), messages
    assert not any("resuming the periodic resync" in m for m in messages)
