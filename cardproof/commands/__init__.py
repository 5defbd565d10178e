"""Command modules: each ``cardproof/commands/<name>.py`` defines ``register(cli)``.

``cardproof/cli.py`` lists and registers them; shared options (``--db``,
``--run``, ``--project``, ``--config``), ``open_db``/``open_run`` and ``fail``
live in ``common.py``.
"""
