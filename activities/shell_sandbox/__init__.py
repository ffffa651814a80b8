"""The shell sandbox: how ``shell_command`` confines a command (bubblewrap,
Landlock, limits), and the in-sandbox starter it runs as ``python -m``.

Not the workflow sandbox of ``workflows/``. Tool code: never imports the providers.
"""
