"""Drawing a chart spec to SVG with vl-convert: all a chart worker process imports.

``report/charts.py`` sends the specs here, to worker processes that start
while the rest of the report is still being written. This module imports
vl-convert alone (no Altair, no report code), so a worker is ready in a
fraction of a second; vl-convert's own first chart in a process costs
about half a second more (its engine starting), also off the main process.

In short, ``charts.py``, ``chart_draw.py``: Altair charts rendered offline to SVG, each
with its data table. Inside ``charts.deferred()`` (the report build) the specs go to worker
processes (``python -m cardproof.report.chart_draw``, vl-convert only) as they are made, so the
charts are drawn on other cores while the rest of the report is written; a chart a worker could not
draw is drawn in the build's own process at the block's end. The charts drawn for every run (decode,
load, context) are built as plain Vega-Lite dicts, not Altair objects: Altair spent about 60 ms
copying its objects for each, most of an article's build.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import vl_convert


def render(spec: str, locale: str) -> str:
    # axis numbers in the page's locale too (1.000,5 in German)
    svg = vl_convert.vegalite_to_svg(spec, vl_version="5.20", format_locale=locale)
    return accessible(svg, json.loads(spec).get("description"))


#: the roles and labels Vega gives its groups, marks and guides, in English ("group mark container")
_ARIA = re.compile(r'\s(?:aria-[a-z]+|role)="[^"]*"')


def accessible(svg: str, description: str | None) -> str:
    """The SVG as one image named by ``description`` (the spec's, in the page's language): Vega's own
    English roles and labels of its parts are taken out, the root gets ``role="img"``, the description
    as its ``aria-label`` and as its ``<title>``, which a browser also shows on hover."""
    if not description:
        return svg
    svg = _ARIA.sub("", svg)
    end = svg.index(">", svg.index("<svg")) + 1
    head = svg[:end - 1] + f' role="img" aria-label={quoteattr(description)}>'
    return head + f"<title>{escape(description)}</title>" + svg[end:]


def render_to(job: tuple[str, str, str, str]) -> str:
    """Draw ``(path, spec, locale, mark)``: the SVG, then the mark as its last line (charts._spec_mark)."""
    path, spec, locale, mark = job
    Path(path).write_text(render(spec, locale).rstrip("\n") + "\n" + mark)
    return path


def main() -> None:
    """A chart worker (``python -m cardproof.report.chart_draw``): one job per line of standard input as a
    JSON list ``[path, spec, locale, mark]``; one line out per job: ``["ok", path]`` or
    ``["error", path, message]``. Ends when its input does."""
    import sys

    for line in sys.stdin:
        try:
            job = json.loads(line)
            render_to(tuple(job))
            out = ["ok", job[0]]
        except Exception as exc:  # noqa: BLE001 -- told to the report process, which draws it itself
            out = ["error", job[0] if isinstance(job, list) and job else None, f"{type(exc).__name__}: {exc}"]
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
