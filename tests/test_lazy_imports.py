"""What importing the toolkit loads, and what it leaves for later (issue 39, "Start-up").

- Importing the toolkit does not import the ``kubernetes`` package: a process that only builds,
  matches or plans objects does not pay for it (about 0.2 s of CPU, as much as the rest); it is
  imported when a client is made (``load_api_client``, or the caller's own ``ApiClient``).
- ``import reconciler`` loads no module of its own but the facade (PEP 562: each name is
  imported with its module on first use), and none of ``HEAVY``.
- Every public name of ``reconciler`` and its public faces, resolved (what an operator's module
  imports to define its ``Operator``), loads none of ``NOT_AT_START``: what an operator does not
  use before it watches. ``urllib3`` and ``prometheus_client`` are not in it: the client's
  transport and the metrics of every runtime are used at start.

The figures beside each module are ``python -X importtime`` cumulative milliseconds on top of
``import reconciler, builders, objectmatcher``, measured on 2026-12-06 on the 2-core machine of
docs/benchmarks.md ("Issue 39: start-up"), median of three, under load: what a regression that
imports one again costs every operator at start.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROGRAM = """
import sys

import builders
import objectmatcher
import reconciler
import reconciler.informers
import reconciler.planning
from reconciler import KubernetesClient, Operator, load_api_client

assert callable(KubernetesClient) and callable(Operator) and callable(load_api_client)
before = sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes")
import kubernetes.client

client = KubernetesClient(kubernetes.client.ApiClient())
after = "kubernetes" in sys.modules
print(before, after)
"""


def test_the_facade_imports_without_kubernetes_until_a_client_is_made() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROGRAM],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[] True"


NOT_AT_START = {
    "kubernetes": "the official client, 187 ms (models, config, dynamic, stream): made by "
                  "load_api_client or the caller",
    "reconciler.embedded": "the embedded API server, 393 ms with aiohttp and cryptography: "
                           "optk apiserver, optk run --embedded, the pytest plugin",
    "reconciler._webhooks": "the admission and conversion webhooks' server and reviews, 40 ms: "
                            "an Operator with Webhooks starts them from its runtime",
    "aiohttp": "118 ms: the webhooks' and the embedded server's HTTP",
    "celpy": "CEL, 43 ms: the embedded server's validation rules, builders.testing",
    "jsonschema": "55 ms: builders.schemas and the embedded server's validation",
    "kubernetes_validate": "44 ms: builders.schemas",
    "rich": "optk's tables and trees (optk plan, optk trace)",
    "hypothesis": "106 ms: builders.testing",
    "builders.testing": "128 ms: the Hypothesis kit, for tests",
    "pydantic": "19 ms: the client's models (kubernetes 37)",
    "yaml": "10 ms: kubeconfigs and manifests, read by the commands",
    "cryptography": "the embedded server's and the webhooks' certificates",
    "argparse": "the command line (optk)",
}
"""Modules an operator does not use before it watches, with why and what each costs."""

HEAVY = {**NOT_AT_START,
         "urllib3": "the client's transport, 39 ms: loaded with KubernetesClient",
         "prometheus_client": "27 ms: loaded with the runtime's metrics"}
"""Modules ``import reconciler`` alone must not load."""

_LOADED = """
import json, sys
{imports}
print(json.dumps(sorted(sys.modules)))
"""

_EVERY_NAME = """
import builders, objectmatcher
import builders.composition, builders.convert, builders.health, builders.inputs
import builders.names, builders.objects, builders.specs
from reconciler import *
import reconciler.clocks, reconciler.events, reconciler.informers, reconciler.leadership
import reconciler.metrics, reconciler.planning, reconciler.queues
for facade in (reconciler, reconciler.informers, reconciler.planning):
    for name in facade.__all__:
        getattr(facade, name)
"""


def _loaded(imports: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``imports``."""
    result = subprocess.run(
        [sys.executable, "-c", _LOADED.format(imports=imports)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return set(json.loads(result.stdout.splitlines()[-1]))


def _under(loaded: set[str], names: dict[str, str]) -> dict[str, str]:
    return {name: why for name, why in names.items()
            if any(m == name or m.startswith(f"{name}.") for m in loaded)}


def test_import_reconciler_loads_only_its_facade_and_nothing_heavy() -> None:
    loaded = _loaded("import reconciler")
    own = sorted(m for m in loaded if m.startswith("reconciler."))
    assert not own, f"import reconciler loads its modules before their names are used: {own}"
    assert not _under(loaded, HEAVY), _under(loaded, HEAVY)
    # the three pure and effect layers together stay off the heavy list too
    together = _loaded("import reconciler, builders, objectmatcher")
    assert not _under(together, HEAVY), _under(together, HEAVY)


def test_every_public_name_loads_nothing_an_operator_does_not_use_at_start() -> None:
    loaded = _loaded(_EVERY_NAME)
    assert "reconciler._driver.runtime" in loaded  # the names were resolved, not skipped
    assert not _under(loaded, NOT_AT_START), _under(loaded, NOT_AT_START)


def test_the_check_sees_a_heavy_import() -> None:
    """The checks cannot pass vacuously: a program that loads the embedded server and the
    client is caught by both lists."""
    loaded = _loaded("import reconciler.embedded")
    assert {"reconciler.embedded", "aiohttp", "kubernetes"} <= set(_under(loaded, HEAVY))
