"""A real HTTP fake Kubernetes API server for the adapter's tests: kmock, plus what it lacks.

kmock's :class:`~kmock.KubernetesEmulator` stores objects and serves
create/get/list/patch/delete over HTTP, so the official ``kubernetes`` client
talks to it as to an API server. What it lacks is emulated here, minimally:

- **label selectors** on listings (``a=b``, ``a!=b``, ``a``, ``!a``, comma = and);
- **server-side apply**: a PATCH with ``application/apply-patch+yaml`` creates
  or updates the object, records the field manager, honours ``dryRun=All``
  (nothing stored), keeps ``metadata.resourceVersion``/``generation`` unchanged
  when nothing changed and bumps them otherwise, and answers 409 Conflict when
  a field another manager set would change and ``force`` is not true;
- **refusals**: ``refuse(plural, status)`` makes every request on that resource
  answer a ``Status`` (403 Forbidden, 401, 500 …);
- a **pod log** endpoint (``/log``) answering ``logs[(ns, name)]``.

The server runs on its own event loop in a thread, so synchronous code (the
adapter, a ``vf`` subprocess) can call it; :meth:`FakeKube.call` runs a function
on that loop to change objects while a client polls.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp.web
import kmock
from kmock._internal import rendering

APPLY = "application/apply-patch+yaml"


def _matches(labels: Mapping[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k.strip().rstrip("=")) != v.strip().lstrip("="):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _fields_match(obj: Mapping[str, Any], selector: str) -> bool:
    """``a.b=v,c=w`` on dotted paths (``involvedObject.name=x``), equality only."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        path, _, value = term.partition("=")
        here: Any = obj
        for part in path.split("."):
            here = here.get(part) if isinstance(here, Mapping) else None
        if here != value:
            return False
    return True


def _leaves(obj: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*prefix, str(k)))
    else:
        yield prefix, obj


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for p in path:
        if not isinstance(obj, dict) or p not in obj:
            return _MISSING
        obj = obj[p]
    return obj


_MISSING = object()


def _merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


