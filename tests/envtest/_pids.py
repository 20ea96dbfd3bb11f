"""Whether a control plane's process is still running, for the tests that check none is left."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, waiting to be reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return not stat.read_text().split(") ")[1].startswith("Z")
    except (FileNotFoundError, IndexError):
        return False
