"""The public surface: DESIGN.md section 2 names exist as written, each facade's ``__all__`` is
exactly its public names, and every public name has a docstring and is documented in ``docs/``.

Acceptance checks outside the test suite use these names; renaming one is a breaking change.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

import builders
import builders.names
import builders.objects
import builders.testing
import objectmatcher
import reconciler
import reconciler.embedded
import reconciler.informers
import reconciler.planning
import reconciler.queues

FACADES = (
    "objectmatcher",
    "builders",
    "builders.composition",
    "builders.convert",
    "builders.health",
    "builders.helm",
    "builders.inputs",
    "builders.names",
    "builders.objects",
    "builders.schemas",
    "builders.specs",
    "builders.testing",
    "reconciler",
    "reconciler.clocks",
    "reconciler.embedded",
    "reconciler.events",
    "reconciler.informers",
    "reconciler.leadership",
    "reconciler.metrics",
    "reconciler.planning",
    "reconciler.queues",
    "reconciler.testing",
    "reconciler.webhooks",
)
DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_objectmatcher_names_of_design_section_2() -> None:
    assert objectmatcher.LAST_APPLIED_ANNOTATION == "optk.dev/last-applied"
    desired = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "a", "namespace": "n"}, "data": {"k": "v"}}
    live = objectmatcher.set_last_applied(desired)
    assert objectmatcher.LAST_APPLIED_ANNOTATION in live["metadata"]["annotations"]
    assert objectmatcher.get_last_applied(live) == desired
    assert objectmatcher.get_last_applied(desired) is None
    result = objectmatcher.calculate_patch(
        live, {**desired, "data": {"k": "w"}}, objectmatcher.ignore_status_fields(),
        objectmatcher.ignore_field("spec.replicas"),
        objectmatcher.ignore_pvc_template_type_meta_and_status(),
    )
    assert result.is_empty is False
    assert result.patch_type in ("application/strategic-merge-patch+json",
                                 "application/merge-patch+json")
    assert isinstance(result.patch, dict)
    [item] = [d for d in result.diff if d.path == ("data", "k")]
    assert (item.op, item.old, item.new) == ("change", "v", "w")


def test_builders_names_of_design_section_2() -> None:
    states = (builders.DesiredState.PRESENT, builders.DesiredState.ABSENT,
              builders.DesiredState.CREATED)
    assert len(set(states)) == 3
    assert callable(builders.testing.check_builders)
    assert builders.ResourceBuilder is not None


def test_reconciler_names_of_design_section_2() -> None:
    assert {a.name for a in reconciler.Action} >= {
        "CREATED", "UPDATED", "UNCHANGED", "DELETED", "RECREATED", "SKIPPED"}
    assert callable(reconciler.ResourceReconciler.reconcile_resource)
    assert "action" in {f.name for f in reconciler.ReconcileResult.__attrs_attrs__}
    assert callable(reconciler.KubernetesClient)


def test_embedded_server_names_of_design_section_2() -> None:
    with reconciler.embedded.EmbeddedApiServer() as server:
        assert server.url.startswith("https://127.0.0.1:")
        assert server.token
        assert Path(server.kubeconfig_path).stat().st_mode & 0o777 == 0o600
        client = reconciler.KubernetesClient(server.api_client())
        client.list("v1", "Namespace")
        counts = server.request_counts()
    assert set(counts) >= {"get", "list", "watch", "create", "update", "patch", "delete",
                           "deletecollection"}
    assert counts["list"] >= 1


def _public_names(module: object) -> set[str]:
    """What ``from module import *`` would offer without ``__all__``, minus submodules and the
    ``from __future__ import annotations`` feature."""
    return {
        name for name, value in vars(module).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
    }


@pytest.mark.parametrize("facade", FACADES)
def test_all_is_exactly_the_public_names(facade: str) -> None:
    module = importlib.import_module(facade)
    for name in module.__all__:  # a lazy facade (PEP 562: ``reconciler``) loads names on use
        hasattr(module, name)
    declared, public = set(module.__all__), _public_names(module)
    assert not declared - public, f"{facade}.__all__ names what is not there: {declared - public}"
    assert not public - declared, f"{facade}: public but not in __all__: {public - declared}"


def test_builders_facade_keeps_what_an_operator_calls() -> None:
    # The object helpers, label keys, validators and conversions live in public submodules.
    # issue 25 added Inputs (the value build(parent, inputs) receives): 31; issue 36 shared: 32;
    # issue 41 placed (a child placed in another cluster): 33
    assert len(builders.__all__) <= 33
    assert "deployment" not in builders.__all__
    assert callable(builders.objects.deployment)
    assert builders.names.MANAGED_BY_LABEL == "app.kubernetes.io/managed-by"


def test_reconciler_facade_keeps_what_an_operator_calls() -> None:
    # The machinery (informers, queues, clocks, metrics, plans) lives in public submodules; the
    # face holds what an operator's definition names (its settings, strategies and errors: the
    # third wave added PermanentError, the apply strategies and the drift settings).
    # issue 37 added the settings groups an Operator names (Policies, Applying, Watching,
    # Serving, Reporting) and the reconcilers' ParentSettings and ResourceSettings, which
    # replace 18 flat Operator keywords and 27 constructor keywords: 56; and StartContext, what
    # an on_start hook receives instead of the runtime: 57; issue 41 ClusterSecrets (the
    # clusters children may be placed in): 58
    assert len(reconciler.__all__) <= 58
    for machinery in ("TokenBucket", "WorkQueue", "Informer", "IndexedCache", "VirtualClock",
                      "RealClock", "HealthServer", "EventRecorder"):
        assert machinery not in reconciler.__all__
    assert callable(reconciler.queues.TokenBucket)
    assert callable(reconciler.informers.InformerManager)
    assert callable(reconciler.planning.plan_child)


@pytest.mark.parametrize("facade", FACADES)
def test_every_public_name_has_a_docstring_and_is_documented(facade: str) -> None:
    module = importlib.import_module(facade)
    names = module.__all__
    assert len(names) == len(set(names)), "duplicate names in __all__"
    docs = "\n".join(p.read_text() for p in sorted(DOCS.glob("*.md")))
    undocumented = [n for n in names if not re.search(rf"\b{re.escape(n)}\b", docs)]
    assert not undocumented, f"{facade}: public names not mentioned in docs/: {undocumented}"
    for name in names:
        value = getattr(module, name)  # AttributeError: __all__ names what is not there
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{facade}.{name} has no docstring"
