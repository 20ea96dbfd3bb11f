"""The cluster client: the ClusterClient protocol and its forwarding base, the Kubernetes client
and its transport, configuration (kubeconfig, in-cluster), request counting, read caches, the
connections to the other clusters children are placed in.

Modules: ``protocol`` (``ClusterClient``, ``ListOptions``, ``ForwardingClient``), ``kubernetes``
(``KubernetesClient`` over the official client), ``transport`` (how a request is sent), ``agents``
(User-Agent), ``counting`` (request accounting), ``caches`` (``ReadCache``, ``PassThroughCache``,
``ForwardingReader``), ``servers`` (``KubeApiServer``: the protocol both test servers satisfy),
``connect`` (kubeconfig and the ``/version`` probe), ``incluster`` (the ServiceAccount's
credentials, rotated tokens), ``reviews`` (``MetricsAuthorizer``: who may scrape ``/metrics``, by
TokenReview and SubjectAccessReview, cached), ``answers`` (the error of a failed answer: by code
and ``Status`` body; a 404 without one is a kind not served), ``cluster_secrets`` (pure:
``ClusterSecrets``, a Secret read as a cluster, never showing its kubeconfig), ``clusters``
(``ClusterConnections``: one client per cluster Secret, rebuilt when it changes; issue 41).

Private: the public names are re-exported by ``reconciler`` and its public
modules.
"""
