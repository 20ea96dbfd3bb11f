"""The Observer example: an operator that installs an operator, on the toolkit's own builders.

An ``Observer`` (``observe.optk.dev/v1alpha1``, namespaced) asks for the Thanos example operator
and one ``Thanos`` resource. Its builders (``builders``) produce the whole operator as children:
the Thanos CRD (``examples.thanos.crds``), a ClusterRole and ClusterRoleBinding, a ServiceAccount
and a Deployment running ``optk run examples.thanos.operator:operator``; and the ``Thanos``
resource built from the Observer's spec, which that operator then reconciles: two levels through
the same toolkit. The cluster-scoped children are outside the garbage collector's reach; the
toolkit's cleanup finalizer removes them when the Observer goes, and pruning removes them when
its ``thanos`` block is switched off. With ``spec.prometheusOperatorChart`` it also installs
the Prometheus-operator-like chart kept in ``charts/`` through ``builders.helm`` (Helm's own
engine), and the ``Thanos`` waits for it too. ``crds`` holds the Observer CRD, ``operator`` the
``Operator``. Only the toolkit's public names are used. See ``examples/observer/README.md``.
"""
