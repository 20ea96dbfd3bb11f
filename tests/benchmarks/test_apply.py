"""``python -m benchmarks.apply``: its JSON contract at a tiny size on the embedded server (the
figures' sizes are judged from the benchmark itself, never from a test)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

from benchmarks import apply


def test_the_json_has_every_strategy_and_phase_and_steady_states_send_nothing() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert apply.main(["--json", "--children", "4", "--servers", "embedded"]) == 0
    report = json.loads(out.getvalue().splitlines()[-1])
    assert {"python", "cpus", "children", "phases", "servers"} <= set(report)
    strategies = report["servers"]["embedded"]
    assert set(strategies) == {"three_way", "server_side_apply"}
    for phases in strategies.values():
        assert set(phases) == set(apply.PHASES)
        for figures in phases.values():
            assert {"requests", "bytes_sent", "cpu_seconds"} <= set(figures)
        assert phases["steady_state"]["requests"]["total"] == 0
        assert phases["resync"]["requests"]["total"] == 0
    assert strategies["three_way"]["converge"]["requests"] == {"create": 4, "total": 4}
    # an apply would merge into an object the cache does not hold: each child is read first
    assert strategies["server_side_apply"]["converge"]["requests"] == {
        "get": 4, "patch": 4, "total": 8}
