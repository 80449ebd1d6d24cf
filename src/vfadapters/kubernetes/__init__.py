"""The Kubernetes adapter: the live cluster as a snapshot, apply, wait, status, teardown.

Everything here talks to a Kubernetes API server through the official
``kubernetes`` client (install ``vfcore[kubernetes]``); vfcore stays pure and
never imports it. One module per job:

- :mod:`.client`: connecting (``--context`` / ``--kubeconfig`` / in-cluster) and one
  raw JSON request, with errors that carry a stable id (:class:`.client.KubeApiError`);
- :mod:`.snapshot`: nodes, pods and RuntimeClasses read into the same
  :class:`~vfcore.ClusterSnapshot` the kubectl dumps give (a refused pod listing is
  *unknown*, never idle);
- :mod:`.apply`: server-side apply (field manager ``vf``) in dependency order;
- :mod:`.wait`: the wait loop (Jobs complete / pods Ready; unschedulable and
  fatal container states abort with the cluster's own words);
- :mod:`.status` and :mod:`.teardown`: what a run has, and deleting exactly it;
- :mod:`.deploy`: preflight (plan on the live snapshot) + apply + wait.

Nothing is imported at package import time, so ``vf --help`` stays fast.
"""
