"""The toolkit's test helpers, behind the public face ``reconciler.testing``.

Modules: ``clock`` (``VirtualClock``: time that moves only when a test says so), ``waits``
(``wait_synced``, ``wait_idle``: real-time waits on a running operator), ``workloads``
(``make_available``, ``make_workloads_available``: what a kubelet would do), ``machine``
(``operator_machine``: the Hypothesis state machine over a whole operator, issue 38),
``observations`` (the machine's helpers: paths into objects, the request log, log lines,
conditions, its tracking client).

Private: the public names are re-exported by ``reconciler.testing``.
"""
