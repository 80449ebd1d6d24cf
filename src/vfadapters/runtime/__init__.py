"""The node runtime and the run machinery both transports share.

One :class:`~vfadapters.runtime.worker.Worker` runs every replica of every
node, over declared ports (:mod:`vfadapters.runtime.ports`) that the
shared-memory transport (:mod:`vfadapters.local`) and the NATS JetStream
transport (:mod:`vfadapters.broker`) implement; one
:class:`~vfadapters.runtime.supervisor.Supervisor` starts, restarts and stops
the replicas of ``vf run`` and ``vf run --broker``; :mod:`~vfadapters.runtime.progress`
and :mod:`~vfadapters.runtime.summary` observe and report either kind of run.
"""
