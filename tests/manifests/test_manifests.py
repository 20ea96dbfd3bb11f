"""``optk manifests``: the derived role, the stream's objects, the checked-in deploy/ files,
server-side dry runs on both servers and the kubernetes-validate schemas."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from examples.thanos.operator import make_operator
from objectmatcher import get_last_applied
from reconciler import Operator, Reporting, watches
from reconciler._commands.cli import main
from reconciler._commands.manifests import ManifestOptions, manifests, manifests_command
from reconciler._commands.rbac import (
    RbacDerivationError,
    derive_rules,
    operator_facts,
    resource_for,
)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "examples" / "thanos" / "deploy" / "operator.yaml"
TARGET = "examples.thanos.operator:operator"
KUBECTL = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "kubectl"


def _stream(namespace: str = "thanos-operator-system") -> list[dict[str, Any]]:
    text = manifests_command(TARGET, namespace=namespace, image="optk-thanos:latest")
    return [d for d in yaml.safe_load_all(text) if d]


def test_deploy_directory_is_the_generators_output() -> None:
    expected = manifests_command(TARGET, image="optk-thanos:latest")
    assert DEPLOY.read_text(encoding="utf-8") == expected, (
        "examples/thanos/deploy/operator.yaml is stale: regenerate it with `optk manifests "
        f"{TARGET} --image optk-thanos:latest > {DEPLOY.relative_to(ROOT)}`")


def test_the_stream_holds_every_object_in_apply_order() -> None:
    kinds = [d["kind"] for d in _stream()]
    assert kinds == ["Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole",
                     "ClusterRoleBinding", "Role", "RoleBinding", "ClusterRole", "Deployment",
                     "Service", "PodDisruptionBudget"]


def test_the_deployment_runs_two_hardened_replicas_with_leader_election() -> None:
    deploy = next(d for d in _stream() if d["kind"] == "Deployment")
    spec = deploy["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert deploy["spec"]["replicas"] == 2
    assert container["command"][:3] == ["optk", "run", TARGET]
    assert "--leader-elect" in container["command"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"] == {"cpu": "50m", "memory": "128Mi"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    assert spec["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"}}
    command = container["command"]
    assert command[command.index("--metrics-bind-address") + 1] == "0.0.0.0"
    assert spec["serviceAccountName"] == "thanos-operator"


def test_the_derived_role_of_the_example() -> None:
    roles = {d["kind"]: d for d in _stream() if d["kind"] in ("ClusterRole", "Role")
             and d["metadata"]["name"] == "thanos-operator"}
    cluster = {(r["apiGroups"][0], res): tuple(r["verbs"])
               for r in roles["ClusterRole"]["rules"] for res in r["resources"]
               if "resourceNames" not in r}
    child = ("create", "delete", "get", "list", "patch", "watch")
    assert cluster == {
        ("", "events"): ("create", "patch"),
        ("", "services"): child,
        ("apps", "deployments"): child,
        ("apps", "statefulsets"): child,
        ("networking.k8s.io", "ingresses"): child,
        ("monitoring.coreos.com", "servicemonitors"): child,  # enabled by the CRD input
        ("apiextensions.k8s.io", "customresourcedefinitions"): ("list", "watch"),  # an input
        ("", "secrets"): ("list", "watch"),  # the store gateway's object-storage input
        ("monitoring.optk.dev", "thanoses"): ("list", "watch"),
        ("monitoring.optk.dev", "thanoses/status"): ("patch",),
        ("authentication.k8s.io", "tokenreviews"): ("create",),  # --metrics-auth
        ("authorization.k8s.io", "subjectaccessreviews"): ("create",),
    }
    named = [r for r in roles["ClusterRole"]["rules"] if "resourceNames" in r]
    assert named == [{"apiGroups": ["apiextensions.k8s.io"],
                      "resources": ["customresourcedefinitions"],
                      "resourceNames": ["thanoses.monitoring.optk.dev"],
                      "verbs": ["get", "patch"]}]  # no create: the manifests apply the CRD
    lease_rules = roles["Role"]["rules"]
    assert lease_rules == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["thanos-operator-leader"], "verbs": ["list", "watch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["thanos-operator-leader", "thanos-operator-resync"],
         "verbs": ["get", "update"]},
    ]
    every_verb = [v for role in roles.values() for r in role["rules"] for v in r["verbs"]]
    assert "*" not in every_verb
    assert "update" not in [v for r in roles["ClusterRole"]["rules"] for v in r["verbs"]]


def test_metrics_auth_is_on_by_default_with_a_reader_role_for_scrapers() -> None:
    stream = _stream()
    deploy = next(d for d in stream if d["kind"] == "Deployment")
    assert "--metrics-auth" in deploy["spec"]["template"]["spec"]["containers"][0]["command"]
    reader = next(d for d in stream if d["metadata"]["name"] == "thanos-operator-metrics-reader")
    assert (reader["kind"], reader["rules"]) == (
        "ClusterRole", [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
    assert not any(d["kind"].endswith("Binding") and d["roleRef"]["name"] == reader["metadata"][
        "name"] for d in stream)  # bound by whoever scrapes
    plain = [d for d in yaml.safe_load_all(manifests_command(
        TARGET, image="i", metrics_auth=False)) if d]
    assert not any("reviews" in str(d) or "metrics-reader" in str(d) for d in plain)
    assert "--metrics-auth" not in str(plain)


def test_every_rule_has_a_comment() -> None:
    text = DEPLOY.read_text(encoding="utf-8")
    for line_no, line in enumerate(text.splitlines()):
        if line.startswith("- apiGroups:"):
            assert text.splitlines()[line_no - 1].startswith("# "), line_no


def _tiny_operator(**changes: Any) -> Operator:
    def build(parent: Any) -> list[Any]:
        from builders import DesiredState, ResourceBuilder

        meta = parent["metadata"]
        obj = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": f"{meta['name']}-app", "namespace": meta["namespace"]}}

        def builder() -> tuple[Any, DesiredState]:
            return obj, DesiredState.PRESENT

        built: list[ResourceBuilder] = [builder]
        return built

    changes.setdefault("build", build)
    return Operator(api_version="v1", kind="ConfigMap", name="tiny", **changes)


def test_a_namespaced_operator_gets_a_role_and_no_cluster_role() -> None:
    facts = operator_facts(_tiny_operator(namespace="apps", reporting=Reporting(events=False)))
    parent = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    rules = derive_rules(facts, parents=[parent], lease_namespace="ops", namespaced=True)
    assert {r.namespace for r in rules} == {"apps", "ops"}
    assert ("apps",) in {r.api_groups for r in rules if r.namespace == "apps"}
    assert not any(r.resources == ("events",) for r in rules)


def test_a_hook_declares_its_watches_and_what_it_enables() -> None:
    @watches(("v1", "Secret"), enables=[("example.com/v1", "Widget")])
    def hook(runtime: Any) -> None:
        return None

    facts = operator_facts(_tiny_operator(on_start=[hook]))
    parent = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    rules = {(r.api_groups[0], res): r.verbs
             for r in derive_rules(facts, parents=[parent], lease_namespace="ops")
             for res in r.resources}
    assert rules[("", "secrets")] == ("list", "watch")
    assert rules[("example.com", "widgets")] == ("create", "delete", "get", "list", "patch",
                                                 "watch")
    assert rules[("apiextensions.k8s.io", "customresourcedefinitions")] == ("list",)


def test_declared_inputs_are_listed_and_watched_in_the_operators_scope() -> None:
    from builders import ObjectRef

    def declare(parent: Any) -> list[ObjectRef]:
        meta = parent["metadata"]
        return [ObjectRef(api_version="v1", kind="Secret", name=meta["name"],
                          namespace=meta["namespace"])]

    def build(parent: Any, inputs: Any) -> list[Any]:
        assert ObjectRef(api_version="v1", kind="Secret", name="a",
                         namespace="apps") in inputs  # manifests treat every input as present
        return _tiny_operator().build(parent)

    parent = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    for namespaced, scope in ((True, "apps"), (False, None)):
        facts = operator_facts(_tiny_operator(namespace="apps", inputs=declare, build=build))
        rules = {(r.namespace, r.api_groups[0], res): r.verbs
                 for r in derive_rules(facts, parents=[{**parent, "metadata": {
                     "name": "a", "namespace": "apps"}}], lease_namespace="ops",
                     namespaced=namespaced)
                 for res in r.resources}
        assert rules[(scope, "", "secrets")] == ("list", "watch")
    facts = operator_facts(_tiny_operator())  # nothing declared: no Secret rule
    assert not any("secrets" in r.resources
                   for r in derive_rules(facts, parents=[parent], lease_namespace="ops"))


def test_install_objects_are_read_and_patched_by_name_and_created_only_when_not_applied(
) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget"}, "versions": []}}
    facts = operator_facts(_tiny_operator(install=[crd]))
    parent = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}

    def crd_rules(**flags: Any) -> list[tuple[tuple[str, ...], tuple[str, ...], str]]:
        return [(r.verbs, r.resource_names, r.reason)
                for r in derive_rules(facts, parents=[parent], lease_namespace="ops", **flags)
                if r.resources == ("customresourcedefinitions",)]

    create, by_name = crd_rules()
    assert by_name[:2] == (("get", "patch"), ("widgets.example.com",))
    assert create[:2] == (("create",), ())
    assert "create cannot be limited by name" in create[2]
    (applied,) = crd_rules(install_applied=True)
    assert applied[:2] == (("get", "patch"), ("widgets.example.com",))
    assert "not granted create, which cannot be limited by name" in applied[2]
    stream = manifests(facts, ManifestOptions(target="m:operator", namespace="ops",
                                              image="i"), parents=[parent])
    shipped = next(o for o, _ in stream if o["kind"] == "CustomResourceDefinition")
    assert get_last_applied(shipped) == crd  # what the operator's install finds equal


def test_a_sample_the_builders_refuse_is_an_error_naming_it() -> None:
    def build(parent: Any) -> list[Any]:
        raise ValueError(f"spec.size of {parent['metadata']['name']} is not a number")

    facts = operator_facts(Operator(api_version="v1", kind="ConfigMap", build=build))
    bad = {"metadata": {"name": "bad"}}
    with pytest.raises(RbacDerivationError, match=r"'bad'.*spec\.size"):
        derive_rules(facts, parents=[bad], lease_namespace="ops")
    # a generated parent the builders refuse is skipped: samples decide
    assert derive_rules(facts, parents=[], generated=[bad], lease_namespace="ops")


def test_resources_follow_kubernetes_plural_rules() -> None:
    assert resource_for("networking.k8s.io/v1", "Ingress") == "ingresses"
    assert resource_for("v1", "Endpoints") == "endpoints"
    assert resource_for("policy/v1", "PodDisruptionBudget") == "poddisruptionbudgets"
    assert resource_for("example.com/v1", "Policy") == "policies"


def test_optk_manifests_prints_the_stream(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifests", TARGET, "--namespace", "ops", "--image", "img:1"]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert docs[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "ops", "labels": {"app.kubernetes.io/name": "thanos-operator",
                                  "app.kubernetes.io/part-of": "operator-toolkit"}}}
    assert main(["manifests", "no.such.module"]) == 2
    assert "cannot import" in capsys.readouterr().err


@pytest.mark.parametrize("version", ["1.30.0", "1.34.0"])
def test_the_stream_validates_against_the_kubernetes_schemas(version: str) -> None:
    for doc in _stream():
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_example_without_samples_still_derives_from_its_crd_schema() -> None:
    facts = operator_facts(make_operator())
    options = ManifestOptions(target=TARGET, namespace="ops", image="img:1")
    from reconciler._commands.manifests import generated_parents

    generated = generated_parents(facts.parent_crd, count=25)
    assert generated
    docs = manifests(facts, options, parents=[], generated=generated)
    role = next(d for d, _ in docs if d["kind"] == "ClusterRole")
    assert any("deployments" in r["resources"] for r in role["rules"])


@pytest.mark.both_servers
def test_kubectl_apply_dry_run_server_accepts_the_stream(
    kube_api: Any, kube_namespace: str, tmp_path: Path
) -> None:
    docs = [d for d in _stream(kube_namespace) if d["kind"] != "Namespace"]
    path = tmp_path / "operator.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kube_api.kubeconfig_path), "apply",
         "--dry-run=server", "-f", str(path)],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(server dry run)") == len(docs), done.stdout


def test_the_dockerfile_builds_what_the_deployment_runs() -> None:
    lines = [line.strip() for line in
             (ROOT / "examples" / "thanos" / "Dockerfile").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0].startswith("FROM python:")
    assert lines[0].endswith("-slim")
    ignored = (ROOT / ".dockerignore").read_text().split()
    for line in lines:
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source
                assert source.split("/")[0] not in ignored, source
    user = [line.split()[1] for line in lines if line.startswith("USER ")][-1]
    assert int(user.split(":")[0]) > 0  # numeric, so runAsNonRoot can verify it
    cmd = yaml.safe_load(next(line for line in lines if line.startswith("CMD "))[4:])
    deploy = next(d for d in _stream() if d["kind"] == "Deployment")
    command = deploy["spec"]["template"]["spec"]["containers"][0]["command"]
    assert cmd[:3] == command[:3] == ["optk", "run", TARGET]
    assert f"EXPOSE {command[command.index('--metrics-port') + 1]}" in lines


def test_the_stream_has_no_yaml_anchors() -> None:
    text = DEPLOY.read_text(encoding="utf-8")
    assert "&id" not in text
    assert "*id" not in text
