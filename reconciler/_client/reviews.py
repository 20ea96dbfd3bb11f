"""Who may scrape ``/metrics``: the API server decides, by a TokenReview and a SubjectAccessReview.

``MetricsAuthorizer`` is what controller-runtime's ``filters.WithAuthenticationAndAuthorization``
(kubebuilder's default) and kube-rbac-proxy do: the scraper's bearer token is sent in a
``TokenReview`` (authentication.k8s.io/v1: is it valid, and whose is it?), then the user it
names in a ``SubjectAccessReview`` (authorization.k8s.io/v1) for ``get`` on the non-resource
URL ``/metrics``. So access is granted the RBAC way, by binding a scraper's ServiceAccount to
the ``<name>-metrics-reader`` ClusterRole ``optk manifests`` writes. The answer is an HTTP
status: 200 allowed, 401 no token or one the API server does not accept, 403 a valid token
whose user may not, 503 when the API server could not be asked (never cached: the next scrape
asks again). Verdicts are cached per token (a SHA-256 digest, never the token) for ``ttl``
seconds on the injected clock, at most ``max_entries`` of them (the oldest go first), so a
scraper every 15 s costs two reviews a minute and a flood of made-up tokens costs memory that
stays bounded. The operator's role needs ``create`` on ``tokenreviews`` and
``subjectaccessreviews`` (``reconciler._commands.rbac``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from typing import Any

from reconciler._base.clocks import Clock, RealClock
from reconciler._client.protocol import ClusterClient

__all__ = ["METRICS_PATH", "MetricsAuthorizer", "Verdict"]

_log = logging.getLogger("optk.metrics")

METRICS_PATH = "/metrics"
Verdict = tuple[int, str]
"""An HTTP status and a one-line body."""


class MetricsAuthorizer:
    """``authorizer(token)``: the ``Verdict`` on a scrape of ``/metrics`` with that bearer
    token (None: no ``Authorization: Bearer`` header); reviews through ``client``."""

    def __init__(self, client: ClusterClient, *, ttl: float = 60.0, max_entries: int = 1024,
                 clock: Clock | None = None) -> None:
        if max_entries < 1 or ttl < 0:
            raise ValueError(f"max_entries must be >= 1 and ttl >= 0, got {max_entries}, {ttl}")
        self._client = client
        self._ttl = ttl
        self._max = max_entries
        self._clock: Clock = clock or RealClock()
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, tuple[float, Verdict]] = OrderedDict()
        self.reviews = 0
        """TokenReviews sent (a cache miss each)."""

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    def __call__(self, token: str | None) -> Verdict:
        if not token:
            return 401, "Unauthorized: a bearer token is required"
        key = hashlib.sha256(token.encode()).digest()
        now = self._clock.monotonic()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached[0] > now:
                self._cache.move_to_end(key)
                return cached[1]
        try:
            verdict = self._review(token)
        except Exception as error:  # an HTTP handler's boundary: API errors, connection errors
            _log.warning("cannot review a /metrics scrape: %s", error)
            return 503, f"the API server cannot review the token: {error}"
        with self._lock:
            self._cache[key] = (now + self._ttl, verdict)
            self._cache.move_to_end(key)
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return verdict

    def _review(self, token: str) -> Verdict:
        self.reviews += 1
        review = self._client.create({"apiVersion": "authentication.k8s.io/v1",
                                      "kind": "TokenReview", "spec": {"token": token}})
        status: dict[str, Any] = review.get("status") or {}
        user = status.get("user") or {}
        if not status.get("authenticated") or not user.get("username"):
            return 401, "Unauthorized: the API server does not accept the token"
        spec: dict[str, Any] = {"user": user["username"], "groups": user.get("groups") or [],
                                "nonResourceAttributes": {"path": METRICS_PATH, "verb": "get"}}
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        access = self._client.create({"apiVersion": "authorization.k8s.io/v1",
                                      "kind": "SubjectAccessReview", "spec": spec})
        if (access.get("status") or {}).get("allowed"):
            return 200, "ok"
        return 403, f"Forbidden: {user['username']} may not get {METRICS_PATH}"
