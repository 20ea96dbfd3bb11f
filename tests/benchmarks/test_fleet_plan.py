"""``python -m benchmarks.fleet_plan``: its JSON contract at a tiny size on the embedded server
(the figures at 1,000 parents are judged from the benchmark itself, never from a test)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

from benchmarks import fleet_plan


def test_the_json_has_every_plan_and_the_fleet_plan_writes_nothing() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert fleet_plan.main(["--json", "--sizes", "3"]) == 0
    report = json.loads(out.getvalue().splitlines()[-1])
    assert {"python", "cpus", "sizes", "children_per_parent", "server"} <= set(report)
    figures = report["sizes"]["3"]
    assert set(figures) == {"setup_s", "unchanged", "changed", "per_parent_dry_run"}
    for plan in ("unchanged", "changed", "per_parent_dry_run"):
        assert {"requests", "writes", "wall_s", "changes", "exit_code"} <= set(figures[plan])
    # parents, ConfigMaps, Services, Deployments: one list each, nothing else
    assert figures["unchanged"]["requests"] == {"list": 4, "total": 4}
    assert (figures["unchanged"]["changes"], figures["unchanged"]["exit_code"]) == (0, 0)
    assert figures["changed"]["requests"] == {"list": 4, "total": 4}
    assert (figures["changed"]["changes"], figures["changed"]["exit_code"]) == (3, 3)
    assert figures["per_parent_dry_run"]["writes"] == 3  # the peer's dry runs
