"""`vf` subcommands that live in their own modules.

Each module defines ``register(subparsers)``, which adds its subparser and sets
``handler`` to a function ``(argparse.Namespace) -> int`` (the exit code).
Bad input is raised as :class:`vfcore.InvalidInputError` or
:class:`vfcore.InvalidFlowError`; ``vfadapters.cli.main`` prints it. Modules
import heavy libraries inside their handlers, never at import time.
"""
