"""Reconciling one parent: pure plans and conditions, the resource and parent reconcilers,
readiness, memos, finalizers and cleanup, Events, installs.

Private: the public names are re-exported by ``reconciler`` and its public
modules."""
