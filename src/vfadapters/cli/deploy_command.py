"""``vf deploy FLOW --image IMAGE``: render a run's Kubernetes objects, and apply them.

The objects come from :func:`vfcore.render` (pure); this module parses the
flags into :class:`vfcore.RenderOptions`. ``--render-only`` stops there:
``-o DIR`` writes one YAML file per object, named ``NN-<kind>-<name>.yaml``
with ``NN`` the apply order (so ``kubectl apply -f DIR`` applies them in that
order), and nothing else: an earlier render's files are replaced only where
they are provably vf's (:mod:`vfadapters.cli.render_output`); without ``-o``
every object goes to stdout as one multi-document YAML stream. Otherwise :func:`apply_and_wait` plans against the live cluster,
applies and waits (docs/kubernetes.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from vfadapters.cli.output import EXIT_OK, EXIT_RUNTIME, report_error

#: Where ``vf dockerfile`` puts the flow file in the image.
APP_DIR = "/app"


def register(sub: Any) -> None:
    from vfadapters.kubernetes.client import add_connection_options

    p = sub.add_parser(
        "deploy",
        help="render a flow's Kubernetes objects and deploy them (--render-only: YAML)",
        description="Render every Kubernetes object of one run of the flow (workers running "
        "`vf worker`, a NATS JetStream broker unless --broker, the setup Job, PDBs, KEDA "
        "ScaledObjects with --autoscaling) and apply them; --render-only writes them as YAML.",
    )
    p.add_argument("flow", metavar="FLOW", help="flow.py or flow.py:factory")
    p.add_argument(
        "--image",
        required=True,
        metavar="IMAGE",
        help="the container image with the flow's code and vfcore (see `vf dockerfile FLOW`)",
    )
    p.add_argument(
        "--run",
        default=None,
        metavar="ID",
        help="the run id (names every object and stream; default: r<UTC time>, e.g. "
        "r20261203-101500; with --render-only, r<10 hex digits of the flow's hash>, the "
        "same for every render of the same flow)",
    )
    p.add_argument("--namespace", default="default", metavar="NS", help="namespace (default)")
    p.add_argument(
        "--flow-path",
        default=None,
        metavar="PATH",
        help=f"the flow file inside the image (default: {APP_DIR}/<FLOW's file name>, where "
        "`vf dockerfile` copies it)",
    )
    p.add_argument(
        "--render-only",
        action="store_true",
        help="write the objects as YAML and stop (no cluster needed)",
    )
    p.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="DIR",
        help="with --render-only: write one NN-<kind>-<name>.yaml per object into DIR "
        "(default: one multi-document YAML on stdout)",
    )
    p.add_argument(
        "--broker",
        default=None,
        metavar="URL",
        help="an existing NATS JetStream server (nats://host:port); default: deploy one",
    )
    p.add_argument(
        "--broker-monitoring",
        default=None,
        metavar="HOST:PORT",
        help="the broker's monitoring endpoint KEDA reads (default: the broker's host, :8222)",
    )
    p.add_argument(
        "--broker-image", default=None, metavar="IMAGE", help="the NATS image (nats:2.11)"
    )
    p.add_argument(
        "--broker-storage", default="10Gi", metavar="Q", help="the broker's volume size (10Gi)"
    )
    p.add_argument("--broker-storage-class", default=None, metavar="NAME", help="its StorageClass")
    p.add_argument(
        "--broker-replicas",
        type=int,
        default=1,
        metavar="N",
        help="servers of the in-cluster broker: 1, or a JetStream cluster of 3 or 5 (one per "
        "host; every stream on 3 servers: the loss of one loses nothing)",
    )
    p.add_argument(
        "--rollout",
        choices=("drain", "surge"),
        default=None,
        help="a REALTIME run already deployed, new pods: drain (each old replica finishes "
        "what it holds before its replacement starts) or surge (the new replica starts "
        "first); BATCH runs refuse it (docs/kubernetes.md, Rollouts)",
    )
    p.add_argument(
        "--render-credentials",
        action="store_true",
        help="print only the run's credentials Secret (fresh keys: the broker's configuration, "
        "one nkey seed per role, the run key) on stdout, for `kubectl apply -f -` or a "
        "sealing tool; needs --run (docs/security.md)",
    )
    p.add_argument(
        "--keda-namespace",
        default="keda",
        metavar="NS",
        help="the namespace KEDA's operator runs in: the only one the broker's monitoring "
        "port admits (keda)",
    )
    p.add_argument(
        "--no-network-policies",
        action="store_true",
        help="render no NetworkPolicy (the broker then admits any pod that can reach it)",
    )
    p.add_argument(
        "--restrict-egress",
        action="store_true",
        help="workers may connect only to the broker and DNS (default: their egress stays "
        "open, for flows that read cameras or object stores)",
    )
    p.add_argument(
        "--gpu-mode",
        default="exclusive",
        metavar="MODE",
        help="exclusive (whole GPUs), shared (runtime class, no GPU limit), mix (MIG slices) "
        "or dra (a ResourceClaimTemplate per GPU node: the scheduler allocates the devices)",
    )
    p.add_argument(
        "--dra-device-class",
        default="gpu.nvidia.com",
        metavar="CLASS",
        help="--gpu-mode dra: the DeviceClass whole-GPU claims name (gpu.nvidia.com)",
    )
    p.add_argument(
        "--dra-mig-device-class",
        default="mig.nvidia.com",
        metavar="CLASS",
        help="--gpu-mode dra: the DeviceClass of a memory-declaring one-GPU node's claim "
        "(mig.nvidia.com)",
    )
    p.add_argument(
        "--gpu-resource-name", default=None, metavar="R", help="GPU resource (nvidia.com/gpu)"
    )
    p.add_argument(
        "--gpu-runtime-class",
        default=None,
        metavar="NAME",
        help="runtimeClassName of GPU pods (required with --gpu-mode shared)",
    )
    p.add_argument(
        "--gpu-node-selector",
        default="nvidia.com/gpu.present=true",
        metavar="KEY=VALUE",
        help="the GPU pool's node label (nvidia.com/gpu.present=true)",
    )
    p.add_argument(
        "--mig",
        action="append",
        default=[],
        metavar="NODE=RESOURCE[@PRODUCT]",
        help="--gpu-mode mix: the MIG resource a node's pods request, and the GPU product "
        "they need (nvidia.com/gpu.product); a deploy takes them from the plan",
    )
    p.add_argument(
        "--resources",
        action="append",
        default=[],
        metavar="NODE=cpu:Q,memory:Q",
        help="per-node requests overriding the flow's requests= (repeatable)",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for every worker (repeatable)",
    )
    # -- what a production deploy sets on the pods (vfcore.runtime.pod_options) ----
    p.add_argument(
        "--mount-pvc",
        action="append",
        default=[],
        metavar="[NODE=]CLAIM:PATH[:ro]",
        help="mount an existing PersistentVolumeClaim at PATH in every worker (or NODE's); "
        "the preflight checks that it exists and that its access modes allow the plan's "
        "pods and nodes (repeatable)",
    )
    p.add_argument(
        "--mount-configmap",
        action="append",
        default=[],
        metavar="[NODE=]NAME:PATH",
        help="mount a ConfigMap read-only at PATH in every worker (or NODE's); it must "
        "exist (repeatable)",
    )
    p.add_argument(
        "--mount-secret",
        action="append",
        default=[],
        metavar="[NODE=]NAME:PATH",
        help="mount a Secret read-only at PATH in every worker (or NODE's); it must exist "
        "(repeatable)",
    )
    p.add_argument(
        "--scratch",
        default=None,
        metavar="SIZE",
        help="an emptyDir of at most SIZE at /scratch in every worker (e.g. 20Gi)",
    )
    p.add_argument(
        "--image-pull-policy",
        default=None,
        metavar="POLICY",
        help="Always, IfNotPresent or Never for the containers running the flow's image "
        "(default: Kubernetes' own: Always for :latest or no tag, else IfNotPresent)",
    )
    p.add_argument(
        "--image-pull-secret",
        action="append",
        default=[],
        metavar="NAME",
        help="a docker-registry Secret of the namespace, on every pod (repeatable)",
    )
    p.add_argument(
        "--image-override",
        action="append",
        default=[],
        metavar="NODE=IMAGE",
        help="NODE's pods run IMAGE instead of --image (a GPU node's own image; it must hold "
        "the flow and vfcore too) (repeatable)",
    )
    p.add_argument(
        "--priority-class",
        default=None,
        metavar="NAME",
        help="the PriorityClass of every pod of the run; the preflight reads it (it must "
        "exist) and plans with its value",
    )
    p.add_argument(
        "--autoscaling",
        action="store_true",
        help="a KEDA ScaledObject per autoscalable REALTIME processor",
    )
    p.add_argument(
        "--gpu-autoscaling", action="store_true", help="let KEDA scale GPU processors too"
    )
    p.add_argument("--max-replicas", type=int, default=10, metavar="N", help="KEDA's maximum (10)")
    p.add_argument(
        "--lag-threshold",
        type=int,
        default=10,
        metavar="N",
        help="messages waiting per replica before KEDA adds one (10)",
    )
    # -- applying (apply_and_wait) ---------------------------------------------
    p.add_argument(
        "--dry-run",
        choices=("server",),
        default=None,
        help="server: send every object with dryRun=All (the API server validates, "
        "nothing is stored)",
    )
    p.add_argument(
        "--strict-preflight",
        action="store_true",
        help="refuse to deploy when the plan is unknown or the scheduler would strand pods",
    )
    p.add_argument(
        "--allow-preemption",
        action="store_true",
        help="with --strict-preflight: deploy even when the pods land only by evicting "
        "lower-priority pods (kube-scheduler's preemption, as vf plan predicts it)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="give up waiting after S seconds (600)",
    )
    p.add_argument(
        "--unschedulable-grace",
        type=float,
        default=60.0,
        metavar="S",
        help="how long a pod may stay Unschedulable before the wait gives up with "
        "kube-scheduler's message (60)",
    )
    p.add_argument(
        "--force-conflicts",
        action="store_true",
        help="take over fields another field manager owns (server-side apply force=true)",
    )
    add_connection_options(p)
    p.set_defaults(handler=_cmd_deploy)


def _pairs(values: list[str], flag: str, example: str) -> dict[str, str]:
    from vfcore import InvalidInputError

    out: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip() or not rest.strip():
            raise InvalidInputError(
                "invalid-option", f"{flag} {value!r} is not KEY=VALUE", f"write {flag} {example}"
            )
        out[key.strip()] = rest.strip()
    return out


def default_run_id() -> str:
    return time.strftime("r%Y%m%d-%H%M%S", time.gmtime())


def _run_id(args: argparse.Namespace, spec: Any) -> str:
    """``--run``; else, for a render (``--render-only``, ``--render-credentials``
    refuses it), one derived from the flow, so that two renders of it are the same bytes;
    else (a deploy) ``r<UTC time>``."""
    if args.run is not None:
        return str(args.run)
    if args.render_only and spec is not None:
        from vfcore.runtime import render_run_id

        return render_run_id(spec)
    return default_run_id()


def render_options(args: argparse.Namespace, flow_file: str, spec: Any = None) -> Any:
    """The :class:`vfcore.RenderOptions` the flags ask for (``spec``: the flow, whose
    :func:`~vfcore.runtime.render_options.render_run_id` names a ``--render-only`` run
    without ``--run``)."""
    from vfcore import InvalidInputError
    from vfcore.placement import parse_resources_option
    from vfcore.runtime import RenderOptions

    selector = _pairs(
        [args.gpu_node_selector], "--gpu-node-selector", "nvidia.com/gpu.present=true"
    )
    mig: dict[str, tuple[str, str | None]] = {}
    for node, choice in _pairs(
        args.mig, "--mig", "pose=nvidia.com/mig-1g.10gb@NVIDIA-A100-SXM4-40GB"
    ).items():
        resource, _, product = choice.partition("@")
        mig[node] = (resource, product or None)
    resources: dict[str, dict[str, str]] = {}
    for text in args.resources:
        for node, entries in parse_resources_option(text).items():
            resources.setdefault(node, {}).update(entries)
    if args.output is not None and not args.render_only:
        raise InvalidInputError(
            "invalid-option",
            "-o/--output writes YAML, which only --render-only does",
            "add --render-only, or drop -o",
        )
    if args.render_credentials and (args.output is not None or args.run is None):
        raise InvalidInputError(
            "invalid-option",
            "--render-credentials prints the run's keys on stdout only, for one named run: "
            + (
                "it never writes them into -o DIR"
                if args.output is not None
                else "--run is missing"
            ),
            "render the objects with --render-only -o DIR --run ID, and the Secret apart: "
            "vf deploy FLOW --image IMAGE --run ID --render-credentials | kubectl apply -f -",
        )
    extra: dict[str, Any] = {}
    if args.broker_image is not None:
        extra["broker_image"] = args.broker_image
    return RenderOptions(
        image=args.image,
        run_id=_run_id(args, spec),
        namespace=args.namespace,
        flow_path=args.flow_path or f"{APP_DIR}/{flow_file}",
        broker_url=args.broker,
        broker_monitoring=args.broker_monitoring,
        broker_storage=args.broker_storage,
        broker_storage_class=args.broker_storage_class,
        gpu_mode=args.gpu_mode,
        gpu_resource_name=args.gpu_resource_name,
        gpu_runtime_class=args.gpu_runtime_class,
        gpu_node_selector=next(iter(selector.items())),
        mig=mig,
        resources=resources,
        env=_pairs(args.env, "--env", "LOG_LEVEL=info"),
        keda=args.autoscaling,
        gpu_autoscaling=args.gpu_autoscaling,
        max_replicas=args.max_replicas,
        lag_threshold=args.lag_threshold,
        dra_device_class=args.dra_device_class,
        dra_mig_device_class=args.dra_mig_device_class,
        keda_namespace=args.keda_namespace,
        network_policies=not args.no_network_policies,
        restrict_egress=args.restrict_egress,
        broker_replicas=args.broker_replicas,
        rollout=args.rollout,
        volumes=_volumes(args),
        scratch=args.scratch,
        image_pull_policy=args.image_pull_policy,
        image_pull_secrets=tuple(args.image_pull_secret),
        image_overrides=_pairs(args.image_override, "--image-override", "detector=reg/gpu:1"),
        priority_class=args.priority_class,
        **extra,
    )


def _volumes(args: argparse.Namespace) -> tuple[Any, ...]:
    """``--mount-pvc``, ``--mount-configmap`` and ``--mount-secret``, parsed."""
    from vfcore.runtime import parse_volume

    return tuple(
        parse_volume(kind, text)
        for kind, texts in (
            ("pvc", args.mount_pvc),
            ("configmap", args.mount_configmap),
            ("secret", args.mount_secret),
        )
        for text in texts
    )


def live_render_inputs(args: argparse.Namespace, spec: Any, options: Any) -> dict[str, Any]:
    """What rendering takes from the live cluster on a real deploy (none with --render-only).

    ``mig``: in mix mode, the MIG resource (and GPU product) the mix plan on the live
    snapshot chose for each node that takes a slice (unless ``--mig`` gave them);
    ``capacity_caps``: with ``--autoscaling``, the replicas of each scaled node the
    exact planner can place (``vfcore.capacity_cap``; an unknown limit caps nothing).
    The cluster is read only when one of them is needed.
    """
    from vfcore import REALTIME, InvalidInputError, autoscaling_rejections, pod_requests
    from vfcore.placement import AutoscalingOptions
    from vfcore.runtime import mig_choices

    mig_nodes = sorted(
        {p.node for p in pod_requests(spec, gpu_mode=options.gpu_mode) if p.slice == "mig"}
    )
    needs_mig = bool(mig_nodes) and not options.mig
    scaled: list[str] = []
    if options.keda and spec.flow_type == REALTIME:
        rejections = autoscaling_rejections(
            spec,
            AutoscalingOptions(
                enabled=True,
                gpu_autoscaling=options.gpu_autoscaling,
                max_replicas=options.max_replicas,
            ),
        )
        scaled = [n.name for n in spec.nodes if not rejections[n.name]]
    if not needs_mig and not scaled:
        return {}
    from vfadapters.kubernetes.client import connect_from_args
    from vfadapters.kubernetes.deploy import run_live_plan
    from vfcore.scaling import capacity_cap

    cluster, result = run_live_plan(connect_from_args(args), spec, args)
    changes: dict[str, Any] = {}
    if needs_mig:
        chosen = {} if result.mig is None else mig_choices(result.mig, cluster.nodes)
        missing = [n for n in mig_nodes if n not in chosen]
        if missing:
            raise InvalidInputError(
                "mig-not-planned",
                f"--gpu-mode mix: the plan on the live cluster is {result.verdict} and chose "
                f"no MIG profile for {missing}",
                "run `vf plan FLOW --kube --gpu-mode mix` to see why, or pass --mig "
                "NODE=RESOURCE[@PRODUCT]",
            )
        changes["mig"] = chosen
    caps: dict[str, int] = {}
    for node in scaled:
        cap = capacity_cap(
            spec,
            cluster,
            node,
            up_to=options.max_replicas,
            gpu_mode=options.gpu_mode,
            gpu_resource_name=options.gpu_resource_name,
            gpu_node_selector=options.gpu_node_selector,
            resources={n: dict(r) for n, r in options.resources},
        )
        if cap.limit is not None:
            caps[node] = cap.limit
    if caps:
        changes["capacity_caps"] = caps
    return changes


def to_yaml(obj: dict[str, Any]) -> str:
    """One object as YAML, keys in render order (the same bytes for the same object)."""
    import yaml

    text: str = yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return text


def write_objects(
    objects: tuple[dict[str, Any], ...], output: str | None, *, flow: str, run: str
) -> list[Path]:
    """``-o DIR``: one file per object and a record of them (:mod:`.render_output`)."""
    from vfadapters.cli.render_output import file_name, write_render

    if output is None:
        sys.stdout.write("".join(f"---\n{to_yaml(o)}" for o in objects))
        return []
    texts = [(file_name(i, o), to_yaml(o)) for i, o in enumerate(objects)]
    return write_render(texts, output, flow=flow, run=run)


def _cmd_deploy(args: argparse.Namespace) -> int:
    from vfadapters.cli.inputs import DAY, check_seconds
    from vfadapters.loading import load_runnable, split_target
    from vfcore.runtime import render

    check_seconds(args.timeout, "--timeout", most=30 * DAY, example="600", rule="invalid-timeout")
    check_seconds(
        args.unschedulable_grace,
        "--unschedulable-grace",
        most=DAY,
        zero=True,
        example="60",
        rule="invalid-timeout",
    )
    path, factory = split_target(args.flow)
    flow_file = path.name + (f":{factory}" if factory else "")
    _, spec = load_runnable(args.flow)
    options = render_options(args, flow_file, spec)
    if not args.render_only:
        changes = live_render_inputs(args, spec, options)
        if changes:
            options = replace(options, **changes)
    if args.render_credentials:
        return _print_credentials(spec, options)
    if not args.render_only:
        code = _with_run_secrets(args, spec, options)
        if isinstance(code, int):
            return code
        options = code
    objects = render(spec, options)
    if args.render_only:
        from vfadapters.cli.render_output import RenderWriteError

        out = args.output
        try:
            paths = write_objects(objects, out, flow=spec.name, run=options.run_id)
        except RenderWriteError as exc:
            report_error(
                "render-write-failed",
                str(exc),
                "free space or fix the directory, then render again: it replaces what it wrote",
                as_json=False,
            )
            return EXIT_RUNTIME
        if out is not None:
            print(
                f"rendered {len(paths)} objects of run {options.run_id} of {spec.name} into "
                f"{out} (kubectl apply -f {out} applies them in order)",
                file=sys.stderr,
            )
        if args.run is None:
            print(
                f"run id {options.run_id}: from the flow's hash (the same for every render of "
                "this flow; pass --run ID to choose one)",
                file=sys.stderr,
            )
        print(_credentials_note(args, spec, options), file=sys.stderr)
        return EXIT_OK
    return apply_and_wait(args, objects)


def _credentials_note(args: argparse.Namespace, spec: Any, options: Any) -> str:
    """What --render-only says about the Secret it does not write (docs/security.md)."""
    import shlex

    from vfcore.runtime import credentials_secret_name

    parts = ["vf", "deploy", str(args.flow), "--image", options.image, "--run", options.run_id]
    if options.namespace != "default":
        parts += ["--namespace", options.namespace]
    if options.broker_url is not None:
        parts += ["--broker", options.broker_url]
    if args.flow_path:
        parts += ["--flow-path", args.flow_path]
    command = " ".join(shlex.quote(p) for p in [*parts, "--render-credentials"])
    return (
        f"the objects use Secret {credentials_secret_name(spec.name, options.run_id)} (the "
        "run's keys), which is not in the render: create it once, before applying them, "
        f"with\n  {command} | kubectl apply -f -\n(or pipe it to your sealing tool; never "
        "commit it in clear)"
    )


def _print_credentials(spec: Any, options: Any) -> int:
    """``--render-credentials``: the run's Secret with fresh keys, on stdout only."""
    from vfadapters.kubernetes.credentials import generate_run_secrets
    from vfcore.runtime import broker_topology, render

    values = generate_run_secrets(broker_topology(spec, options.run_id))
    objects = render(spec, replace(options, secret_values=values))
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    sys.stdout.write(f"---\n{to_yaml(secret)}")
    print(
        f"printed Secret {secret['metadata']['name']} of run {options.run_id} with fresh keys "
        "(in clear: apply it or seal it, do not store it as it is)",
        file=sys.stderr,
    )
    return EXIT_OK


