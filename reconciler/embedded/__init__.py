"""The embedded Kubernetes API server: the real REST protocol over HTTPS, in this process.

``EmbeddedApiServer`` serves the kinds the toolkit uses (core, apps, batch, rbac, networking,
coordination, apiextensions and every custom resource a CRD registers) so that the official
client and kubectl work against it unchanged. ``Faults`` describes injected failures for
reliability tests; ``RequestKey`` is one cell of the request accounting and ``RequestRecord``
one entry of the opt-in request log; ``KubeconfigError``
refuses a kubeconfig path that holds something else than a kubeconfig; every exception the
server defines subclasses ``EmbeddedServerError``. The per-kind rules live
behind ``reconciler.embedded._kinds``; see ``docs/embedded-apiserver.md``.
"""

from reconciler.embedded._accounting import VERBS, RequestKey, RequestRecord
from reconciler.embedded._errors import EmbeddedServerError
from reconciler.embedded._faults import Faults
from reconciler.embedded._kubeconfig import KubeconfigError
from reconciler.embedded._server import EmbeddedApiServer, ServerNotRunningError

__all__ = [
    "VERBS",
    "EmbeddedApiServer",
    "EmbeddedServerError",
    "Faults",
    "KubeconfigError",
    "RequestKey",
    "RequestRecord",
    "ServerNotRunningError",
]
