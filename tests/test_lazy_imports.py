"""Importing the toolkit does not import the ``kubernetes`` package: a process that only builds,
matches or plans objects does not pay for it (about 125 ms, as much as the rest of
``import reconciler``); it is
imported when a client is made (``load_api_client``, or the caller's own ``ApiClient``).
"""

from __future__ import annotations

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
