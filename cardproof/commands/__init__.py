"""Command modules: each ``cardproof/commands/<name>.py`` defines its click commands at module level
and lists the top-level ones in ``COMMANDS``.

``cardproof/cli.py`` adds them to the ``cardproof`` group. A command can be
imported and invoked on its own (``CliRunner().invoke(gates.gates_cmd, [...])``).
Shared options (``--db``, ``--run``, ``--project``, ``--config``),
``open_db``/``open_run`` and ``fail`` live in ``common.py``.
"""
