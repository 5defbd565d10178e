"""Server variants: each model also loaded with other server arguments, measured on the same cells.

In short, ``variants/``: server variants (``[variants]``): ``campaign/tables/variants.py`` (the
table: named argument sets, axes crossed into variants named ``t1_kvq8_0``, every set's and axis's
arguments through ``check_args``, the backend checks: Ollama takes
``num_thread``/``num_batch``/``num_gpu``/``num_ctx``, the rest and ``openai`` are refused with the
reason), ``campaign/variant_args.py`` (one table of the options cardproof reads: their spellings, the log fact that
proves each, the range of an int value, Ollama's option; merging a variant over the base's
arguments, preset keys; the allow-list of a variant's arguments, below), ``servers.py`` (where a
variant loads: against a router, a router of cardproof's own on a preset written for the run, each
section the base's as the router lists it under ``GET /models`` less what the variant sets, nothing
at router level since the router's own arguments win over a section's; against a single server, a
llama-server of cardproof's own per variant with the running server's command line from ``/proc``,
as the fit test starts its own), ``swap.py`` (llama-swap: a config for the run, each variant the
base's entry with its arguments merged into the ``cmd``, served by a llama-swap of cardproof's own),
``ollama.py`` (the model's own name on the wire, the variant's options on every request),
``evidence.py`` (each argument against its load's lines: took, contradicted, not shown, not checked;
a command line echoed into the log is no evidence; each build's spelling of an argument read as the
same claim: bare ``-fa``, ``-ngl auto``/``all``, ``-ot`` by first matching rule, any host buffer for
a CPU override), ``run.py`` (after the campaign's cells, before the fit test; the verdicts after the
run's logs are in). **Why a variant is a model of its own** (``base~name``, a ``models`` row with
its base's file identity, and a ``variants`` row, m024, tying it to its base): a cell, a sample, a
gate, a median, a rule's value and a history series all belong to a model, so the cell loop
(``runner._variant_cells`` → ``_measure_cell``, which the variants participant is handed), the
gates, the memory capture and ``cardproof history`` treat a variant unchanged and honestly as its
own measured unit; a ``variant`` column on loads and cells would have had every query that groups by
model group by model and variant too. The report keeps variant models out of the headline and the
main table (``report/queries.py``) and shows them in the Variants section (``report/variants.py``);
rules and expectations read them from their base as ``variant.<name>.*``
(``rules/outcome.variant_values``). **Why variant arguments are an allow-list** (``args.SETTINGS``:
threads, batch threads, batch and ubatch sizes, KV cache types, flash attention, GPU layers,
CPU-kept experts, tensor overrides, context size, parallel slots): every other llama-server option
was passed to a server cardproof starts, and many read or write the machine's files (``--path /``
served ``/etc/hostname``, ``--log_file`` overwrote a file, ``--slot-save-path``,
``--chat-template-file``), reach the network (``-hfr``, ``--rpc``) or add tools (``--tools all``),
and ``--api-key`` locked cardproof out of its own variant server; a deny-list missed the spellings
llama-server reads alike (common/arg.cpp turns a ``--`` flag's ``_`` into ``-``). So ``check_args``
reads each flag as llama-server does (``args.canonical``, ``--flag=value`` split), refuses any flag
off the table with the reason (``args.refusal``: set by cardproof, moves the evidence log, locks
cardproof out, or not a provable tuning argument), checks each value (a whole number in the
setting's range, so llama-server's ``-1 = auto`` is refused; KV types; on/off/auto; ``-ot
PATTERN=BUFFER`` with a pattern Python compiles) and a setting given twice, and returns the
arguments in the form llama-server and a router preset take (dashes, flag and value apart): one
``CampaignError`` line (exit 2, nothing stored) for ``cardproof run``, ``register``, ``queue add``,
and the daemon worker, which parses a queued campaign's text again with ``parse_campaign``
"""
