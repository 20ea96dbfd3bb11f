"""The Tenant example: a parent in the management cluster placing children in every cluster whose
labels match (issue 41).

A ``Tenant`` (``tenancy.optk.dev/v1alpha1``, namespaced) names the clusters it wants by label
(``spec.clusterSelector``: a list of ``{key, value}``); the clusters are the Secrets of the
operator's ``ClusterSecrets`` namespace (``reconciler.ClusterSecrets``: each Secret with a
``kubeconfig`` key is a cluster named after it, its labels the cluster's). Its builders
(``builders``) read the matching clusters as a declared input (``builders.inputs.ClusterSelector``:
names and labels, never a kubeconfig) and place in each a Namespace, a ResourceQuota, a Role and
a RoleBinding (``builders.placed``), the namespace first (a component per cluster, so one
cluster's trouble holds back only its own children). The toolkit summarises each cluster in the
Tenant's ``status.clusters`` (converged, or waiting with the reason). ``crds`` holds the typed
spec and the CRD, ``operator`` the ``Operator``. Only the toolkit's public names are used. See
``examples/tenant/README.md``.
"""
