"""Placement: where a flow's pods go on a cluster, and whether kube-scheduler puts them there.

Subpackages and modules load on first import, not here: :mod:`vfcore.placement.scheduler`
(the kube-scheduler model and its remedy) pulls in nothing heavy, but importing
this package must stay cheap for ``vf explain``.
"""

__all__: list[str] = []
