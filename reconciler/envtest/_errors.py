"""The errors of ``reconciler.envtest``: each subclasses ``ControlPlaneError`` and carries data.

A caller catches ``ControlPlaneError`` for any failure of the real control plane; the subclasses
also subclass the matching builtin (``FileNotFoundError``, ``TimeoutError``, ``KeyError``) so
generic handlers keep working.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AssetsNotFoundError",
    "ComponentCrashedError",
    "ControlPlaneError",
    "StartTimeoutError",
    "UnknownUserError",
]


class ControlPlaneError(RuntimeError):
    """A failure of the real control plane (``reconciler.envtest.ControlPlane``)."""


class AssetsNotFoundError(ControlPlaneError, FileNotFoundError):
    """The binaries a control plane needs (kube-apiserver, etcd) were not found.

    ``directory`` is where they were looked for and ``origin`` what named it
    (``ControlPlane(assets=...)``, ``OPTK_KUBE_ASSETS`` or ``KUBEBUILDER_ASSETS``); both are None
    when nothing named a directory. ``missing`` names what is absent, ``problem`` says what else
    is wrong (the directory does not exist; a lower-precedence variable was not consulted) and
    ``hint`` how to provide the binaries.
    """

    def __init__(self, *, directory: Path | None, missing: tuple[str, ...], hint: str,
                 origin: str | None = None, problem: str = "") -> None:
        self.directory = directory
        self.origin = origin
        self.missing = missing
        self.problem = problem
        self.hint = hint
        if directory is None:
            where = "(no directory given)"
        else:
            where = f"in {directory}" + (f" (from {origin})" if origin else "")
        details = f" ({problem})" if problem else ""
        super().__init__(
            f"kube assets not found {where}{details}: missing {', '.join(missing)}; {hint}")


class ComponentCrashedError(ControlPlaneError):
    """A component (etcd, kube-apiserver, kube-controller-manager) exited on its own.

    ``log_tail`` holds the last lines of its log (the message shows them too).
    """

    def __init__(self, *, component: str, returncode: int | None, log_path: Path,
                 log_tail: str) -> None:
        self.component = component
        self.returncode = returncode
        self.log_path = log_path
        self.log_tail = log_tail
        super().__init__(
            f"{component} exited with code {returncode}; last lines of {log_path}:\n{log_tail}"
        )


class StartTimeoutError(ControlPlaneError, TimeoutError):
    """A component did not become ready within ``timeout`` seconds (``log_tail`` shows why)."""

    def __init__(self, *, component: str, timeout: float, waited_for: str,
                 log_tail: str) -> None:
        self.component = component
        self.timeout = timeout
        self.waited_for = waited_for
        self.log_tail = log_tail
        super().__init__(
            f"{component} was not ready after {timeout:.0f} s (waited for {waited_for}); "
            f"last lines of its log:\n{log_tail}"
        )


class UnknownUserError(ControlPlaneError, KeyError):
    """``kubeconfig_for(user)`` asked for a token user that was not registered at start."""

    def __init__(self, *, user: str, registered: tuple[str, ...]) -> None:
        self.user = user
        self.registered = registered
        super().__init__(
            f"user {user!r} has no token: the API server reads its token file only at start; "
            f"register it with ControlPlane(users={{{user!r}: [...]}}) "
            f"(registered: {', '.join(registered) or 'none'})"
        )

    def __str__(self) -> str:
        return str(self.args[0])
