"""History: each model's figures across runs, the conditions that changed, and the steps the samples support.

``build_series(db)`` (series.py) reads the store once into series per
campaign × model × cell; ``steps.py`` finds level changes in a series from
its samples; ``conditions.py`` says what each run measured under;
``render.py`` writes the trend pages.

In short, ``history/``: trend pages and ``cardproof history``: ``series.py``
(whole-store queries → one point per run and cell, with its state: usable, interrupted, unstable, no
valid sample), ``conditions.py`` (build, backend, cardproof version, CPU, GPUs, driver, the
machine's load, the frozen campaign's settings, quantisation, file digest, load facts; unknown is no
change. **Why settings, not the file's hash**: the demo writes its servers' ephemeral ports and its
log file's path into the campaign, so two runs of one campaign had "different conditions" by hash
alone; the frozen text is read by ``parse_campaign`` (an older text it refuses by its TOML tables, a
key kept in ``[server]`` masked) into one condition per key, ``setting:campaign.max_tokens``, a
URL's port as ``port:…``, a file's place as ``path:…``, the API key's variable as ``aside:…``.
``differences(before, after)`` is the one comparison of two runs' conditions, for the compare page,
the run article, ``cardproof compare`` and the trend pages: each ``Difference`` (a 3-tuple, name,
before, after) says by its name whether it can move a figure (``moves``); the machine's 1-minute
load average differs only by a whole busy CPU or more (``LOAD_DIFFERENCE``). ``describe`` says one
in a page's language, ``plain`` in the terminal), a point's ``changes`` are those that can move a
figure (the chart's rules, the table's mark, the steps' "changed between them") and its ``aside``
the rest, listed on the page's "What changed" in small print; ``steps.py`` (CUSUM candidates by
binary segmentation, each judged by a fixed-seed hierarchical bootstrap of the samples of up to 6
runs a side; a step needs the interval to exclude no change, ``[report] min_effect_pct``, two runs a
side and a change beyond the series' own run-to-run noise), ``render.py`` / ``chart.py`` /
``svg.py`` / ``numbers.py`` / ``tables.py`` / ``llama_bench.py`` (pages; charts drawn as SVG
directly and figures formatted without Altair or Babel per value; CSV; per-page fingerprints in
``site/trends/.trends.json``; ``render.Trends`` renders one page at a time and then the index),
``pages.py`` (the report build's trend pass: a page's series made, rendered and kept one at a time,
with its cache file, JSON through ``cache_json.py``). Cells are prompt classes and reasoning, load
streams, offered request rates and context depths (``KIND_METRICS``); a cell with more than 400 runs
charts the latest 200 as they are and groups older ones
"""

from .series import METRICS, build_series, campaign_settings  # noqa: F401
