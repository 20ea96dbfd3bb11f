"""Code that the reconciler's independent parts share without depending on one another.

The driver, the embedded API server (``reconciler.embedded``) and the real control plane
(``reconciler.envtest``) are kept apart by import-linter contracts, so that a bug in one is not
hidden by the same code in another. Some code is not a decision any of them owns, only a chore
they would otherwise each write again (generating a throw-away PKI). It lives here, and the
``base-is-standalone`` contract keeps it from importing anything of ``reconciler``,
``objectmatcher`` or ``builders``, so the exceptions the other contracts make for it cannot
smuggle in anything else.

Modules: ``lifecycle`` (``Lifecycle``: how a part lives and ends with the runtime), ``errors`` (the
error tree), ``clocks`` (the injected ``Clock``), ``times`` (``Time``/``MicroTime``), ``keys``
(``ParentKey``, ``meta_of``), ``decoding`` (JSON), ``metrics`` (Prometheus and the health server),
``listening`` (``Listener``: the one HTTP listener the health server and the webhook server bind),
``tls`` (the one CA and certificate generator, shared with the embedded server and envtest),
``text`` (``bounded``, ``quoted``: the one limit on text copied into a condition, an Event or a log
line), ``ratelimit`` (``CauseLimiter``: one WARNING per cause per interval).
"""
