"""Writing the embedded server's kubeconfig without destroying what a user's file held.

``optk apiserver --kubeconfig PATH`` may be pointed at ``~/.kube/config``. As ``kind`` does, an
existing file gets one cluster, one user and one context added (all named
``optk-embedded-<port>``) and its ``current-context`` switched to them; at shutdown exactly
those entries are removed and the previous ``current-context`` is restored. When nobody touched
the file meanwhile, the original bytes are written back unchanged; otherwise the entries are
removed from whatever the file then holds. A file that is not a kubeconfig is refused
(``KubeconfigError``), never overwritten. A missing file is created (mode 0600) and deleted at
shutdown. The decisions are pure functions over text; ``KubeconfigFile`` does the file I/O.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

from reconciler.embedded._errors import EmbeddedServerError

__all__ = ["KubeconfigEntry", "KubeconfigError", "KubeconfigFile", "add_entry", "remove_entry"]

_SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))


class KubeconfigError(EmbeddedServerError, ValueError):
    """A file at the kubeconfig path that is not a kubeconfig (nothing was written to it)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} is not a valid kubeconfig ({reason}); refusing to modify it")
        self.path = path
        self.reason = reason


@attrs.frozen(kw_only=True)
class KubeconfigEntry:
    """The cluster, user and context the server adds, all under one ``name``."""

    name: str
    server: str
    ca_data: str
    token: str
    namespace: str = "default"

    def sections(self) -> dict[str, dict[str, Any]]:
        """The three named entries, by kubeconfig section."""
        return {
            "clusters": {"name": self.name, "cluster": {
                "server": self.server, "certificate-authority-data": self.ca_data}},
            "users": {"name": self.name, "user": {"token": self.token}},
            "contexts": {"name": self.name, "context": {
                "cluster": self.name, "user": self.name, "namespace": self.namespace}},
        }

    def new_config(self) -> dict[str, Any]:
        """A whole kubeconfig holding only this entry (for a file the server creates)."""
        sections = self.sections()
        return {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [sections["clusters"]], "users": [sections["users"]],
            "contexts": [sections["contexts"]],
            "current-context": self.name, "preferences": {},
        }


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:
        config = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise KubeconfigError(path, f"YAML error: {str(exc).splitlines()[0]}") from exc
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise KubeconfigError(path, "not a mapping")
    kind = config.get("kind", "Config")
    if kind != "Config":
        raise KubeconfigError(path, f"kind is {kind!r}, not 'Config'")
    for section, _ in _SECTIONS:
        entries = config.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list) or not all(
            isinstance(e, Mapping) and isinstance(e.get("name"), str) for e in entries
        ):
            raise KubeconfigError(path, f"{section} is not a list of named entries")
    current = config.get("current-context")
    if current is not None and not isinstance(current, str):
        raise KubeconfigError(path, "current-context is not a string")
    return config


def _dump(config: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(config), sort_keys=False, default_flow_style=False)


def add_entry(
    text: str, entry: KubeconfigEntry, *, path: Path, set_current: bool = True
) -> tuple[str, str | None]:
    """``text`` with ``entry`` added (replacing same-named entries); and the previous
    ``current-context`` (None when there was none). Raises ``KubeconfigError``."""
    config = _parse(text, path)
    previous = config.get("current-context") or None
    for section, item in entry.sections().items():
        kept = [e for e in config.get(section) or () if e.get("name") != entry.name]
        config[section] = [*kept, item]
    config.setdefault("apiVersion", "v1")
    config.setdefault("kind", "Config")
    if set_current or not previous:
        config["current-context"] = entry.name
    return _dump(config), previous


def remove_entry(text: str, entry: KubeconfigEntry, *, path: Path,
                 previous_current: str | None) -> str:
    """``text`` without ``entry``'s cluster, user and context; ``current-context`` restored
    to ``previous_current`` when it still names the entry. Raises ``KubeconfigError``."""
    config = _parse(text, path)
    for section, _ in _SECTIONS:
        if section in config and config[section] is not None:
            config[section] = [e for e in config[section] if e.get("name") != entry.name]
    if config.get("current-context") == entry.name:
        if previous_current:
            config["current-context"] = previous_current
        else:
            config.pop("current-context", None)
    return _dump(config)


def _write(path: Path, text: str, *, mode: int) -> None:
    """Replace ``path`` atomically with ``text`` at ``mode``."""
    temporary = path.with_name(f".{path.name}.optk-{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise


@attrs.define(kw_only=True)
class KubeconfigFile:
    """The server's kubeconfig at a user-chosen path: what was there, what we wrote."""

    path: Path
    set_current: bool = True
    _created: bool = False
    _original: str | None = None
    _written: str | None = None
    _previous_current: str | None = None
    _entry: KubeconfigEntry | None = None

    def check(self) -> None:
        """Refuse (``KubeconfigError``) an existing file that is not a kubeconfig."""
        if self.path.exists():
            _parse(self._read(), self.path)

    def _read(self) -> str:
        try:
            return self.path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise KubeconfigError(self.path, f"unreadable: {exc}") from exc

    def install(self, entry: KubeconfigEntry) -> None:
        """Create the file (0600), or add ``entry`` to the existing one keeping its mode."""
        self._entry = entry
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            text = _dump(entry.new_config())
            _write(self.path, text, mode=0o600)
            self._created, self._written = True, text
            return
        original = self._read()
        text, previous = add_entry(original, entry, path=self.path, set_current=self.set_current)
        _write(self.path, text, mode=stat.S_IMODE(os.stat(self.path).st_mode))
        self._original, self._written, self._previous_current = original, text, previous

    def uninstall(self) -> None:
        """Delete a created file; else remove only the entry (restoring the original bytes
        when the file is as we left it). Never raises for a file that went away."""
        entry, self._entry = self._entry, None
        if entry is None:
            return
        if self._created:
            with contextlib.suppress(FileNotFoundError):
                if self.path.read_text() == self._written:
                    self.path.unlink()
                else:  # someone added to it meanwhile: keep theirs, drop ours
                    current = self.path.read_text()
                    _write(self.path, remove_entry(current, entry, path=self.path,
                                                   previous_current=None),
                           mode=stat.S_IMODE(os.stat(self.path).st_mode))
            return
        try:
            current = self.path.read_text()
        except FileNotFoundError:
            return
        mode = stat.S_IMODE(os.stat(self.path).st_mode)
        if current == self._written and self._original is not None:
            _write(self.path, self._original, mode=mode)
            return
        with contextlib.suppress(KubeconfigError):
            _write(self.path, remove_entry(current, entry, path=self.path,
                                           previous_current=self._previous_current), mode=mode)
