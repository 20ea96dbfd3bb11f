"""Who the toolkit says it is on the wire: the ``User-Agent`` of every request (issue 11).

``KubernetesClient`` sends ``user_agent(operator_name)`` so a server's audit log names the
toolkit, its version and the operator; nothing here does I/O beyond reading package metadata.
"""

from __future__ import annotations

import importlib.metadata

__all__ = ["toolkit_version", "user_agent"]


def toolkit_version() -> str:
    """The installed ``operator-toolkit`` version (package metadata), ``0+unknown`` without it."""
    try:
        return importlib.metadata.version("operator-toolkit")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def user_agent(operator_name: str | None = None) -> str:
    """The ``User-Agent`` of every request: ``optk/<version> (<operator name>)``."""
    base = f"optk/{toolkit_version()}"
    return f"{base} ({operator_name})" if operator_name else base
