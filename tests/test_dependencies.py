"""Dependencies by use: an operator in production needs neither Hypothesis nor the embedded server.

``install_requires`` in ``setup.cfg`` holds what an operator needs to run against a cluster;
Hypothesis is in the ``testing`` extra (for ``builders.testing``), aiohttp and cryptography in the
``embedded`` extra (for ``reconciler.embedded``), cryptography also in the ``webhooks`` extra
(certificates ``reconciler.webhooks`` makes itself; it imports without it), Helm's engine
(helm-python-sdk) in the ``helm`` extra (``builders.helm`` imports without it). These tests check
both halves: the metadata, and that the facades import and work in a fresh interpreter in
which those packages cannot be imported (a meta-path finder refuses them, so a lazy import at
first use would fail too).
"""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = {"testing": {"hypothesis", "cel-python"},
            "embedded": {"aiohttp", "cryptography", "cel-python"},
            "webhooks": {"cryptography"},
            "helm": {"helm-python-sdk"}}

_BLOCKED_IMPORTS = """
import importlib.abc
import sys

BLOCKED = {"hypothesis", "aiohttp", "cryptography", "celpy", "helm_python"}


class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None


sys.meta_path.insert(0, Refuse())

import builders
import builders.composition
import builders.convert
import builders.helm
import builders.names
import builders.objects
import builders.schemas
import objectmatcher
import reconciler
import reconciler.webhooks
from reconciler import KubernetesClient, Operator

desired = builders.objects.config_map(metadata={"name": "a", "namespace": "n"}, data={"k": "v"})
builders.schemas.validate_object(desired)
live = objectmatcher.set_last_applied({**desired, "data": {"k": "w"}})
assert not objectmatcher.calculate_patch(live, desired).is_empty
assert callable(KubernetesClient) and callable(Operator)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED
                or m.startswith("reconciler.embedded") or m == "builders.testing")
assert not loaded, loaded
print("ok")
"""


def _requirement_names(value: str) -> set[str]:
    names = set()
    for line in value.splitlines():
        line = line.strip()
        if line and not line.startswith("%("):
            names.add(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0].lower())
    return names


def test_optional_packages_are_in_their_extras_not_in_install_requires() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    required = _requirement_names(config["options"]["install_requires"])
    extras = config["options.extras_require"]
    for extra, packages in OPTIONAL.items():
        assert not packages & required, f"{packages & required} belong to the {extra!r} extra"
        assert _requirement_names(extras[extra]) == packages
        # `test` (and so `make test`) installs every optional part; interpolation expands it.
        assert packages <= _requirement_names(extras["test"])


def test_the_facades_work_without_the_testing_and_embedded_extras() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _BLOCKED_IMPORTS],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"
