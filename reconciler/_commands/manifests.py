"""``optk manifests``: the YAML stream that deploys an operator, with its derived role.

Pure except for ``manifests_command`` (load the operator and the samples, print): ``manifests``
turns ``OperatorFacts`` (``reconciler._commands.rbac.operator_facts``) and ``ManifestOptions`` into
the objects, ``render`` into one ``kubectl apply -f -`` stream whose roles carry a comment above
each rule saying what it is for. The objects: a Namespace, the operator's CRDs (its ``install``
objects, with the last-applied annotation the operator's own install would write, so that the
operator finds them equal and needs no ``create``), a ServiceAccount, a ClusterRole and/or
Roles with their bindings (``reconciler._commands.rbac.derive_rules``), a Deployment of two
replicas running ``optk run MODULE:ATTR --leader-elect`` (the metrics port on every
interface, probes on ``/healthz`` and ``/readyz`` of that port, resource requests, numeric
non-root user, read-only root file system, no capabilities, seccomp RuntimeDefault), a metrics
Service and a PodDisruptionBudget; with a ``Webhooks`` start hook also its Service, webhook
configurations, the CRDs' conversion stanza and their rules (``webhook_manifests``).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import yaml

from objectmatcher import set_last_applied
from reconciler._base.errors import ReconcilerUsageError, ReconcilerUsageTypeError
from reconciler._base.metrics import ALL_INTERFACES
from reconciler._cache.inputs import PRESENT_CLUSTER
from reconciler._commands.rbac import (
    OperatorFacts,
    PolicyRule,
    RbacDerivationError,
    derive_rules,
    operator_facts,
)
from reconciler._commands.rbac_clusters import derive_cluster_rules, placed_clusters
from reconciler._commands.webhook_manifests import (
    webhook_container_port,
    webhook_objects,
    webhook_rules,
    webhooks_of,
)

__all__ = [
    "METRICS_PORT",
    "RUN_AS",
    "ManifestOptions",
    "cluster_manifests",
    "generated_parents",
    "load_samples",
    "manifests",
    "manifests_command",
    "render",
]

METRICS_PORT = 8080
RUN_AS = 65532
"""The pod's numeric user and group (distroless' ``nonroot``): ``runAsNonRoot`` alone refuses an
image whose user is a name, since the kubelet cannot tell that a name is not root."""
_NAME_LABEL = "app.kubernetes.io/name"
_PART_LABEL = "app.kubernetes.io/part-of"


@attrs.frozen(kw_only=True)
class ManifestOptions:
    """How to deploy: where, which image, what to run, and the role's scope."""

    target: str
    namespace: str
    image: str
    namespaced: bool = False
    replicas: int = 2
    generated: int = 25
    metrics_auth: bool = True
    cluster: str | None = None
    """None: the operator's own cluster. A name: the cluster children are placed in
    (``builders.placed``): only what the operator's identity needs there."""


