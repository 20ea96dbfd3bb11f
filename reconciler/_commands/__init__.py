"""The optk subcommands: the command line, plan, manifests and RBAC derivation, uninstall, new.

Modules: ``cli`` (the command line), ``loading`` (the one loader of an operator and the commands'
one bootstrap, ``connected``), ``running`` (``optk run``: its flags, logging, then
``Operator.run``), ``plans`` (``optk plan``: plans printed, never executed), ``rollouts`` (``optk
rollout status``, ``resume``, ``abort``: the rollout record read and changed), ``manifests``
(``optk manifests``), ``rbac`` (the least-privilege role derived from the builders),
``rbac_children`` (pure: what the role needs to write the roles and bindings the operator builds:
their rules, ``bind``, ``escalate``), ``rbac_clusters`` (pure: the role the operator needs in each
cluster it places children in, ``optk manifests --cluster``), ``webhook_manifests`` (what ``optk
manifests`` adds for a ``Webhooks`` hook: its Service, configurations, the CRDs' conversion stanza,
its rules), ``uninstall`` (``optk uninstall``), ``new`` (``optk new``: a project of one's own, from
the templates in ``skeleton/``, package data), ``fleet_plans`` (``optk plan --all``: every parent
planned from one LIST per kind), ``fleet_report`` (pure: its text, JSON and exit code),
``local_dry_run`` (``LocalDryRunClient``: the fleet plan's dry-run writes answered locally, others
refused), ``traces`` (``optk trace``: one parent read, planned dry-run, printed or watched),
``trace_tree`` (pure: the trace of a parent, its JSON and its tree).

Private: the public names are re-exported by ``reconciler`` and its public
modules.
"""
