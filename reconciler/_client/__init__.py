"""The cluster client: the ClusterClient protocol and its forwarding base, the Kubernetes client
and its transport, configuration (kubeconfig, in-cluster), request counting, read caches.

Private: the public names are re-exported by ``reconciler`` and its public
modules."""
