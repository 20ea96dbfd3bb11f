"""Leadership: Lease election, the write fence, the one Lease writer.

Private: the public names are re-exported by ``reconciler`` and its public
modules."""
