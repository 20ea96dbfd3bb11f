"""The optk subcommands: the command line, plan, manifests and RBAC derivation, uninstall, new.

Private: the public names are re-exported by ``reconciler`` and its public
modules."""
