"""The path of a run on the command line: ``run`` and ``watch``, following
and rendering its events, ``chat``, ``send`` and ``steer``."""
