"""DRA: GPU claims planned on ResourceSlices, and kube-scheduler 1.36's allocator predicted.

``--gpu-mode dra`` gives each GPU pod a ResourceClaim (Kubernetes Dynamic
Resource Allocation, ``resource.k8s.io/v1``) instead of an extended resource;
the scheduler's structured allocator picks its devices. This package, one
concept a module (``docs/dra.md`` has the whole story):

- :mod:`.cel`: the CEL subset selectors are evaluated in (anything else is
  refused by name);
- :mod:`.inventory`: the cluster's devices compiled per node into *blocks* (the
  units the allocator's order cannot split), per request which device each
  accepts, counters left, devices taken — unknown facts bracketed;
- :mod:`.allocator`: the allocator's first-solution search, and every outcome
  the order of a node's slices allows;
- :mod:`.planning`: the exact plan (devices and counters as capacity, CP-SAT)
  with its independent checker;
- :mod:`.planner`: ``dra`` mode behind :class:`~vfcore.placement.planners.ModePlanner`;
- :mod:`.nvidia`: the ResourceSlices and DeviceClasses NVIDIA's DRA driver
  publishes (whole GPUs, DynamicMIG), from the MIG catalogue.

The scheduler model's filter is :mod:`vfcore.placement.scheduler.dynamic_resources`.
Like :mod:`vfcore.placement`, this package exports nothing itself: import the
modules by their paths (the planner loads OR-Tools on first use).
"""

__all__: list[str] = []
