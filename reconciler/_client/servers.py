"""What a test API server offers: the one protocol the embedded server and the real control
plane both satisfy.

``reconciler.embedded.EmbeddedApiServer`` (in process, no controllers) and
``reconciler.envtest.ControlPlane`` (a real kube-apiserver, optionally kube-controller-manager)
are started, connected to and accounted the same way, so a test, the pytest plugin's
``kube_api`` fixture and the operator state machine take either. What only one has (faults and
the request log of the embedded server; restarts and audit of the real one) stays on that class.

Boundary: the shape only; neither server imports it (the protocol is structural), and
``tests/test_servers_protocol.py`` checks both against it.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

if TYPE_CHECKING:
    import kubernetes.client

__all__ = ["KubeApiServer"]


@runtime_checkable
class KubeApiServer(Protocol):
    """A Kubernetes API server a test runs: started, connected to, its requests counted."""

    @property
    def url(self) -> str:
        """The server's HTTPS URL (``https://127.0.0.1:PORT``)."""
        ...

    @property
    def kubeconfig_path(self) -> Path:
        """A kubeconfig file for the server's administrator (for ``kubectl`` and ``optk``)."""
        ...

    @property
    def ca_cert_path(self) -> Path:
        """The CA certificate the server's serving certificate is signed by."""
        ...

    @property
    def token(self) -> str:
        """The administrator's bearer token."""
        ...

    @property
    def has_controller_manager(self) -> bool:
        """Whether kube-controller-manager runs beside it (garbage collection, namespace
        deletion, ServiceAccounts); the embedded server: ``False``."""
        ...

    def __enter__(self) -> Self:
        """``start()``; the ``with`` block's end stops it."""
        ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """``stop()``."""
        ...

    def start(self) -> Self:
        """Start serving (once ready); returns the server."""
        ...

    def stop(self) -> None:
        """Stop serving and release what it holds."""
        ...

    def configuration(self) -> kubernetes.client.Configuration:
        """The official client's ``Configuration`` for the administrator."""
        ...

    def api_client(self) -> kubernetes.client.ApiClient:
        """A new official ``ApiClient`` connected as the administrator."""
        ...

    def request_counts(self) -> dict[str, int]:
        """Requests served so far, by verb."""
        ...

    def reset_request_counts(self) -> None:
        """Count from zero again."""
        ...
