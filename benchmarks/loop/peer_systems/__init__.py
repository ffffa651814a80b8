"""The other frameworks ``benchmarks.loop.peers`` measures, one module each.

Each imports its framework at import time, so ``benchmarks.loop.peers`` imports a
module only to measure it, and skips the framework when the import fails
(``pip install -e ".[peers]"`` installs them). Their workflows live here, in
importable modules, because Temporal's workflow sandbox re-imports them.
"""
