"""Leadership: Lease election, the write fence, the one Lease writer.

Modules: ``election`` (Lease election, ``LeaderElection``), ``fencing`` (``WriteFence``,
``FencingClient``: no write once the lease may have expired), ``leases`` (``LeaseWriter``, the one
Lease writer: election, shard Leases, the resync heartbeat).

Private: the public names are re-exported by ``reconciler`` and its public
modules.
"""
