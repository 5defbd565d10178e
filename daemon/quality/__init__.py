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
"""
