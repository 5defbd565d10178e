"""``[quality]``: what a quantisation or a KV-cache type costs in answers, beside what it gains in speed.

For a ladder (models of one base model at several quantisations, grouped as
the report's ladder finding groups them: the GGUF header's base name, the
same architecture, parameter count and tokenizer) and for KV-type variants,
cardproof runs ``llama-perplexity`` over a fixed text that ships with it
(``text.py``): once with ``--kl-divergence-base`` on the ladder's
highest-precision member (its logits, kept in a temporary file and deleted
after), then with ``--kl-divergence`` on every other member and variant. The
tool's own output lines are stored as each process's log (``log_lines``) and
every figure (mean KL divergence with its uncertainty, its 99th percentile,
the share of positions whose top token is the same, perplexity with its
error) is stored as a fact citing its line, and in ``quality_checks``
(``run.py``); ``parse.py`` reads the lines, ``plan.py`` decides who is
compared with whom and who is refused (another tokenizer, no file here).

In short, ``quality/``: ``[quality]``: what a quantisation or a KV-cache type costs
in answers. ``campaign/tables/quality.py`` (the table; its checks against ``[[models]]`` and ``[variants]``; a
context and chunk count no tokenizer could fill from the shipped text, more than one token per byte,
refused when the campaign is read), ``text.py`` (the shipped text, ``alice.txt``, public domain,
SHA-256 checked before every use, never downloaded), ``plan.py`` (a pure function: the models
grouped into ladders by the GGUF header's base name, as the report's ladder finding groups them, the
base the member of most bits per weight; a member of another tokenizer, architecture or parameter
count, or without its file here, refused with the reason), ``parse.py`` (a pure function:
``llama-perplexity``'s own lines → figures, each with its line id; this build's timestamped lines,
older builds' doubled 99th percentile, ``±`` and ``+/-``), ``run.py`` (the participants' step, after
the variants whose models it reads: the base's logits once into a temporary folder beside the store,
deleted after; each member and variant with ``--kl-divergence``; each process a load with ``trigger
= 'quality'`` whose output lines are its ``log_lines`` (attributed by process identity, as the fit
test's), each figure a fact citing its line, and a ``quality_checks`` row (m030) with the figures
and ``evidence_json``, figure → line; llama-perplexity exits 0 on most refusals, so its words
decide), ``figures.py`` (what the pass rules read: ``quality.kld_mean``, ``quality.kld_p99``,
``quality.same_top``, ``quality.ppl_ratio``; none for the base, the reference). A quality load is no
serving load: the rules' load facts and the memory section leave it out
"""
