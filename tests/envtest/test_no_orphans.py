"""A SIGKILLed parent leaves no control-plane process behind (Linux: ``PR_SET_PDEATHSIG``).

``stop_all()`` at exit needs a live interpreter; a pytest run that is SIGKILLed (a CI timeout,
an OOM kill) used to leave etcd, kube-apiserver and kube-controller-manager running. A child
Python process starts a control plane from a short-lived thread (the kernel's parent-death
signal follows the *thread* that forked, so the components must not die with that thread), shows
it still serving after the thread ended, and is then SIGKILLed: every component must be gone
within a few seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.envtest._pids import alive

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import json, sys, threading, time
    import kubernetes.client
    from reconciler.envtest import ControlPlane

    plane = ControlPlane(sys.argv[1])
    starter = threading.Thread(target=plane.start)  # ends as soon as the plane is up
    starter.start()
    starter.join()
    time.sleep(1.0)  # a parent-death signal bound to the starter thread would have fired
    plane.check()
    with plane.api_client() as client:
        kubernetes.client.CoreV1Api(client).list_namespace()
    workdir = str(__import__("pathlib").Path(plane.describe()["etcd"]["log"]).parent)
    print(json.dumps({"pids": plane.pids, "components": plane.components,
                      "workdir": workdir}), flush=True)
    time.sleep(120)
""")




@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_components_die_with_a_sigkilled_parent(kube_assets: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(kube_assets)], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    pids: list[int] = []
    workdir = ""
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # bounded: the child's start_timeout, then it exits
        assert line, f"the child did not start a control plane:\n{child.communicate(timeout=30)}"
        started = json.loads(line)
        pids, workdir = started["pids"], started["workdir"]
        assert len(pids) == len(started["components"])
        assert all(alive(pid) for pid in pids), "a component died with its starter thread"
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in pids if alive(pid)] == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        for pid in pids:  # only this test's components, if the test failed
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)
        if workdir and Path(workdir).name.startswith("optk-envtest-"):
            shutil.rmtree(workdir, ignore_errors=True)