def _with_run_secrets(args: argparse.Namespace, spec: Any, options: Any) -> Any:
    """The options with the run's secret values: those of its Secret on the cluster, or new
    ones; an exit code when the cluster cannot tell."""
    from vfadapters.kubernetes.client import KubeApiError, connect_from_args
    from vfadapters.kubernetes.credentials import run_secrets_on_cluster
    from vfcore.runtime import broker_topology, credentials_secret_name

    try:
        values, _ = run_secrets_on_cluster(
            connect_from_args(args),
            credentials_secret_name(spec.name, options.run_id),
            options.namespace,
            broker_topology(spec, options.run_id),
            in_cluster_broker=options.broker_url is None,
        )
    except KubeApiError as exc:
        report_error(exc.rule, exc.message, exc.hint, as_json=False)
        return EXIT_RUNTIME
    return replace(options, secret_values=values)


# ---------------------------------------------------------------------------
# apply_and_wait: OWNED BY THE LIVE-CLUSTER HELPER (issue 14, items 4-6):
# preflight from the live cluster, server-side apply in dependency order
# (field manager `vf`), --dry-run=server, the wait loop (vfadapters.kubernetes.deploy).
# ---------------------------------------------------------------------------
def apply_and_wait(args: argparse.Namespace, objects: tuple[dict[str, Any], ...]) -> int:
    """Preflight on the live cluster, server-side apply, wait (vfadapters.kubernetes.deploy)."""
    from vfadapters.kubernetes.deploy import apply_and_wait as deploy

    return deploy(args, objects)
