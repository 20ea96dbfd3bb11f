"""The ``Tenant`` spec class and its CustomResourceDefinition (``tenancy.optk.dev/v1alpha1``).

``TenantSpec`` declares the parent's spec as attrs classes; ``TENANT_CRD`` is generated from it
(``builders.specs.crd_for``): a structural schema with the patterns that keep every value a valid
label or quantity, and a status subresource (the toolkit writes its conditions and the summary per
cluster there). The builders read the spec as a ``TenantSpec`` (``builders.spec_of``).
"""

from __future__ import annotations

from typing import Any

import attrs

from builders.specs import PrinterColumn, crd_for, spec_field

GROUP = "tenancy.optk.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Tenant"

_LABEL_NAME = r"^[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,40}[a-zA-Z0-9])?$"
_LABEL_VALUE = r"^([a-zA-Z0-9]([-a-zA-Z0-9_.]{0,40}[a-zA-Z0-9])?)?$"
_SUBJECT = r"^[a-zA-Z0-9][-a-zA-Z0-9@._:]{0,60}$"


@attrs.frozen(kw_only=True)
class LabelMatch:
    """One label a selected cluster must carry, with this value."""

    key: str = spec_field(pattern=_LABEL_NAME, max_length=42)
    value: str = spec_field(default="", pattern=_LABEL_VALUE, max_length=42)


@attrs.frozen(kw_only=True)
class Quota:
    """The tenant namespace's ResourceQuota in each cluster."""

    cpu: str = spec_field(default="4", pattern=r"^[1-9][0-9]{0,3}m?$", server_default=False)
    memory: str = spec_field(default="8Gi", pattern=r"^[1-9][0-9]{0,3}(Mi|Gi)$",
                             server_default=False)
    pods: int = spec_field(default=20, minimum=0, maximum=1000, server_default=False)


@attrs.frozen(kw_only=True)
class TenantSpec:
    """A tenant: the clusters it lives in (by label), its quota and its admins there."""

    cluster_selector: list[LabelMatch] = spec_field(
        factory=list, max_items=8, list_map_keys=("key",),
        description="The labels a cluster must carry (every one); empty: every cluster.")
    quota: Quota = spec_field(factory=Quota, server_default=False)
    admins: list[str] = spec_field(factory=list, max_items=20, pattern=_SUBJECT,
                                   description="Users bound to the tenant's admin Role.")

    @property
    def match_labels(self) -> dict[str, str]:
        """The selector as a mapping of labels."""
        return {m.key: m.value for m in self.cluster_selector}


_COLUMNS = (
    PrinterColumn(name="Ready", json_path='.status.conditions[?(@.type=="Ready")].status'),
    PrinterColumn(name="Clusters", json_path=".status.clusters[*].name",
                  description="The clusters the tenant is placed in."),
)

TENANT_CRD: dict[str, Any] = crd_for(
    TenantSpec, group=GROUP, version=VERSION, kind=KIND, plural="tenants",
    printer_columns=_COLUMNS,
)
"""The ``Tenant`` CRD, generated from :class:`TenantSpec`, installed by the operator at start."""
