"""``python -m ovos_memory_plugins.cli``: the ``ovos-memory`` command."""

from ovos_memory_plugins.cli import run

run()
