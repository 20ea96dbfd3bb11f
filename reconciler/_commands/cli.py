"""``optk``: the command line. Each subcommand parses its arguments here and runs elsewhere."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

_TARGET = "MODULE[:ATTR] | FILE.py[:ATTR]"
_TARGET_HELP = ("module or Python file (a file inside a package is imported by its dotted name) "
                "and Operator attribute (default: operator, else the module's one Operator)")


def build_parser() -> argparse.ArgumentParser:
    """The ``optk`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="optk", description="operator-toolkit command line")
    subparsers = parser.add_subparsers(dest="command", required=True)
    apiserver = subparsers.add_parser(
        "apiserver", help="run the embedded Kubernetes API server in the foreground"
    )
    apiserver.add_argument("--host", default="127.0.0.1", help="address to bind (loopback)")
    apiserver.add_argument("--port", type=int, default=0, help="port (0: pick a free one)")
    apiserver.add_argument("--kubeconfig", default=None, help="where to write the kubeconfig")
    apiserver.add_argument("--allow-non-loopback", action="store_true",
                           help="allow binding a non-loopback address")
    apiserver.add_argument("--history-bytes", type=_bytes, default=None, metavar="SIZE",
                           help="watch history kept, about (default 64Mi; e.g. 16Mi, 1Gi)")
    apiserver.add_argument("--watch-buffer-bytes", type=_bytes, default=None, metavar="SIZE",
                           help="unsent bytes a watcher may have before it is ended "
                                "(default 1Mi)")
    apiserver.add_argument("--watch-buffer-total-bytes", type=_bytes, default=None,
                           metavar="SIZE", help="unsent bytes of all watchers together "
                                                "(default 64Mi)")
    apiserver.set_defaults(handler=_run_apiserver)
    run = subparsers.add_parser("run", help="run an operator defined in a Python module")
    run.add_argument("target", metavar=_TARGET, help=_TARGET_HELP)
    where = run.add_mutually_exclusive_group()
    where.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster")
    where.add_argument("--embedded", action="store_true", help="run a fresh embedded API server")
    run.add_argument("--metrics-port", type=int, default=None,
                     help="serve /metrics, /healthz, /readyz on this port (0: any free port; "
                          "default: not served)")
    run.add_argument("--metrics-bind-address", type=_bind_address, default=None, metavar="ADDR",
                     help="the IP address the metrics port listens on; 0.0.0.0 or :: is every "
                          "interface, IPv4 and IPv6 (default: every interface when running in "
                          "a pod, i.e. KUBERNETES_SERVICE_HOST is set, else 127.0.0.1)")
    run.add_argument("--metrics-auth", action=argparse.BooleanOptionalAction, default=False,
                     help="/metrics answers only a bearer token the API server accepts "
                          "(TokenReview) for a user allowed to get /metrics "
                          "(SubjectAccessReview; the <name>-metrics-reader ClusterRole); "
                          "/healthz and /readyz stay open (default: off; the manifests turn "
                          "it on)")
    run.add_argument("--log-format", choices=("text", "json"), default="text",
                     help="text lines, or one JSON object per line")
    level = run.add_mutually_exclusive_group()
    level.add_argument("-v", "--verbose", action="store_const", const="DEBUG", dest="log_level",
                       help="log at DEBUG (every reconcile, every request decision)")
    level.add_argument("-q", "--quiet", action="store_const", const="WARNING", dest="log_level",
                       help="log warnings and errors only")
    level.add_argument("--log-level", type=_level, dest="log_level", metavar="LEVEL",
                       help="DEBUG, INFO (the default: one line per change), WARNING or ERROR")
    run.add_argument("--leader-elect", action="store_true",
                     help="campaign for the <name>-leader Lease (run several replicas)")
    run.add_argument("--lease-namespace", default=None,
                     help="namespace of the Leases (default: the pod's own namespace)")
    run.add_argument("--watch-namespace", default=None, help="watch parents in this one namespace")
    run.add_argument("--paused", action="store_true",
                     help="write nothing to any parent or child (maintenance; OPTK_PAUSED=1)")
    run.add_argument("--pause-namespace", action="append", default=[], metavar="NS",
                     dest="pause_namespaces",
                     help="write nothing in NS (repeatable; OPTK_PAUSED_NAMESPACES=a,b)")
    run.set_defaults(handler=_run_operator, log_level="INFO")
    manifests = subparsers.add_parser(
        "manifests", help="print the YAML that deploys an operator, with a derived role"
    )
    manifests.add_argument("target", metavar=_TARGET, help=_TARGET_HELP)
    manifests.add_argument("--namespace", default=None,
                           help="namespace of the operator (default: <name>-system)")
    manifests.add_argument("--image", default=None, help="container image (default: <name>:latest)")
    scope = manifests.add_mutually_exclusive_group()
    scope.add_argument("--cluster-wide", dest="namespaced", action="store_false", default=None,
                       help="a ClusterRole: parents in every namespace")
    scope.add_argument("--namespaced", dest="namespaced", action="store_true",
                       help="a Role: parents in the operator's namespace only")
    manifests.add_argument("--metrics-auth", action=argparse.BooleanOptionalAction, default=True,
                           help="run the operator with --metrics-auth, grant it TokenReviews "
                                "and SubjectAccessReviews, and add the <name>-metrics-reader "
                                "ClusterRole for scrapers (default: on)")
    manifests.add_argument("--samples", action="append", default=[],
                           help="YAML file of sample parents (repeatable; default: the module's "
                                "`samples` attribute)")
    manifests.add_argument("--cluster", default=None, metavar="NAME",
                           help="the manifests for a cluster the operator places children in "
                                "(builders.placed): its namespace, ServiceAccount and the role "
                                "it needs there; apply them in that cluster")
    manifests.set_defaults(handler=_run_manifests)
    plan = subparsers.add_parser(
        "plan", help="show what an operator would create, update, recreate or delete; no writes",
        description="Plan the parents in the files: for each, the spec (and labels, annotations) "
                    "IN THE FILE is built, with the identity (uid, resourceVersion) and status of "
                    "the parent of that name on the cluster when it exists, and compared with "
                    "the live children: what the operator would do if the file were applied. "
                    "Nothing is written (creates and patches are sent as dryRun=All). With "
                    "--all instead of -f: every parent on the cluster, as it is there.",
    )
    plan.add_argument("target", metavar=_TARGET, help=_TARGET_HELP)
    what = plan.add_mutually_exclusive_group(required=True)
    what.add_argument("-f", "--filename", action="append", dest="files",
                      help="YAML file of parent objects whose spec is planned (repeatable)")
    what.add_argument("--all", action="store_true", dest="fleet",
                      help="plan every parent on the cluster as it is, from one LIST per kind "
                           "(no dry-run request); exit 0 no changes (or at most --max-changes), "
                           "1 a child or builder would fail, 2 the command failed, 3 more "
                           "writes than --max-changes")
    plan.add_argument("--namespace", default=None, help="--all: parents of this namespace only "
                                                        "(default: the operator's, else all)")
    plan.add_argument("-l", "--selector", default=None,
                      help="--all: parents matching this label selector only")
    plan.add_argument("--max-changes", type=int, default=0, metavar="N",
                      help="--all: exit 3 when more than N children would be written (default 0)")
    plan.add_argument("-o", "--output", choices=("text", "json"), default="text",
                      help="--all: text, or one JSON document (docs/reconciler.md)")
    plan.add_argument("--server-dry-run", action="store_true",
                      help="--all: send each planned create and patch as dryRun=All (the "
                           "server's defaulting, validation, immutable fields)")
    plan.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster")
    plan.add_argument("--show-unchanged", action="store_true", help="list unchanged children too")
    plan.add_argument("-v", "--verbose", action="store_true",
                      help="also log what the dry-run reconcile does (stderr)")
    plan.set_defaults(handler=_run_plan)
    rollout = subparsers.add_parser(
        "rollout", help="show, resume or abort the gradual rollout of a new operator version")
    rollout.add_argument("action", choices=("status", "resume", "abort"))
    rollout.add_argument("target", metavar=_TARGET, help=_TARGET_HELP)
    rollout.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster")
    rollout.add_argument("-o", "--output", choices=("text", "json"), default="text")
    rollout.set_defaults(handler=_run_rollout)
    trace = subparsers.add_parser(
        "trace", help="show a parent's children, their health, and what it is waiting for",
        description="One parent and its children as they are: kind, name, component, health "
                    "(kstatus), the operator's last write and when, what it would do now, the "
                    "policy or pause in force, what each child waits for and why, and fields "
                    "another writer contests. One GET of the parent, one LIST per child kind, "
                    "a dry-run reconcile; nothing is written. Exit 0, 1 when the parent does "
                    "not exist, 2 when the command failed.",
    )
    trace.add_argument("target", metavar=_TARGET, help=_TARGET_HELP)
    trace.add_argument("parent", metavar="[KIND/]NAME", help="the parent (e.g. thanos/observatory)")
    trace.add_argument("-n", "--namespace", default=None,
                       help="the parent's namespace (default: the operator's, else the "
                            "kubeconfig context's)")
    trace.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster")
    trace.add_argument("-o", "--output", choices=("text", "json"), default="text",
                       help="a tree, or one JSON document (docs/reconciler.md)")
    trace.add_argument("-w", "--watch", action="store_true",
                       help="redraw every --interval seconds until Ctrl-C (or --count times)")
    trace.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                       help="--watch: seconds between redraws (default 2)")
    trace.add_argument("--count", type=int, default=None, metavar="N",
                       help="--watch: stop after N redraws")
    trace.set_defaults(handler=_run_trace)
    uninstall = subparsers.add_parser(
        "uninstall", help="delete what a (stopped) operator owns, then its finalizers on parents",
        description="Delete every child the operator manages, then remove its finalizer from "
                    "every parent. Refused (exit code 2, nothing done) while the operator runs: "
                    "while its <name>-leader Lease is held and renewed within its lease "
                    "duration, or its <name>-resync heartbeat Lease is held and written within "
                    "two heartbeat periods (in any namespace). A cleanly stopped operator "
                    "releases both; after a crash, wait for them to go stale or pass --force.",
    )
    uninstall.add_argument("target", metavar=_TARGET, help=_TARGET_HELP)
    uninstall.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster")
    uninstall.add_argument("--force", action="store_true",
                           help="uninstall even while the operator's Leases say it runs (it "
                                "will create what it owns again)")
    uninstall.set_defaults(handler=_run_uninstall)
    new = subparsers.add_parser(
        "new", help="write a new operator project: typed spec, builders, tests, Dockerfile",
        description="Write the project NAME (the canonical Memcached operator, named after it): "
                    "a typed spec and its CRD, builders, Hypothesis property tests, a test on "
                    "the embedded API server, a sample parent, a Dockerfile, a pyproject.toml "
                    "and a README with its two commands (set up, test).",
    )
    new.add_argument("name", metavar="NAME",
                     help="a DNS-1123 label starting with a letter (memcached, web-cache): the "
                          "kind (WebCache), package (web_cache) and operator name derive from it")
    new.add_argument("--dir", default=None, dest="directory", metavar="PATH",
                     help="the project's folder, new or empty (default: ./NAME)")
    new.set_defaults(handler=_run_new)
    return parser


def _bytes(value: str) -> int:
    """A size in bytes for the ``apiserver`` limits: a Kubernetes quantity (``64Mi``, ``1G``,
    ``65536``), a whole number of bytes of at least one."""
    from objectmatcher import parse_quantity

    amount = parse_quantity(value)
    if amount is None or amount != amount.to_integral_value() or amount < 1:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a size in bytes (a whole number, or a quantity such as 64Mi)")
    return int(amount)


def _bind_address(value: str) -> str:
    """An IP address for ``--metrics-bind-address``."""
    from reconciler._base.metrics import parse_bind_address

    try:
        return parse_bind_address(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _level(value: str) -> str:
    """A logging level name for ``--log-level``."""
    name = value.upper()
    if name not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise argparse.ArgumentTypeError(
            f"unknown log level {value!r} (DEBUG, INFO, WARNING, ERROR or CRITICAL)")
    return name


def _run_plan(args: argparse.Namespace) -> int:
    from reconciler._commands.plans import plan_command

    # The printed plan carries every child's outcome, errors included: the reconcile's own
    # warnings would only repeat it on stderr.
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR,
                        format="optk plan: %(levelname)s %(name)s: %(message)s")

    fleet_only = [flag for flag, value in (("--namespace", args.namespace), ("-l", args.selector),
                  ("--max-changes", args.max_changes), ("-o", args.output != "text"),
                  ("--server-dry-run", args.server_dry_run)) if value]
    if fleet_only and not args.fleet:
        print(f"optk plan: {', '.join(fleet_only)} only with --all", file=sys.stderr)
        return 2
    try:
        if args.fleet:
            from reconciler._commands.fleet_plans import fleet_plan_command

            return fleet_plan_command(
                args.target, kubeconfig=args.kubeconfig, namespace=args.namespace,
                selector=args.selector, max_changes=args.max_changes, output=args.output,
                server_dry_run=args.server_dry_run, show_unchanged=args.show_unchanged)
        return plan_command(args.target, files=args.files, kubeconfig=args.kubeconfig,
                            show_unchanged=args.show_unchanged)
    except (ValueError, OSError) as error:
        print(f"optk plan: {error}", file=sys.stderr)
        return 2


def _run_rollout(args: argparse.Namespace) -> int:
    from reconciler._commands.rollouts import rollout_command

    try:
        return rollout_command(args.action, args.target, kubeconfig=args.kubeconfig,
                               output=args.output)
    except (ValueError, OSError) as error:
        print(f"optk rollout: {error}", file=sys.stderr)
        return 2


def _run_trace(args: argparse.Namespace) -> int:
    from reconciler._commands.traces import trace_command

    logging.basicConfig(level=logging.ERROR, format="optk trace: %(levelname)s %(message)s")
    try:
        return trace_command(args.target, args.parent, namespace=args.namespace,
                             kubeconfig=args.kubeconfig, output=args.output, watch=args.watch,
                             interval=args.interval, count=args.count)
    except (ValueError, OSError) as error:
        print(f"optk trace: {error}", file=sys.stderr)
        return 2


def _run_uninstall(args: argparse.Namespace) -> int:
    from reconciler._commands.uninstall import uninstall_command

    try:
        return uninstall_command(args.target, kubeconfig=args.kubeconfig, force=args.force)
    except (ValueError, OSError) as error:
        print(f"optk uninstall: {error}", file=sys.stderr)
        return 2


def _run_new(args: argparse.Namespace) -> int:
    from reconciler._commands.new import new_command

    try:
        return new_command(args.name, directory=args.directory)
    except (ValueError, OSError) as error:
        print(f"optk new: {error}", file=sys.stderr)
        return 2


def _run_manifests(args: argparse.Namespace) -> int:
    from reconciler._commands.manifests import manifests_command

    try:
        text = manifests_command(args.target, namespace=args.namespace, image=args.image,
                                 namespaced=args.namespaced, samples=args.samples,
                                 metrics_auth=args.metrics_auth, cluster=args.cluster)
    except (ValueError, TypeError, OSError) as error:
        print(f"optk manifests: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


def _run_operator(args: argparse.Namespace) -> int:
    from reconciler._commands.running import run_command

    try:  # both forms, plain and as deployed (--leader-elect ...), run in one process shell
        return run_command(args.target, kubeconfig=args.kubeconfig, embedded=args.embedded,
                           metrics_port=args.metrics_port,
                           metrics_bind_address=args.metrics_bind_address,
                           metrics_auth=args.metrics_auth,
                           log_format=args.log_format,
                           log_level=args.log_level, leader_elect=args.leader_elect,
                           lease_namespace=args.lease_namespace,
                           watch_namespace=args.watch_namespace, paused=args.paused,
                           pause_namespaces=args.pause_namespaces)
    except ValueError as error:
        print(f"optk run: {error}", file=sys.stderr)
        return 2


def _run_apiserver(args: argparse.Namespace) -> int:
    from reconciler.embedded._command import run_apiserver

    limits = {name: value for name in ("history_bytes", "watch_buffer_bytes",
                                       "watch_buffer_total_bytes")
              if (value := getattr(args, name)) is not None}
    return run_apiserver(host=args.host, port=args.port, kubeconfig=args.kubeconfig,
                         allow_non_loopback=args.allow_non_loopback, **limits)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``optk`` console script and ``python -m reconciler``."""
    args = build_parser().parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is not None:
        return int(handler(args))
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse guards this


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
