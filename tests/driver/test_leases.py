"""The one Lease writer (``reconciler._leadership.leases``) of leader election and the resync
heartbeat: absence reads as ``None``, a hold creates or renews or takes over (with ``acquireTime``
and ``leaseTransitions``), a write over a stale version is refused with 409 instead of overwriting,
and only the holder releases."""

from __future__ import annotations

import pytest

from reconciler import ConflictError, KubernetesClient
from reconciler._base.times import format_micro_time, parse_time
from reconciler._leadership.leases import LeaseWriter, holder_record

T0 = 1_700_000_000.25


def _writer(client: KubernetesClient, ns: str, **labels: str) -> LeaseWriter:
    return LeaseWriter(client, name="lease", namespace=ns, labels=labels)


@pytest.mark.both_servers
def test_a_hold_creates_renews_and_takes_over(client: KubernetesClient, ns: str) -> None:
    leases = _writer(client, ns, role="test")
    assert leases.read() is None
    created = leases.hold(None, "a", now=T0, duration=15)
    assert created["metadata"]["labels"] == {"role": "test"}
    spec = created["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert parse_time(spec["acquireTime"]) == parse_time(spec["renewTime"]) == T0

    renewed = leases.hold(leases.read(), "a", now=T0 + 2, duration=15)["spec"]
    assert parse_time(renewed["acquireTime"]) == T0  # a renewal keeps the acquisition
    assert parse_time(renewed["renewTime"]) == T0 + 2
    assert renewed["leaseTransitions"] == 0

    taken = leases.hold(leases.read(), "b", now=T0 + 30, duration=15)["spec"]
    assert taken["holderIdentity"] == "b"
    assert parse_time(taken["acquireTime"]) == T0 + 30
    assert taken["leaseTransitions"] == 1


@pytest.mark.both_servers
@pytest.mark.parametrize(("count_vacant", "transitions"), [(True, 1), (False, 0)])
def test_taking_a_released_lease_counts_as_the_caller_says(
    client: KubernetesClient, ns: str, count_vacant: bool, transitions: int,
) -> None:
    leases = _writer(client, ns)
    leases.hold(None, "a", now=T0, duration=15)
    assert not leases.release("b", now=T0 + 1)  # only the holder releases
    assert leases.release("a", now=T0 + 1, duration=1)
    released = leases.read()
    assert released is not None
    assert released["spec"]["holderIdentity"] == ""
    assert released["spec"]["leaseDurationSeconds"] == 1
    assert not leases.release("a", now=T0 + 2)  # nobody holds it now
    taken = leases.hold(released, "b", now=T0 + 2, duration=15, count_vacant=count_vacant)
    assert taken["spec"]["leaseTransitions"] == transitions


@pytest.mark.both_servers
def test_a_write_over_a_stale_version_is_refused(client: KubernetesClient, ns: str) -> None:
    leases = _writer(client, ns)
    stale = leases.hold(None, "a", now=T0, duration=15)
    leases.hold(leases.read(), "b", now=T0 + 20, duration=15)
    with pytest.raises(ConflictError):
        leases.hold(stale, "a", now=T0 + 21, duration=15)
    with pytest.raises(ConflictError):
        leases.put(holder_record("a", T0 + 21), over=stale)
    current = leases.read()
    assert current is not None
    assert current["spec"]["holderIdentity"] == "b"


@pytest.mark.both_servers
def test_put_creates_then_merges_spec_and_annotations(client: KubernetesClient, ns: str) -> None:
    leases = _writer(client, ns)
    first = leases.put(holder_record("me", T0), annotations={"x": "1"})
    assert first["metadata"]["annotations"] == {"x": "1"}
    second = leases.put(holder_record("me", T0 + 5), annotations={"y": "2"}, over=first)
    assert second["metadata"]["annotations"] == {"x": "1", "y": "2"}
    assert second["spec"]["renewTime"] == format_micro_time(T0 + 5)
    third = leases.put({"leaseDurationSeconds": 9})  # no version at hand: read, then replace
    assert third["spec"]["holderIdentity"] == "me"
    assert third["spec"]["leaseDurationSeconds"] == 9


def test_holder_record_writes_micro_time() -> None:
    assert holder_record("", T0) == {"holderIdentity": "",
                                     "renewTime": "2023-11-14T22:13:20.250000Z"}
    assert holder_record("a", T0, duration=3)["leaseDurationSeconds"] == 3
