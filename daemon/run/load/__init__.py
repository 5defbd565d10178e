"""Load and context axes of a run: concurrency steps (``[load]``) and context-depth steps (``[depth]``).

In short, ``load/``: concurrency steps (``[load] streams``) and context-depth steps
(``[depth] tokens``): stream threads only send (``sampling.send``), one writer thread stores
(``sampling.store_sent``); tables ``load_steps`` and ``load_samples`` (m015); percentiles are
computed from stored rows when read (``store/stats.py``), never stored; service level and knee in
``campaign/slo.py``, shared by the pass rules (``load.max_streams_at_slo``, ``load.knee_streams``,
``load.max_rate_at_slo``, ``load.knee_rate``) and the article. Poisson rate steps (``[load]
rates``): ``load/arrivals.py`` (a seeded schedule, known when the campaign is read) and
``load/rate.py`` (a sending thread per request, the main thread the only writer); rate steps are
``load_steps.axis = 'rate'``, each request stores ``scheduled_s``, ``sent_s``, ``in_flight`` (m021).
The fit test (``[fit] contexts``): ``load/fit_settings.py`` (the table), ``fit_server.py`` (a
llama-server of cardproof's own per context, ``-c N --parallel 1 -ngl 999 --fit off``),
``logs/fit_evidence.py`` (the load's log → verdict, ``fit.max_context``), ``fit.py`` (runs and stores
``fit_checks``, m020)
"""
