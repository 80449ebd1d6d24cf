"""vfadapters: the I/O around vfcore — the `vf` CLI, flow loading, and (later) executors."""
