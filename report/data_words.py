"""Words a page translates that arrive as data: statuses, outcomes, units, prompt classes, stages.

The code stores and compares these words ("completed", "fits", "short"), so
marking them where they are used would mark comparisons; they are marked here
once for the catalogue (``python scripts/catalogue.py``), and a page says them
with ``_(word)`` / ``Lang.gettext(word)``. A word a row may carry that a page
shows translated belongs in this list.
"""

from cardproof.marks import N_

WORDS = (
    N_("already_loaded"),
    N_("chars"),
    N_("code"),
    N_("completed"),
    N_("confirmed"),
    N_("contradicted"),
    N_("cores"),
    N_("crash"),
    N_("CUDA"),
    N_("explicit"),
    N_("fail"),
    N_("failed"),
    N_("fastest"),
    N_("fit"),
    N_("fits"),
    N_("host"),
    N_("interrupted"),
    N_("loaded"),
    N_("long"),
    N_("measured"),
    N_("medium"),
    N_("ms"),
    N_("not_fired"),
    N_("not_run"),
    N_("pass"),
    N_("planned"),
    N_("prompt"),
    N_("quality"),
    N_("quantisation"),
    N_("recorded"),
    N_("refuted"),
    N_("running"),
    N_("s"),
    N_("short"),
    N_("size_vram"),
    N_("stale"),
    N_("timeout"),
    N_("tokens"),
    N_("took"),
    N_("TTFT"),
    N_("undecided"),
    N_("unverified"),
)
