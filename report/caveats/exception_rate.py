"""A cell lost to exceptions at a reproducible rate is a finding, not noise."""

from __future__ import annotations

from cardproof.marks import N_
from .base import Caveat, CaveatRule

TITLE = N_('Reproducible failure')
# one sentence for any two counts ("{failed} of {total}" after a colon): no plural to agree with
TEXT = N_('{model} · {cls}: requests failed with the same error ({kind}: {text}): {failed} of {total}. '
          'That is reproducible, not a glitch; the cell has no number.')


def check(view: dict) -> list[Caveat]:
    out = []
    for c in view["cells"]:
        if any(s["error_kind"] == "refused" for s in c["errors"]):
            continue  # no request was sent: load_refused says why
        n_err, n = len(c["errors"]), len(c["samples"])
        texts = {(s["error_kind"], (s["error_text"] or "")[:120]) for s in c["errors"]}
        if n_err >= 2 and n_err / n >= 0.5 and len(texts) == 1:
            kind, text = next(iter(texts))
            out.append(
                Caveat(
                    "exception_rate",
                    "danger",
                    TITLE,
                    TEXT,
                    {"model": c["model"], "cls": c["prompt_class"], "failed": ("int", n_err), "total": ("int", n),
                     "kind": ("code", kind), "text": ("quoted", text)},
                    (c["id"],),
                )
            )
    return out


RULE = CaveatRule('exception_rate', check, order=60)
