"""History: each model's figures across runs, the conditions that changed, and the steps the samples support.

``build_series(db)`` (series.py) reads the store once into series per
campaign × model × cell; ``steps.py`` finds level changes in a series from
its samples; ``conditions.py`` says what each run measured under;
``render.py`` writes the trend pages.
"""

from .series import METRICS, build_series, campaign_settings  # noqa: F401