class FakeKubeHandler(kmock.KubernetesEmulator):  # type: ignore[misc]
    """kmock's emulator with selectors, server-side apply, refusals and pod logs."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.refusals: dict[str, tuple[int, str]] = {}
        self.applies: list[dict[str, Any]] = []
        self.logs: dict[tuple[str, str], str] = {}
        self.version = 100
        #: Honour ``limit``/``continue`` (kmock ignores them); fail pages after the first of these.
        self.paginate = False
        self.fail_later_pages: set[str] = set()
        #: Listings of these resources always send ``metadata.continue``: ``"repeat"`` the same
        #: token each time, ``"fresh"`` a new one each time (a server whose pages never end).
        self.endless: dict[str, str] = {}
        self.pages_served = 0
        #: Emulate controllers + scheduler: a workload applied gets its pods, bound to this node.
        self.spawn_bound_pods_on: str | None = None
        #: With ``spawn_bound_pods_on``: the pods are Ready, Deployments/StatefulSets report so.
        self.ready_workloads = False
        #: Emulate the Job controller: a Job applied is stored with ``Complete=True``.
        self.complete_jobs = False
        #: ``(plural, name)`` whose DELETE only sets ``deletionTimestamp`` (a pod on a dead
        #: node, an object held by a finalizer): the object stays until the test removes it.
        self.lingering: set[tuple[str, str]] = set()

    async def _serve_list(self, request: rendering.Request) -> Any:
        doc = await super()._serve_list(request)
        selector = request.params.get("labelSelector")
        if selector:
            doc["items"] = [
                o
                for o in doc["items"]
                if _matches((o.get("metadata") or {}).get("labels") or {}, selector)
            ]
        fields = request.params.get("fieldSelector")
        if fields:
            doc["items"] = [o for o in doc["items"] if _fields_match(o, fields)]
        limit = request.params.get("limit")
        self.pages_served += 1
        how = self.endless.get(request.resource.plural)
        if how is not None:
            token = "again" if how == "repeat" else f"page-{self.pages_served}"
            doc["metadata"] = {"continue": token, "resourceVersion": "1"}
            return doc
        if self.paginate and limit:
            start = int(request.params.get("continue") or 0)
            if start and request.resource.plural in self.fail_later_pages:
                raise kmock.KubernetesError(
                    status=410,
                    reason="Expired",
                    message="The provided continue parameter is too old",
                )
            items = doc["items"]
            doc["items"] = items[start : start + int(limit)]
            if start + int(limit) < len(items):
                doc["metadata"] = {"continue": str(start + int(limit)), "resourceVersion": "1"}
        return doc

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is not None and request.resource.plural in self.refusals:
            status, reason = self.refusals[request.resource.plural]
            raise kmock.KubernetesError(
                status=status,
                reason=reason,
                message=f'{request.resource.plural} is {reason.lower()}: User "ci" cannot '
                f'{request.method.value.lower()} resource "{request.resource.plural}"',
            )
        if request.subresource == "log" and request.resource is not None:
            text = self.logs.get((request.namespace or "", request.name or ""), "")
            return aiohttp.web.Response(text=text, content_type="text/plain")
        if (
            request.method.value.upper() == "DELETE"
            and request.resource is not None
            and (request.resource.plural, request.name) in self.lingering
        ):
            key = (request.resource, request.namespace, request.name)
            if key in self._objects and not self._objects[key].deleted:
                obj = copy.deepcopy(self._objects[key].raw)
                obj.setdefault("metadata", {})["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                self._objects[key].create(obj)
                return aiohttp.web.json_response(obj, status=200)
        content_type = request.headers.get("Content-Type", "")
        if request.method.value.upper() == "PATCH" and content_type.startswith(APPLY):
            return await self._apply(request)
        return await super()._handle(request)

    async def _apply(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        applied = json.loads(request.body)
        params = request.params
        manager = params.get("fieldManager")
        if not manager:
            raise kmock.KubernetesError(
                status=422, reason="Invalid", message="fieldManager is required for apply"
            )
        force = params.get("force") == "true"
        dry = params.get("dryRun") == "All"
        key = (request.resource, request.namespace, request.name)
        self.applies.append(
            {
                "plural": request.resource.plural,
                "namespace": request.namespace,
                "name": request.name,
                "manager": manager,
                "force": force,
                "dry_run": dry,
                "content_type": request.headers.get("Content-Type"),
                "body": applied,
            }
        )
        async with self._lock:
            exists = key in self._objects and not self._objects[key].deleted
            current = copy.deepcopy(self._objects[key].raw) if exists else {}
            meta = current.get("metadata") or {}
            others = [
                m.get("manager")
                for m in meta.get("managedFields") or []
                if m.get("manager") != manager
            ]
            if exists and others and not force:
                for path, value in _leaves({k: v for k, v in applied.items() if k != "metadata"}):
                    old = _get(current, path)
                    if old is not _MISSING and old != value:
                        raise kmock.KubernetesError(
                            status=409,
                            reason="Conflict",
                            message=f'Apply failed with 1 conflict: conflict with "{others[0]}": '
                            f".{'.'.join(path)}",
                        )
            merged = _merge(current, applied)
            merged_meta = merged.setdefault("metadata", {})
            merged_meta["managedFields"] = [
                *[m for m in meta.get("managedFields") or [] if m.get("manager") != manager],
                {"manager": manager, "operation": "Apply"},
            ]
            merged_meta["namespace"] = request.namespace
            merged_meta.pop("resourceVersion", None)
            merged_meta.pop("generation", None)
            before = copy.deepcopy(current)
            (before.get("metadata") or {}).pop("resourceVersion", None)
            (before.get("metadata") or {}).pop("generation", None)
            if request.namespace is None:
                merged_meta.pop("namespace", None)
            changed = merged != before
            generation = int(meta.get("generation", 0))
            if changed:
                self.version += 1
                merged_meta["resourceVersion"] = str(self.version)
                spec_changed = merged.get("spec") != current.get("spec")
                merged_meta["generation"] = generation + 1 if spec_changed else max(generation, 1)
                merged_meta.setdefault("uid", f"uid-{self.version}")
            else:
                merged_meta["resourceVersion"] = meta.get("resourceVersion")
                merged_meta["generation"] = generation
            if changed and not dry and self.complete_jobs and request.resource.plural == "jobs":
                merged["status"] = {
                    "succeeded": 1,
                    "conditions": [{"type": "Complete", "status": "True"}],
                }
            workload = request.resource.plural in ("jobs", "deployments", "statefulsets")
            if changed and not dry and not exists and workload and self.spawn_bound_pods_on:
                spec = merged.get("spec") or {}
                count = int(spec.get("parallelism") or spec.get("replicas") or 1)
                template = spec.get("template") or {}
                for i in range(count):
                    pod_name = f"{request.name}-{i}"
                    pod = {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": pod_name,
                            "namespace": request.namespace,
                            "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                        },
                        "spec": {
                            **(template.get("spec") or {}),
                            "nodeName": self.spawn_bound_pods_on,
                        },
                        "status": {
                            "phase": "Running",
                            "conditions": [
                                {"type": "PodScheduled", "status": "True"},
                                {"type": "Ready", "status": str(self.ready_workloads)},
                            ],
                        },
                    }
                    self._objects[(kmock.resource("v1/pods"), request.namespace, pod_name)] = pod
                if self.ready_workloads and request.resource.plural != "jobs":
                    merged["status"] = {"replicas": count, "readyReplicas": count}
            if changed and not dry:
                if exists:
                    self._objects[key].create(merged)  # a new version, whole
                else:
                    self._objects[key] = merged
                event = "MODIFIED" if exists else "ADDED"
                await self._buses[request.resource].put({"type": event, "object": merged})
        return aiohttp.web.json_response(merged, status=200 if exists else 201)


class FakeKube:
    """A :class:`FakeKubeHandler` served on 127.0.0.1 from a thread; ``url`` is its address."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.handler: FakeKubeHandler | None = None
        self.url = ""
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fake-kube", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with FakeKubeHandler() as handler, kmock.Server(handler) as server:
            self.handler = handler
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def start(self) -> FakeKube:
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None or self.handler is None:
            raise RuntimeError(f"fake API server did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def call(self, fn: Callable[[FakeKubeHandler], Any]) -> Any:
        """``fn(handler)`` on the server's loop (safe while clients are talking to it)."""

        async def run() -> Any:
            assert self.handler is not None
            return fn(self.handler)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    # -- objects ----------------------------------------------------------------

    def put(self, resource: str, namespace: str | None, obj: dict[str, Any]) -> None:
        """Store ``obj`` (as the API server would hold it) under ``resource`` (``v1/pods``)."""
        name = obj["metadata"]["name"]
        if namespace is not None:
            obj["metadata"]["namespace"] = namespace

        def store(h: FakeKubeHandler) -> None:
            key = (kmock.resource(resource), namespace, name)
            if key in h.objects and not h.objects[key].deleted:
                h.objects[key].create(copy.deepcopy(obj))
            else:
                h.objects[key] = copy.deepcopy(obj)

        self.call(store)

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        def read(h: FakeKubeHandler) -> dict[str, Any] | None:
            key = (kmock.resource(resource), namespace, name)
            if key not in h.objects or h.objects[key].deleted:
                return None
            return copy.deepcopy(h.objects[key].raw)

        result: dict[str, Any] | None = self.call(read)
        return result

    def declare(self, *resources: str) -> None:
        """Make listings of ``resources`` answer (empty) before any object exists."""

        def add(h: FakeKubeHandler) -> None:
            for r in resources:
                h.resources[r] = {}

        self.call(add)

    def refuse(self, plural: str, status: int = 403, reason: str = "Forbidden") -> None:
        self.call(lambda h: h.refusals.__setitem__(plural, (status, reason)))

    def kubeconfig(self, path: Path, context: str = "fake") -> Path:
        """A kubeconfig file whose context ``context`` points at this server."""
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "ci", "user": {"token": "t0ken"}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "ci"}}],
            "current-context": context,
        }
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path
