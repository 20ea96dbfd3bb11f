"""The webhooks as part of a running operator: an ``Operator.on_start`` hook that serves them,
injects the CA where the API server reads it, and rotates the certificates.

:class:`Webhooks` is a value (like the rest of an ``Operator``'s configuration) and a start hook:
called with the running runtime it takes the certificates (cert-manager's files, else the
Secret it keeps, :func:`ensure_secret`), starts a :class:`WebhookServer`, writes the conversion
stanza into each of its CRDs and creates or replaces its webhook configurations, all with the
CA; a thread then checks the Secret every ``check_interval`` seconds of the runtime's clock and,
after a rotation, serves the new certificate and injects the new CA. ``optk manifests`` reads the
same value for the Service, the configurations and the RBAC (``reconciler._commands``). The
boundary: the pure answers are ``reviews``, the stanzas ``configs``; this module only wires them
to a cluster.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from builders.specs import Versions
from reconciler._base.clocks import Clock
from reconciler._base.errors import NotFoundError
from reconciler._client.protocol import ClusterClient
from reconciler._webhooks.certificates import WebhookCertificates, ensure_secret
from reconciler._webhooks.configs import (
    WebhookEndpoint,
    webhook_configurations,
    with_conversion_webhook,
)
from reconciler._webhooks.server import WebhookServer

__all__ = ["WEBHOOK_PORT", "Webhooks", "inject"]

log = logging.getLogger("reconciler.webhooks")

WEBHOOK_PORT = 9443
"""The port the operator's webhook server listens on (the Service's target port)."""


def _plurals(crds: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    out = {}
    for crd in crds:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        out[(str(spec.get("group")), str(names.get("kind")))] = str(names.get("plural"))
    return out


@attrs.frozen(kw_only=True)
class Webhooks:
    """The operator's webhooks: ``versions`` served, ``crds`` given their conversion webhook.

    ``name`` names the webhook configurations, the Service (``name``) and the Secret
    (``name-tls``) in ``namespace`` (None: the pod's, ``POD_NAMESPACE``, else ``default``).
    ``url`` (``https://127.0.0.1:9443``), when set, is where the API server calls instead of
    the Service; ``local`` makes it the server's own address (a local API server on the same
    machine, tests: with ``port=0``). ``certificates_dir`` holds cert-manager's ``tls.crt``,
    ``tls.key`` and ``ca.crt``; without it the toolkit keeps its own in the Secret and rotates
    them. ``hosts`` are the serving certificate's names (default: the Service's DNS names and
    127.0.0.1).
    """

    versions: tuple[Versions, ...] = attrs.field(converter=tuple)
    crds: tuple[Mapping[str, Any], ...] = attrs.field(converter=tuple)
    name: str
    namespace: str | None = None
    host: str = "0.0.0.0"
    port: int = WEBHOOK_PORT
    url: str | None = None
    local: bool = False
    certificates_dir: Path | None = None
    hosts: tuple[str, ...] = ()
    check_interval: float = 300.0

    @property
    def in_namespace(self) -> str:
        """The namespace of the Service and the Secret."""
        return self.namespace or os.environ.get("POD_NAMESPACE") or "default"

    @property
    def secret_name(self) -> str:
        """The Secret the toolkit keeps its certificates in."""
        return f"{self.name}-tls"

    @property
    def service_hosts(self) -> tuple[str, ...]:
        """The names the serving certificate carries."""
        return self.hosts or (
            "127.0.0.1", f"{self.name}.{self.in_namespace}.svc",
            f"{self.name}.{self.in_namespace}.svc.cluster.local")

    def endpoint(self, ca_pem: bytes, *, serving: str | None = None) -> WebhookEndpoint:
        """Where the API server calls, with ``ca_pem`` as the CA bundle (``serving``: the
        running server's own URL, used when ``local``)."""
        url = serving if self.local and serving else self.url
        if url is not None:
            return WebhookEndpoint(ca_pem=ca_pem, url=url)
        return WebhookEndpoint(ca_pem=ca_pem, service_name=self.name,
                               service_namespace=self.in_namespace, service_port=443)

    def objects(self, ca_pem: bytes, *, serving: str | None = None) -> list[dict[str, Any]]:
        """The CRDs with their conversion webhook and the webhook configurations, CA injected."""
        endpoint = self.endpoint(ca_pem, serving=serving)
        crds = [with_conversion_webhook(c, endpoint) if len(c["spec"]["versions"]) > 1
                else dict(c) for c in self.crds]
        return [*crds, *webhook_configurations(
            self.versions, name=self.name, endpoint=endpoint, plurals=_plurals(self.crds))]

    def certificates(self, client: ClusterClient, *, now: datetime.datetime) -> WebhookCertificates:
        """The certificates to serve: cert-manager's files, else the Secret (made or rotated)."""
        if self.certificates_dir is not None:
            return WebhookCertificates.from_directory(self.certificates_dir)
        return ensure_secret(client, name=self.secret_name, namespace=self.in_namespace,
                             hosts=self.service_hosts, now=now)

    def __call__(self, context: Any) -> Callable[[], None]:
        """The ``on_start`` hook: serve, inject, and rotate until the returned stop is called."""
        # the operator's unfenced client: every replica serves, leader or not (as install does)
        return self.start(context.client, clock=context.clock)

    def start(self, client: ClusterClient, *, clock: Clock) -> Callable[[], None]:
        """Serve and inject with ``client``; returns the stop."""
        certificates = self.certificates(client, now=_now(clock))
        server = WebhookServer(self.versions, certificates=certificates, host=self.host,
                               port=self.port).start()
        inject(client, self.objects(certificates.ca_pem, serving=server.url))
        stopped = threading.Event()
        condition = threading.Condition()

        def rotate() -> None:
            while not stopped.is_set():
                due = clock.monotonic() + self.check_interval
                while not stopped.is_set() and clock.monotonic() < due:
                    with condition:
                        clock.wait(condition, due - clock.monotonic())
                if stopped.is_set():
                    return
                try:
                    fresh = self.certificates(client, now=_now(clock))
                    if fresh != server.certificates:
                        server.use(fresh)
                        inject(client, self.objects(fresh.ca_pem, serving=server.url))
                        log.info("webhook certificates rotated; valid until %s",
                                 fresh.not_after().isoformat())
                except Exception:  # keep serving the current ones; try again next interval
                    log.warning("webhook certificate check failed", exc_info=True)

        thread = threading.Thread(target=rotate, name="optk-webhook-certs", daemon=True)
        thread.start()

        def stop() -> None:
            stopped.set()
            with condition:
                condition.notify_all()
            thread.join(timeout=10)
            server.stop()

        return stop


def _now(clock: Clock) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(clock.time(), datetime.UTC)


def inject(client: ClusterClient, objects: Sequence[Mapping[str, Any]]) -> None:
    """Create each object, or replace the live one with it (keeping its ``resourceVersion``).
    A kind the server does not serve (the embedded server has no admission webhooks) is
    skipped with a warning."""
    for obj in objects:
        meta = obj.get("metadata") or {}
        if not client.is_served(str(obj["apiVersion"]), str(obj["kind"])):
            log.warning("webhooks: %s of %s is not served here; not installed", obj["kind"],
                        obj["apiVersion"])
            continue
        try:
            live = client.get(str(obj["apiVersion"]), str(obj["kind"]), str(meta.get("name")),
                              namespace=meta.get("namespace"))
        except NotFoundError:
            client.create(obj)
            continue
        body = {**obj, "metadata": {**meta, "resourceVersion":
                                    live["metadata"]["resourceVersion"]}}
        client.replace(body)
