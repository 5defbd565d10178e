"""Hostile content for the report: payloads, and a filler that puts them into every text column.

A merged or old database may hold anything in any text column. ``fill``
overwrites the text columns of every row of every table of a real database
with payloads (script, event handlers, Markdown and Jinja syntax, control
characters, a 1 MB string, credentials, client addresses) while keeping the
rows usable:

* ids and numeric columns are not text and stay;
* JSON columns keep their shape: every string inside is replaced by a
  payload, so readers still find objects and arrays;
* ``runs.started_at`` stays: runs are ordered and compared by it (every
  other timestamp gets a payload; the page shows such text as it is);
* the row-selecting vocabulary (``samples.kind``, ``cells.kind``) stays, and
  ``runs.status`` stays where ``keep_status`` says, so the articles still
  have measurements and a comparison to render;
* ``samples.error_kind`` and ``gate_results.gate`` get payloads on every
  other row only, so that cells keep some medians;
* ``campaigns.toml_text`` becomes the campaign file carrying payloads in
  comments, a login in its URL and an ``api_key`` under ``[server]`` (as an
  older cardproof froze it: the report must still read its gates).

Every payload that would execute sets ``window.__pwned`` or carries a
``data-pwn`` attribute; every Markdown injection carries a marker (MDH
heading, MDL list, MDB bold, MDK link, MDA admonition, MDT table, MDI
image) that must never become that element.
"""

from __future__ import annotations

import json
import sqlite3

# Addresses and credentials that must never be published in full.
CLIENT_V4 = "192.168.77.13"
CLIENT_V6 = "2a02:8108:4c0:77::13"
SERVER_V4 = "10.20.30.40"
PASSWORD = "hunter2pw"
API_KEY = "sk-live-abcdefghijklmnop1234"
SECRETS = (CLIENT_V4, "4c0:77::13", "2a02:8108:04c0:0077", SERVER_V4, PASSWORD, API_KEY)

PAYLOADS = [
    '<script>window.__pwned="script"</script>',
    '<img src=x data-pwn onerror="window.__pwned=\'img\'">',
    '"><svg data-pwn onload="window.__pwned=\'svg\'">',
    "'><iframe data-pwn src=\"javascript:parent.__pwned='iframe'\"></iframe>",
    "[MDK link](javascript:window.__pwned='link')",
    "![MDI](x\" onerror=\"window.__pwned='mdimg')",
    "SSTI{{ 7*7 }} {% raw %}x{% endraw %} {# c #} ${7*7}",
    '!!! note "MDA"\n    admonition body',
    "| MDT | cell |\n|---|---|\n| MDT | x |",
    "``` `code` ```` <b data-pwn>x</b>\n```\n</details><script>window.__pwned='fence'</script>",
    "\n# MDH heading\n- MDL item\n1. MDL item\n=====",
    "ctl\x00\x01\x02wzxhzdk:0\x03\x1b[31mred\x1b[0m\x7f\u202eevil\u2028\x85end\r\nx",
    "**MDB** __MDB__ _MDB_ <b data-pwn>MDB</b>",
    "&lt;script&gt;window.__pwned=1&lt;/script&gt; &#60;img data-pwn src=x onerror=window.__pwned=2&#62;",
    f"srv  log_server_r: request: POST /v1/chat/completions {CLIENT_V4} 200 from [{CLIENT_V6}]:51234",
    f"GET http://admin:{PASSWORD}@{SERVER_V4}:8080/v1/models Authorization: Bearer {API_KEY} api_key={API_KEY}",
    "<a href=\"javascript:window.__pwned='a'\" data-pwn>MDK2</a>",
    "{: onclick=\"window.__pwned='attr'\" } {#pwnid} [TOC]",
    "<style data-pwn>body{display:none}</style><details data-pwn open ontoggle=\"window.__pwned='details'\">",
    "??? note \"MDA\"\n~~~\n<!-- unclosed comment",
]
BIG = "A" * (1 << 20)  # 1 MB
# A few columns get the 1 MB string (in one row each): enough to prove size is handled.
BIG_COLUMNS = {("log_lines", "raw"), ("samples", "error_text"), ("loads", "error_text")}

