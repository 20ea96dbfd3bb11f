"""``optk run``'s target loading and the resync interval's bounds (issue 11).

A target naming a missing attribute says which attribute is missing and which ``Operator``
objects the module has; ``OPTK_RESYNC_INTERVAL`` and the ConfigMap refuse an interval outside
``ResyncPolicy``'s bounds exactly as code does, never clamping it silently.
"""

from __future__ import annotations

import pytest

from reconciler._commands.loading import load_operator
from reconciler._driver.resyncs import ResyncPolicy


def test_a_missing_attribute_is_named_with_the_operators_the_module_has() -> None:
    with pytest.raises(ValueError, match="no_such_operator") as caught:
        load_operator("tests.driver.sample_operator:no_such_operator")
    message = str(caught.value)
    assert "no attribute 'no_such_operator'" in message
    assert "Operator objects: operator" in message
    assert "NoneType" not in message


def test_a_module_without_operator_objects_says_so() -> None:
    with pytest.raises(ValueError, match=r"no attribute 'operator'.*has no Operator object"):
        load_operator("tests.reconciler.conftest")


def test_an_attribute_that_is_no_operator_names_its_type_and_the_operators() -> None:
    with pytest.raises(ValueError, match=r"is not an Operator .got function; .*: operator"):
        load_operator("tests.driver.sample_operator:build")


def test_the_environment_refuses_an_interval_below_the_minimum_as_code_does() -> None:
    with pytest.raises(ValueError, match="outside its bounds"):
        ResyncPolicy(interval=10)
    with pytest.raises(ValueError, match=r"\$OPTK_RESYNC_INTERVAL.*'10s'.*60\.\.604800s"):
        ResyncPolicy().with_environment({"OPTK_RESYNC_INTERVAL": "10s"})
    with pytest.raises(ValueError, match="outside the bounds"):
        ResyncPolicy().with_environment({"OPTK_RESYNC_INTERVAL": "30d"})
    assert ResyncPolicy().with_environment({"OPTK_RESYNC_INTERVAL": "1m"}).interval == 60
    lower = ResyncPolicy(min_interval=1, interval=5)
    assert lower.with_environment({"OPTK_RESYNC_INTERVAL": "2s"}).interval == 2


def test_the_configmap_refuses_an_interval_below_the_minimum() -> None:
    configmap = {"metadata": {"name": "cfg", "namespace": "ops"},
                 "data": {"resyncInterval": "5s"}}
    with pytest.raises(ValueError, match=r"ConfigMap ops/cfg key resyncInterval.*outside"):
        ResyncPolicy().with_configmap(configmap)