def load_samples(source: Any, *, api_version: str, kind: str) -> list[dict[str, Any]]:
    """Parent objects from ``source``: a YAML file path (str or Path) or a list of objects;
    only those of the parent kind are kept."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8") as stream:
            try:
                objects = [d for d in yaml.safe_load_all(stream) if isinstance(d, dict)]
            except yaml.YAMLError as error:
                raise ReconcilerUsageError(
                    f"samples file {os.fspath(source)!r} is not YAML: "
                    f"{' '.join(str(error).split())}") from error
    elif isinstance(source, Iterable) and not isinstance(source, Mapping):
        objects = [dict(d) for d in source if isinstance(d, Mapping)]
    else:
        raise ReconcilerUsageTypeError(
            f"samples must be a YAML path or a list of objects, got {type(source).__name__}")
    return [o for o in objects if o.get("apiVersion") == api_version and o.get("kind") == kind]


def generated_parents(crd: Mapping[str, Any] | None, *, count: int) -> list[dict[str, Any]]:
    """Up to ``count`` parents drawn (deterministically) from the CRD's schema with
    ``builders.testing.from_schema``; none without a CRD or without Hypothesis installed."""
    if crd is None or count <= 0:
        return []
    try:
        from hypothesis import HealthCheck, given, settings

        from builders.testing import from_schema
    except ImportError:  # the `testing` extra is not installed: samples only
        return []
    drawn: list[dict[str, Any]] = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(from_schema(crd))
    def collect(parent: dict[str, Any]) -> None:
        drawn.append(parent)

    collect()
    return drawn[:count]


def _labels(facts: OperatorFacts) -> dict[str, str]:
    return {_NAME_LABEL: facts.name, _PART_LABEL: "operator-toolkit"}


def _new_meta(name: str, labels: Mapping[str, str], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    return meta


def _roles(facts: OperatorFacts, rules: Sequence[PolicyRule], namespace: str,
           ) -> list[tuple[dict[str, Any], list[str]]]:
    """ClusterRole/Roles and their bindings; a role comes with the reasons of its rules."""
    labels = _labels(facts)
    subject = {"kind": "ServiceAccount", "name": facts.name, "namespace": namespace}
    out: list[tuple[dict[str, Any], list[str]]] = []
    scopes: list[str | None] = sorted({r.namespace for r in rules},
                                      key=lambda s: (s is not None, s or ""))
    for scope in scopes:
        mine = [r for r in rules if r.namespace == scope]
        kind = "ClusterRole" if scope is None else "Role"
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
                "metadata": _new_meta(facts.name, labels, scope),
                "rules": [r.to_dict() for r in mine]}
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding",
                   "metadata": _new_meta(facts.name, labels, scope),
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind,
                               "name": facts.name},
                   "subjects": [subject]}
        out += [(role, [r.reason for r in mine]), (binding, [])]
    return out


def _deployment(facts: OperatorFacts, options: ManifestOptions) -> dict[str, Any]:
    labels = _labels(facts)
    command = ["optk", "run", options.target, "--metrics-bind-address", ALL_INTERFACES,
               "--metrics-port", str(METRICS_PORT), "--log-format", "json", "--leader-elect",
               "--lease-namespace", "$(POD_NAMESPACE)"]
    if options.metrics_auth:
        command += ["--metrics-auth"]
    if options.namespaced and facts.namespace:
        command += ["--watch-namespace", facts.namespace]
    probe = {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10,
             "timeoutSeconds": 2, "failureThreshold": 3}
    container = {
        "name": "operator",
        "image": options.image,
        "command": command,
        "env": [{"name": "POD_NAMESPACE",
                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "livenessProbe": {**probe, "initialDelaySeconds": 10},
        "readinessProbe": {**probe, "httpGet": {"path": "/readyz", "port": "metrics"}},
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"},
                      "limits": {"memory": "512Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _new_meta(facts.name, labels, options.namespace),
        "spec": {
            "replicas": options.replicas,
            "selector": {"matchLabels": {_NAME_LABEL: facts.name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": facts.name,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS,
                                        "runAsGroup": RUN_AS,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 40,
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}],
                },
            },
        },
    }


def _fleet_namespace(facts: OperatorFacts, namespace: str) -> list[dict[str, Any]]:
    """The namespace of the cluster Secrets (``reconciler.ClusterSecrets``) when it is not the
    operator's: its Role lives there, so it must exist before the Role is applied."""
    clusters = facts.clusters
    if clusters is None or clusters.namespace == namespace:
        return []
    return [{"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": clusters.namespace}}]


def cluster_manifests(
    facts: OperatorFacts, options: ManifestOptions, *, parents: Sequence[Mapping[str, Any]],
    generated: Sequence[Mapping[str, Any]] = (),
) -> list[tuple[dict[str, Any], list[str]]]:
    """The objects to apply in ``options.cluster``, a cluster children are placed in: the
    operator's Namespace and ServiceAccount there (the kubeconfig of the cluster's Secret
    authenticates as it) and the ClusterRole of ``derive_cluster_rules`` bound to it."""
    assert options.cluster is not None
    rules = derive_cluster_rules(facts, cluster=options.cluster, parents=parents,
                                 generated=generated)
    labels = _labels(facts)
    ns = options.namespace
    out: list[tuple[dict[str, Any], list[str]]] = [
        ({"apiVersion": "v1", "kind": "Namespace", "metadata": _new_meta(ns, labels)}, []),
        ({"apiVersion": "v1", "kind": "ServiceAccount",
          "metadata": _new_meta(facts.name, labels, ns)}, []),
    ]
    return out + _roles(facts, rules, ns)


