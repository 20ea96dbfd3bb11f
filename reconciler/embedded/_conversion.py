"""Conversion webhooks of CRDs: a custom resource read at a version other than its own is sent
to the CRD's conversion webhook, as kube-apiserver sends it.

The embedded server stores a custom resource at the version it was written at and serves it at
any served version; with ``conversion.strategy: None`` only ``apiVersion`` changes (as the real
server does), with ``Webhook`` this module posts a ``ConversionReview`` (v1) to the CRD's
``clientConfig.url``, verifying the server against its ``caBundle``, and serves what comes back.
A ``service`` reference is not reachable here (no Service network): it fails as an unreachable
webhook does on a real server. The call itself (bounded to 30 s in all and 3 MiB of answer)
is ``_calling``'s; admission webhooks are ``_admission``'s.
The boundary: this module only converts; the request path calls :meth:`Conversions.convert`
from ``StoredObjects.served``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from reconciler.embedded._calling import WebhookCallError, post_review
from reconciler.embedded._kinds import ResourceType
from reconciler.embedded._statuses import ApiStatusError, status_body

__all__ = ["Conversions"]

_TIMEOUT_SECONDS = 30.0  # kube-apiserver's fixed budget for a conversion call


def _failure(obj: Mapping[str, Any], reason: str) -> ApiStatusError:
    """The real server's message names the object's own version (the one converted from)."""
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    message = f"conversion webhook for {group}/{version}, Kind={obj.get('kind')} failed: {reason}"
    return ApiStatusError(500, status_body(500, "InternalError", message=message))


class Conversions:
    """Converts custom resources through their CRD's conversion webhook, if it has one."""

    def convert(
        self, obj: Mapping[str, Any], rt: ResourceType, crd: Mapping[str, Any] | None,
    ) -> Mapping[str, Any] | None:
        """``obj`` at ``rt``'s version through the webhook, or None when ``crd`` names none
        (the caller then only relabels). Raises ApiStatusError (500) as the real server
        answers when the webhook fails."""
        conversion = ((crd or {}).get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") != "Webhook":
            return None
        config = (conversion.get("webhook") or {}).get("clientConfig") or {}
        url = config.get("url")
        if not url:
            raise _failure(obj, "the webhook's service is not reachable from the embedded server "
                               "(give clientConfig.url)")
        review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                  "request": {"uid": str(uuid.uuid4()), "desiredAPIVersion": rt.api_version,
                              "objects": [dict(obj)]}}
        answer = self._post(obj, str(url), config.get("caBundle"), review)
        if (answer.get("apiVersion"), answer.get("kind")) != ("apiextensions.k8s.io/v1",
                                                              "ConversionReview"):
            group, _, version = str(answer.get("apiVersion") or "").rpartition("/")
            raise _failure(obj, "expected webhook response of apiextensions.k8s.io/v1, "
                                f"Kind=ConversionReview, got {group}/{version}, "
                                f"Kind={answer.get('kind') or ''}")
        response = answer.get("response") or {}
        result = response.get("result") or {}
        if result.get("status") != "Success":
            raise _failure(obj, str(result.get("message") or "conversion failed"))
        converted = response.get("convertedObjects") or []
        if len(converted) != 1 or not isinstance(converted[0], Mapping):
            raise _failure(obj, f"expected 1 converted object, got {len(converted)}")
        if converted[0].get("apiVersion") != rt.api_version:
            raise _failure(obj, f"the object came back at {converted[0].get('apiVersion')}")
        return {**converted[0], "kind": rt.kind}

    @staticmethod
    def _post(obj: Mapping[str, Any], url: str, ca_bundle: object,
              review: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return post_review(url, review, ca_bundle=ca_bundle, timeout=_TIMEOUT_SECONDS)
        except WebhookCallError as err:
            raise _failure(obj, str(err)) from None
