"""Existing Helm charts as builders (issue 40): :func:`chart` renders a chart with Helm's own
engine and returns its objects as builders, in components ordered as Helm installs them.

The public face of ``builders._charts`` (the rendering, the cache, the chart semantics) and the
errors a chart raises. Rendering needs the ``helm`` extra (``helm-python-sdk``: Helm v4's Go
code behind a C ABI); without it, :func:`chart` raises :class:`HelmEngineMissingError` and this
module still imports. See ``docs/helm.md``.
"""

from __future__ import annotations

from builders._charts import (
    CHART_ANNOTATION,
    CLUSTER_SCOPED_KINDS,
    HOOK_ANNOTATION,
    INSTALL_ORDER,
    KEEP_ANNOTATION,
    TEMPLATE_ANNOTATION,
    CacheInfo,
    Chart,
    ChartObject,
    cache_info,
    chart,
    clear_cache,
    engine_version,
    hook_done,
)
from builders._errors import (
    ChartError,
    ChartHookError,
    ChartLoadError,
    ChartRenderError,
    HelmEngineMissingError,
)

__all__ = [
    "CHART_ANNOTATION",
    "CLUSTER_SCOPED_KINDS",
    "HOOK_ANNOTATION",
    "INSTALL_ORDER",
    "KEEP_ANNOTATION",
    "TEMPLATE_ANNOTATION",
    "CacheInfo",
    "Chart",
    "ChartError",
    "ChartHookError",
    "ChartLoadError",
    "ChartObject",
    "ChartRenderError",
    "HelmEngineMissingError",
    "cache_info",
    "chart",
    "clear_cache",
    "engine_version",
    "hook_done",
]