def manifests(
    facts: OperatorFacts, options: ManifestOptions, *, parents: Sequence[Mapping[str, Any]],
    generated: Sequence[Mapping[str, Any]] = (),
) -> list[tuple[dict[str, Any], list[str]]]:
    """The objects to apply, in order, each with the reasons of its rules (roles only); with
    ``options.cluster``, those of that cluster (:func:`cluster_manifests`)."""
    if options.cluster is not None:
        return cluster_manifests(facts, options, parents=parents, generated=generated)
    if options.namespaced:
        facts = attrs.evolve(facts, namespace=facts.namespace or options.namespace)
    hooks = webhooks_of(facts.start_hooks, namespace=options.namespace)
    rules = (*derive_rules(facts, parents=parents, generated=generated,
                           lease_namespace=options.namespace,
                           namespaced=options.namespaced, install_applied=True,
                           metrics_auth=options.metrics_auth), *webhook_rules(hooks))
    labels = _labels(facts)
    ns = options.namespace
    selector = {_NAME_LABEL: facts.name}
    hooked, hooked_crds = webhook_objects(
        hooks, selector=selector,
        metadata=lambda name, namespace: _new_meta(name, labels, namespace))
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _new_meta(ns, labels)},
        *_fleet_namespace(facts, ns),
        *(set_last_applied(hooked_crds.get(str((o.get("metadata") or {}).get("name")), o))
          for o in facts.install),
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": _new_meta(facts.name, labels, ns)},
    ]
    out: list[tuple[dict[str, Any], list[str]]] = [(o, []) for o in objects]
    out += _roles(facts, rules, ns)
    if options.metrics_auth:
        out.append(({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                     "metadata": _new_meta(f"{facts.name}-metrics-reader", labels),
                     "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
                    ["for scrapers, not the operator: bind a Prometheus ServiceAccount to it "
                     "to scrape /metrics (optk run --metrics-auth asks the API server)"]))
    deployment = _deployment(facts, options)
    deployment["spec"]["template"]["spec"]["containers"][0]["ports"] += (
        webhook_container_port(hooks))
    out += [(o, []) for o in (
        deployment,
        {"apiVersion": "v1", "kind": "Service",
         "metadata": _new_meta(f"{facts.name}-metrics", labels, ns),
         "spec": {"selector": selector, "ports": [
             {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics",
              "protocol": "TCP"}]}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
         "metadata": _new_meta(facts.name, labels, ns),
         "spec": {"minAvailable": 1, "selector": {"matchLabels": selector}}},
        *hooked,
    )]
    return out


class _Dumper(yaml.SafeDumper):
    """Writes shared sub-objects out in full (no ``&id001`` anchors and aliases)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False)


def _comment(text: str) -> str:
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, 96))


def render(documents: Sequence[tuple[Mapping[str, Any], Sequence[str]]], *, header: str) -> str:
    """One YAML stream; a role's rules each follow a comment giving its reason."""
    parts = []
    for obj, reasons in documents:
        if not reasons:
            parts.append(_dump(dict(obj)))
            continue
        rest = {k: v for k, v in obj.items() if k != "rules"}
        text = _dump(rest) + "rules:\n"
        for rule, reason in zip(obj["rules"], reasons, strict=True):
            text += _comment(reason) + _dump([rule])
        parts.append(text)
    return _comment(header) + "---\n" + "---\n".join(parts)


def manifests_text(operator: Any, options: ManifestOptions, *,
                   samples: Sequence[Mapping[str, Any]]) -> str:
    """The YAML stream for ``operator`` (an ``Operator``) with the given sample parents."""
    facts = operator_facts(operator)
    generated = generated_parents(facts.parent_crd, count=options.generated)
    if not samples and not generated:
        raise RbacDerivationError(
            f"operator {facts.name!r}: no parents to evaluate build over: pass --samples FILE, "
            "set a `samples` attribute beside the operator, or install the parent's CRD with a "
            "schema")
    where = f" --cluster {options.cluster}" if options.cluster else ""
    header = (f"Generated by `optk manifests {options.target}{where}` for namespace "
              f"{options.namespace} from {len(samples)} sample and {len(generated)} generated "
              "parents. Regenerate instead of editing.")
    if options.cluster:
        header += (f" Apply it in cluster {options.cluster!r}; the kubeconfig of its Secret "
                   f"authenticates as ServiceAccount {options.namespace}/{facts.name} there.")
    elif clusters := placed_clusters(facts, parents=samples, generated=generated):
        named = [name for name in clusters if name != PRESENT_CLUSTER]
        where = ", ".join(named) if named else "chosen at run time, by label"
        header += (f" Children are placed in other clusters ({where}): print each one's role"
                   f" with `optk manifests {options.target} --cluster NAME` and apply it there.")
    return render(manifests(facts, options, parents=samples, generated=generated),
                  header=header)


def manifests_command(
    target: str,
    *,
    namespace: str | None = None,
    image: str | None = None,
    namespaced: bool | None = None,
    samples: Sequence[str] = (),
    metrics_auth: bool = True,
    cluster: str | None = None,
) -> str:
    """``optk manifests``: load the operator (and its ``samples`` attribute unless files are
    given; a relative path there is resolved against the module's file, files given here against
    the current directory) and return the YAML stream. ``namespaced`` None: a namespaced role
    exactly when the operator watches one namespace (``Operator.namespace``). ``cluster``: the
    stream for that cluster children are placed in (:func:`cluster_manifests`)."""
    from reconciler._commands.loading import load_target

    loaded = load_target(target)
    operator = loaded.operator
    facts = operator_facts(operator)
    sources: list[Any] = list(samples)
    if not samples and (attribute := getattr(loaded.module, "samples", None)) is not None:
        is_path = isinstance(attribute, (str, os.PathLike))
        sources = [loaded.beside(attribute) if is_path else attribute]
    parents: list[dict[str, Any]] = []
    for source in sources:
        parents += load_samples(source, api_version=facts.api_version, kind=facts.kind)
    options = ManifestOptions(
        target=loaded.target, namespace=namespace or f"{facts.name}-system",
        image=image or f"{facts.name}:latest",
        namespaced=facts.namespace is not None if namespaced is None else namespaced,
        metrics_auth=metrics_auth, cluster=cluster,
    )
    if cluster is not None and facts.clusters is None:
        raise ReconcilerUsageError(
            f"--cluster {cluster}: operator {facts.name!r} places no children in other clusters "
            "(it declares no Applying(clusters=...))")
    return manifests_text(operator, options, samples=parents)
