"""Metrics and health endpoints: controller-runtime names, readiness follows cache sync."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from reconciler._base.metrics import HealthServer, OperatorMetrics
from reconciler._workqueue.queues import WorkQueue
from reconciler.testing import VirtualClock


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_reconciles_and_queue_activity_appear_under_controller_runtime_names() -> None:
    metrics = OperatorMetrics("things", max_concurrent=4)
    queue = WorkQueue[str](clock=VirtualClock(), observer=metrics.queue)
    queue.add("a")
    queue.add("a")
    queue.add("b")
    key = queue.get(timeout=0)
    assert key == "a"
    queue.done(key)
    queue.add_rate_limited("a")
    metrics.observe_reconcile(result="success", seconds=0.02)
    metrics.observe_reconcile(result="error", seconds=0.5)
    metrics.set_leader("things-leader", True)
    text = metrics.exposition().decode()
    assert 'controller_runtime_reconcile_total{controller="things",result="success"} 1.0' in text
    assert 'controller_runtime_reconcile_total{controller="things",result="error"} 1.0' in text
    assert 'controller_runtime_reconcile_errors_total{controller="things"} 1.0' in text
    assert 'controller_runtime_reconcile_time_seconds_count{controller="things"} 2.0' in text
    assert 'controller_runtime_max_concurrent_reconciles{controller="things"} 4.0' in text
    assert 'workqueue_adds_total{name="things"} 3.0' in text
    assert 'workqueue_depth{name="things"} 1.0' in text
    assert 'workqueue_retries_total{name="things"} 1.0' in text
    assert 'workqueue_work_duration_seconds_count{name="things"} 1.0' in text
    assert 'leader_election_master_status{name="things-leader"} 1.0' in text


def test_two_operators_in_one_process_keep_separate_registries() -> None:
    one, two = OperatorMetrics("one"), OperatorMetrics("two")
    one.observe_reconcile(result="success", seconds=0.1)
    assert 'controller="one"' not in two.exposition().decode()


def test_endpoints_answer_and_readyz_follows_the_readiness_check() -> None:
    metrics = OperatorMetrics("things")
    synced = [False]
    with HealthServer(metrics, ready=lambda: synced[0]) as server:
        assert _get(server.url + "/healthz") == (200, "ok")
        status, _ = _get(server.url + "/readyz")
        assert status == 503
        synced[0] = True
        assert _get(server.url + "/readyz") == (200, "ok")
        status, body = _get(server.url + "/metrics")
        assert status == 200
        assert "controller_runtime_reconcile_total" in body
        assert _get(server.url + "/nope")[0] == 404


def test_the_server_releases_its_port_on_stop() -> None:
    server = HealthServer(OperatorMetrics("x"), ready=lambda: True).start()
    url = server.url
    server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/healthz", timeout=2)