_KEEP = {("samples", "kind"), ("cells", "kind"), ("runs", "status")}
_HALF = {("samples", "error_kind"), ("gate_results", "gate")}
_SAME_FOR_ALL_ROWS = {("campaigns", "name"), ("cells", "prompt_class")}
_KEPT_TIMES = {("runs", "started_at")}


def payload(table: str, column: str, rowid: int) -> str:
    """The payload for one cell: varies by column and row, the same for the same cell."""
    k = sum(map(ord, f"{table}.{column}"))
    if (table, column) not in _SAME_FOR_ALL_ROWS:
        k += rowid
    return PAYLOADS[k % len(PAYLOADS)]


def _json_payloads(text: str, table: str, column: str, rowid: int):
    """The JSON document with every string inside replaced by a payload (shape kept)."""
    counter = [0]

    def walk(v):
        if isinstance(v, str):
            counter[0] += 1
            return payload(table, column, rowid + counter[0])
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    try:
        return json.dumps(walk(json.loads(text)))
    except (TypeError, ValueError):
        return text


def hostile_campaign(text: str) -> str:
    """A campaign file that still parses, carrying payloads in comments and a credential-bearing URL."""
    lines = [f"# {p}" for p in PAYLOADS if "\n" not in p and "\x00" not in p and "\x1b" not in p]
    lines += ["# ```", "# ````", f'# api_key = "{API_KEY}"', "# {% raw %} {{ 7*7 }}"]
    out = []
    for line in text.split("\n"):
        if line.startswith("url = "):
            # the login goes into the frozen text, the way a user might have written it, and an API key
            # the way an older cardproof froze it (the file no longer validates as a whole)
            line = line.replace("http://", f"http://admin:{PASSWORD}@", 1) + f'\napi_key = "{API_KEY}"'
        out.append(line)
    return "\n".join(lines + out + ["# " + "```" * 3, "# </details><script>window.__pwned='toml'</script>"])


def fill(db_path, *, keep_status: set[int] = frozenset()) -> dict[str, int]:
    """Overwrite every text column of every row (see the module docstring). Returns cells written per table."""
    conn = sqlite3.connect(db_path)
    written: dict[str, int] = {}
    tables = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table' "
                                         "and name not like 'sqlite_%' and name not like '\\_%' escape '\\'")]
    big_done = set()
    for table in tables:
        cols = [(c[1], (c[2] or "").upper()) for c in conn.execute(f'pragma table_info("{table}")')]
        text_cols = [name for name, decl in cols if decl == "TEXT"]
        for (rowid,) in conn.execute(f'select rowid from "{table}"').fetchall():
            values = {}
            for col in text_cols:
                key = (table, col)
                if key in _KEEP and not (key == ("runs", "status") and rowid not in keep_status):
                    continue
                if key in _KEPT_TIMES:
                    continue
                if key in _HALF and rowid % 2 == 0:
                    continue
                if col.endswith("_json") or key in (("capabilities", "json"), ("campaigns", "toml_text")):
                    old = conn.execute(f'select "{col}" from "{table}" where rowid = ?', [rowid]).fetchone()[0]
                    if old and key == ("campaigns", "toml_text"):
                        values[col] = hostile_campaign(old)
                    elif old:
                        values[col] = _json_payloads(old, table, col, rowid)
                    continue
                value = payload(table, col, rowid)
                if key in BIG_COLUMNS and key not in big_done:
                    value, _ = BIG, big_done.add(key)
                if (table, col) == ("models", "name"):
                    value = f"{value} m{rowid}"  # (name, digest) is unique
                if (table, col) == ("row_changes", "tbl"):
                    value = f"{value} r{rowid}"  # (tbl, bucket) is unique
                values[col] = value
            if values:
                sets = ", ".join(f'"{c}" = ?' for c in values)
                conn.execute(f'update "{table}" set {sets} where rowid = ?', [*values.values(), rowid])
                written[table] = written.get(table, 0) + len(values)
    conn.commit()
    conn.close()
    return written
