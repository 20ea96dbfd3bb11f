"""Connecting a command to a cluster: the kubeconfig (or in-cluster config) and a first request.

Every subcommand that talks to a cluster (``optk run``, ``optk plan``) connects here, so that a
missing kubeconfig file, one without a current context, or a server that does not answer gives
one line naming the path or the URL (``KubeconfigError``, a ``ValueError``: the CLI prints it and
exits 2) instead of a traceback, or an operator that retries its informers for ever.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

from reconciler._base.errors import InClusterConfigError, KubeconfigError
from reconciler._client.incluster import (
    SERVICE_ACCOUNT_DIR,
    InClusterConfig,
    incluster_api_client,
    pod_namespace,
)

__all__ = ["connect", "context_namespace", "load_client", "load_client_from_dict"]

_PROBE_TIMEOUT = 5.0


def _default_path() -> str:
    return os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or os.path.expanduser(
        "~/.kube/config")


def load_client(
    kubeconfig: str | None, *, environ: Mapping[str, str] | None = None,
    directory: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
) -> Any:
    """An official ``ApiClient``: from ``kubeconfig``; when None, in-cluster when the service
    variables are set in ``environ`` (the process environment by default; its service account
    token under ``directory``, re-read when it rotates: ``reconciler._client.incluster``), else
    the default kubeconfig (``KUBECONFIG``, ``~/.kube/config``). The one place the toolkit loads
    cluster credentials; raises ``KubeconfigError`` naming the path."""
    from kubernetes import config as kube_config

    env = os.environ if environ is None else environ
    path = kubeconfig or _default_path()
    if kubeconfig is None and (
        env.get("KUBERNETES_SERVICE_HOST") or not os.path.exists(path)
    ):
        try:  # inside a cluster: its service account
            return incluster_api_client(
                InClusterConfig.from_environment(env, directory=directory))
        except InClusterConfigError as error:
            raise KubeconfigError(
                f"no kubeconfig at {path} (set --kubeconfig or KUBECONFIG) and not running in "
                f"a cluster ({error})", source=path) from error
    if not os.path.isfile(path):
        raise KubeconfigError(f"kubeconfig {path} does not exist", source=path)
    try:
        return kube_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=path)
    except (kube_config.ConfigException, ValueError, TypeError, KeyError) as error:
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(
            error).__name__
        raise KubeconfigError(f"kubeconfig {path} is not usable: {detail}",
                              source=path) from error
    except OSError as error:
        raise KubeconfigError(f"kubeconfig {path} cannot be read: {error.strerror}",
                              source=path) from error


def load_client_from_dict(config: Mapping[str, Any], *, source: str, retries: int = 0) -> Any:
    """An official ``ApiClient`` from a parsed kubeconfig held in memory (a cluster's Secret,
    ``reconciler._client.clusters``), its current context, with ``retries`` urllib3 retries
    (0: an unreachable cluster fails at once, the caller decides when to try again). Raises
    ``KubeconfigError`` naming ``source`` and the kind of failure only: the kubeconfig is a
    credential and never appears in a message."""
    from kubernetes import client as kube_client
    from kubernetes import config as kube_config

    settings = kube_client.Configuration()
    try:
        kube_config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
            config_dict=copy.deepcopy(dict(config)), client_configuration=settings,
            persist_config=False)
    except (kube_config.ConfigException, ValueError, TypeError, KeyError,
            AttributeError) as error:
        raise KubeconfigError(f"the kubeconfig of {source} is not usable "
                              f"({type(error).__name__})", source=source) from None
    settings.retries = retries
    return kube_client.ApiClient(configuration=settings)


def context_namespace(
    kubeconfig: str | None, *, environ: Mapping[str, str] | None = None
) -> str:
    """The namespace ``kubectl apply -f`` gives an object without one: the current context's
    ``namespace`` in the kubeconfig ``load_client`` reads, in a cluster the pod's namespace;
    ``default`` when neither names one (or the kubeconfig cannot say)."""
    from kubernetes import config as kube_config

    env = os.environ if environ is None else environ
    path = kubeconfig or _default_path()
    if kubeconfig is None and (
        env.get("KUBERNETES_SERVICE_HOST") or not os.path.exists(path)
    ):
        return pod_namespace(environ=env) or "default"
    try:
        _, current = kube_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=path)
    except (kube_config.ConfigException, ValueError, TypeError, KeyError, OSError):
        return "default"
    context = (current or {}).get("context") or {}
    return str(context.get("namespace") or "default")


def connect(kubeconfig: str | None) -> Any:
    """An official ``ApiClient`` from ``kubeconfig`` (default: ``KUBECONFIG`` or
    ``~/.kube/config``, else the in-cluster config) whose server answered ``/version``.

    Raises ``KubeconfigError`` naming the path or the URL.
    """
    from kubernetes.client import ApiClient, VersionApi
    from kubernetes.client.exceptions import ApiException

    api_client = load_client(kubeconfig)
    url = str(api_client.configuration.host)
    settings = copy.copy(api_client.configuration)
    settings.retries = 0  # one attempt: an unreachable server fails fast and quietly
    probe = ApiClient(configuration=settings)
    try:
        VersionApi(probe).get_code(_request_timeout=_PROBE_TIMEOUT)
    except ApiException:
        pass  # it answered (perhaps 401/403: the commands report that on their own)
    except Exception as error:  # urllib3 connection errors: refused, DNS, TLS, timeout
        reason = getattr(error, "reason", None) or error
        raise KubeconfigError(f"cannot reach the Kubernetes API server at {url}: {reason}",
                              source=url) from error
    finally:
        probe.close()  # type: ignore[no-untyped-call]
    return api_client
