"""What a reader downloads beside the articles: each run's samples (CSV, JSON) and the database.

A reader re-derives every figure of an article from these files: a run's
samples with their cell (model, prompt class, reasoning), their counters and
rates, the gates that fired on them and those that excluded them from the
medians. The database is the whole store, made publishable the way pages
are: credentials removed and client addresses masked in every text value
(``report.privacy.public_text``), campaign texts redacted
(``daemon.redact.redact_campaign_text``), made from the store's ``VACUUM INTO``
(none of its free pages) with ``secure_delete`` on, so no replaced text
survives in the file. After one new run only the rows that changed are masked
again (:func:`public_database`).

Files: ``site/runs/run-N-samples.csv|json`` and ``site/downloads/cardproof.db``;
the evidence page of each run gets a *Downloads* section linking them
(:func:`link_downloads`, in each page's language).

In short, ``exports.py``, ``feed.py``, ``site_settings.py``: per-run samples as CSV and JSON
beside each evidence page and ``downloads/cardproof.db`` (masked like the pages, with
``secure_delete``; made again only when the store's files changed. The last copy is brought up to
date in place, in one transaction: only rows that differ from it, or were masked in it, are masked
and written again, and rows gone from the store are looked for only where the row counts say so;
recorded in ``site/.cardproof-database.json``. Where the store keeps change counts (``row_changes``,
migration m022: triggers count each updated or deleted row by table and bucket of 4,096 rowids),
only the rows above each table's last highest id and the buckets whose counts moved are compared,
and every ``FULL_EVERY``-th (30th) update compares every row (a row replaced by a writer without
recursive triggers is counted by no trigger); ``row_changes`` itself is published empty. A first
copy, another schema or a copy a quarter free pages is made whole from the store's ``VACUUM INTO``);
the RSS/JSON feed (mkdocs-rss-plugin, only with ``--site-url``, which is refused with a space,
quote, ``&``, ``<`` or ``>`` in it, as MkDocs prints it into attributes unescaped; without a feed
the site's hooks take the disabled plugin out of ``config.plugins``, so no page links a feed file
that is never written; with one they write it through ``scaffold/feed_rss.xml``, every value
escaped, titled in the default language); the site title and description from the project's
``site.toml``, handed to mkdocs.yml's ``!ENV`` as HTML text (a value YAML would read as a number,
truth or null gets its first character as a character reference), which the hooks give the theme as
``Markup``, escaped once (Material prints the name unescaped in ``<title>`` and ``aria-label`` and
escaped in ``title``), and the feed as plain text
"""

from __future__ import annotations

import io
import json
import math
import re
import sqlite3
from pathlib import Path

from cardproof.daemon.store.redact import redact_campaign_text

from . import csvsafe
from .gates import excluded_samples
from .i18n import LANGUAGES, Lang
from .privacy import public_text, source_name
from cardproof.daemon.store.migrations import ROW_CHANGE_BITS, salted_tables
from cardproof.daemon.store.file import connect_readonly

DATABASE_NAME = "cardproof.db"
#: tables whose text is a campaign file: redacted as one (keys named like secrets, URLs' userinfo)
_CAMPAIGN_TEXT = {("campaigns", "toml_text"), ("registrations", "toml_text")}
_DOWNLOADS_MARK = '<span id="downloads"></span>'

SAMPLE_COLUMNS = (
    "sample_id", "run_id", "cell_id", "model", "prompt_class", "reasoning", "repetition", "nonce", "started_at",
    "prompt_tokens", "generated_tokens", "prompt_ms", "predicted_ms", "prefill_tps", "decode_tps", "ttft_ms",
    "wall_ms", "stop_reason", "answer_chars", "reasoning_chars", "draft_tokens", "draft_accepted",
    "cached_tokens", "counter_source", "error_kind", "error_text", "gates_fired", "excluded_by",
)


def run_samples(db, run_id: int, *, show_addresses: bool = False) -> list[dict]:
    """The measured samples of one run as published: one flat row each, texts made publishable."""
    excluded = excluded_samples(db, run_id)
    fired: dict[int, list[str]] = {}
    for r in db.execute(
            "select sample_id, gate from gate_results join samples on samples.id = sample_id "
            "where samples.run_id = ? and fired = 1 order by gate_results.id", [run_id]).fetchall():
        fired.setdefault(r[0], []).append(r[1])
    cur = db.execute(
        """select samples.*, models.name as model, cells.prompt_class, cells.reasoning
           from samples join cells on cells.id = samples.cell_id join models on models.id = cells.model_id
           where samples.run_id = ? and coalesce(samples.kind, 'measure') = 'measure' order by samples.id""",
        [run_id])
    names = [d[0] for d in cur.description]
    out = []
    for values in cur.fetchall():
        s = dict(zip(names, values))
        row = {k: s.get(k) for k in SAMPLE_COLUMNS}
        row["sample_id"] = s["id"]
        row["reasoning"] = None if s["reasoning"] is None else bool(s["reasoning"])
        row["gates_fired"] = fired.get(s["id"], [])
        row["excluded_by"] = excluded.get(s["id"], [])
        for k, v in row.items():
            if isinstance(v, list):  # the gates' names: text from a database like any other
                row[k] = [_public(x, show_addresses) for x in v]
            else:
                row[k] = _public(v, show_addresses)
        out.append(row)
    return out


def _public(v, show_addresses: bool):
    if isinstance(v, str):
        return public_text(v, show_addresses=show_addresses)
    if isinstance(v, bytes):  # a merged database may hold anything: shown as text
        return public_text(v.decode("utf-8", "replace"), show_addresses=show_addresses)
    return v


def samples_csv(rows: list[dict]) -> str:
    """``rows`` as CSV: lists joined with ``;``, no cell a spreadsheet would run as a formula (csvsafe.py)."""
    buf = io.StringIO()
    w = csvsafe.writer(buf, lineterminator="\n")
    w.writerow(SAMPLE_COLUMNS)
    for r in rows:
        w.writerow([r.get(k) for k in SAMPLE_COLUMNS])
    return buf.getvalue()


def samples_json(rows: list[dict], run_id: int) -> str:
    """``rows`` as one JSON document (non-finite numbers as their text: JSON has none)."""
    def clean(v):
        return str(v) if isinstance(v, float) and not math.isfinite(v) else v

    doc = {"run_id": run_id, "columns": list(SAMPLE_COLUMNS),
           "samples": [{k: clean(r.get(k)) for k in SAMPLE_COLUMNS} for r in rows]}
    return json.dumps(doc, ensure_ascii=False, indent=1, allow_nan=False)


def public_database(src: Path, dst: Path, *, show_addresses: bool = False, masked: set | None = None,
                    record: dict | None = None, seen: dict | None = None) -> bool:
    """A copy of the store at ``src`` fit to publish, written to ``dst``; False when ``dst`` already held it.

    Every text value is masked (:func:`_public_row`). Masking is done in Python, row by row: millions of
    log lines at a year of nightly runs. So when ``dst`` is the copy the last build made with the same
    masking, and ``masked`` names the rows that masking changed then (``{(table, rowid)}``), the copy is
    brought up to date in place (:func:`_update_in_place`): only rows that differ from it are masked
    and written again, in one transaction (a copy that comes out a quarter free pages is compacted).
    Otherwise (no or another copy, another schema, a copy already a quarter free pages) it is made whole
    from the store's ``VACUUM INTO``: a compact file, none of the store's free pages, where deleted text
    may linger, comes along. ``secure_delete`` zeroes
    every replaced value's bytes either way. ``record`` (a dict) gets ``masked`` (the rows masking
    changed in the copy now), ``incremental`` and ``changes`` (the store's change counts the copy is
    up to, ``_changes``); ``seen`` is that of the copy on disk: where the store keeps change counts
    (daemon/store/migrations.py m022), only rows above a table's last highest id and in buckets whose counts
    moved are compared, and every ``FULL_EVERY``-th update compares every row again.
    """
    if masked is not None and dst.exists():
        done = _update_in_place(src, dst, show_addresses, masked, seen)
        if done is not None:
            changed, now_masked, changes = done
            if record is not None:
                record.update(masked=now_masked, incremental=True, changes=changes)
            return changed
    tmp = dst.with_name(dst.name + ".tmp")
    tmp.unlink(missing_ok=True)
    source = connect_readonly(src)
    try:
        changes = _changes(source, None)  # before the copy: a write during it is compared next time
        source.execute("vacuum into ?", [str(tmp)])
    finally:
        source.close()
    target = sqlite3.connect(tmp)
    changed_rows: set = set()
    try:
        target.execute("pragma secure_delete = on")
        for table in _tables(target, "main"):
            if table in _UNPUBLISHED:
                target.execute(f"delete from main.{_quote(table)}")
                continue
            changed_rows |= {(table, rid) for rid in _publishable_table(target, table, show_addresses)}
        for table in _UNPUBLISHED:  # the masking's own updates were counted in the copy
            if table in _tables(target, "main"):
                target.execute(f"delete from main.{_quote(table)}")
        target.commit()
    finally:
        target.close()
    if record is not None:
        record.update(masked=changed_rows, incremental=False, changes=changes)
    if dst.exists() and _same_content(dst, tmp):
        tmp.unlink()
        return False
    tmp.replace(dst)
    return True


#: the store's own bookkeeping, published empty: the change counts of its rows (daemon/store/migrations.py m022)
#: count the masking's and the copy's own writes in a copy, so they would say nothing true there
_UNPUBLISHED = ("row_changes",)

#: every this many in-place updates, every row is compared again, whatever the change counts say (a row
#: replaced by ``insert or replace`` is counted by no trigger)
FULL_EVERY = 30


def _changes(conn: sqlite3.Connection, seen: dict | None) -> dict | None:
    """The store's change counts (``row_changes``, daemon/store/migrations.py m022) and each counted table's
    highest rowid, or None where the store keeps none; ``updates``: in-place updates since every row
    was last compared (from ``seen``, the record of the copy on disk)."""
    counted = sorted(salted_tables(conn))
    if not counted:
        return None
    # a bucket's count and salt: a store restored from a backup and edited reaches an old count, never
    # an old salt; a row replaced by ``insert or replace`` moves both (daemon/store/migrations.py follow_rows)
    buckets: dict[str, dict[str, list]] = {}
    for tbl, bucket, n, salt in conn.execute("select tbl, bucket, n, salt from main.row_changes"):
        buckets.setdefault(str(tbl), {})[str(bucket)] = [n, salt]
    top = {t: conn.execute(f"select max(rowid) from main.{_quote(t)}").fetchone()[0] or 0 for t in counted}
    updates = seen.get("updates", 0) + 1 if isinstance(seen, dict) and isinstance(seen.get("updates"), int) else 0
    return {"top": top, "buckets": {t: buckets.get(t, {}) for t in counted}, "updates": updates}


def _ranges(table: str, now: dict | None, seen: dict | None) -> list[tuple[int, int | None]] | None:
    """The rowid ranges of ``table`` that may differ from the copy (new rows, buckets whose counts moved),
    or None where every row is compared."""
    if not (now and isinstance(seen, dict) and table in now["top"] and now["updates"] < FULL_EVERY):
        return None
    try:
        top, before = int(seen["top"][table]), seen["buckets"][table]
        moved = {int(b) for b in set(before) | set(now["buckets"][table])
                 if before.get(b) != now["buckets"][table].get(b)}
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    bits = ROW_CHANGE_BITS
    return [(b << bits, ((b + 1) << bits) - 1) for b in sorted(moved)] + [(top + 1, None)]


def _update_in_place(src: Path, dst: Path, show_addresses: bool, masked: set,
                     seen: dict | None = None) -> tuple[bool, set, dict | None] | None:
    """Bring the last copy ``dst`` up to the store ``src``: (whether it changed, the rows masking changed
    in it now, the change counts it is up to), or None where it must be made whole.

    A row is written again when it is new, differs from the copy, or was changed by masking last time
    (its copy differs from the store by design); a row no longer in the store goes. The comparison
    runs inside SQLite (no GIL held), and nothing is written when nothing differs: a build after a
    write that changed no value leaves the file as it was. One transaction: a build stopped half-way
    leaves the last copy, and its changed time then makes the next build make it whole.
    """
    conn = connect_readonly(src)
    try:
        try:
            conn.execute("attach database ? as pub", [Path(dst).resolve().as_uri()])
            pages = conn.execute("pragma pub.page_count").fetchone()[0]
            free = conn.execute("pragma pub.freelist_count").fetchone()[0]
        except sqlite3.Error:
            return None  # not a database (a damaged download): made whole
        if _schema(conn, "main") != _schema(conn, "pub") or free * 4 > pages:
            return None
        changes = _changes(conn, seen)  # first: a write from here on is compared by the next build
        plan, now, compared_part = [], set(), False
        for table in _tables(conn, "main"):
            if table in _UNPUBLISHED:
                continue
            q = _quote(table)
            cols = [r[1] for r in conn.execute(f"pragma main.table_info({q})")]
            ranges = _ranges(table, changes, seen)
            compared_part = compared_part or ranges is not None
            # a row masked last time always differs from the store: it is written only if what masking
            # makes of it now differs from the copy
            candidates = _rows_to_mask(conn, table, cols, {rid for t, rid in masked if t == table}, ranges)
            published = {r[0]: list(r[1:]) for r in _rows_by_id(conn, table, cols, candidates, schema="pub")}
            writes, added = [], 0
            for row in _rows_by_id(conn, table, cols, candidates):
                values, differs = _public_row(table, cols, row[1:], show_addresses)
                if differs:
                    now.add((table, row[0]))
                if published.get(row[0]) != values:
                    writes.append([row[0], *values])
                added += row[0] not in published
            if ranges is not None:  # a row deleted from the store moved its bucket's count
                gone = _rows_gone(conn, table, ranges[:-1]) if len(ranges) > 1 else []
            else:
                # the copy's rows the store no longer has, only looked for where the counts say there are
                # any: the copy holds (store rows - rows new to it + rows gone)
                counts = [conn.execute(f"select count(*) from {schema}.{q}").fetchone()[0]
                          for schema in ("main", "pub")]
                gone = _rows_gone(conn, table) if counts[1] != counts[0] - added else []
            if writes or gone:
                plan.append((table, cols, writes, gone))
        if changes is not None and not compared_part:
            changes["updates"] = 0  # every row was compared: the next update counts from here
        if not plan:
            return False, now, changes
        conn.execute("pragma pub.secure_delete = on")
        conn.execute("begin")  # every change below or none
        try:
            for table, cols, writes, gone in plan:
                q = _quote(table)
                for i in range(0, len(gone), 500):
                    conn.execute(f"delete from pub.{q} where rowid in ({','.join('?' * len(gone[i:i + 500]))})",
                                 gone[i:i + 500])
                names = ", ".join(["rowid", *map(_quote, cols)])
                conn.executemany(f"insert or replace into pub.{q} ({names}) values ({', '.join('?' * (len(cols) + 1))})",
                                 writes)
            for table in _UNPUBLISHED:  # the deletes above were counted in the copy
                if table in _tables(conn, "pub"):
                    conn.execute(f"delete from pub.{_quote(table)}")
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        free, pages = (conn.execute(f"pragma pub.{p}").fetchone()[0] for p in ("freelist_count", "page_count"))
        if free * 4 > pages:  # a store that lost many rows: the copy is compacted (its free pages are zeroes)
            conn.execute("vacuum pub")
        return True, now, changes
    finally:
        conn.close()


def _tables(conn: sqlite3.Connection, schema: str) -> list[str]:
    return [r[0] for r in conn.execute(
        f"select name from {schema}.sqlite_master where type = 'table' and name not like 'sqlite_%' order by name")]


def _schema(conn: sqlite3.Connection, schema: str) -> list:
    return conn.execute(f"select type, name, sql from {schema}.sqlite_master order by type, name").fetchall()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rows_to_mask(conn: sqlite3.Connection, table: str, cols: list[str], masked: set,
                  ranges: list[tuple[int, int | None]] | None = None) -> list[int]:
    """Rowids of store ``table`` (columns ``cols``) that are new, differ from the copy (``pub``), or were
    masked in it; with ``ranges`` ([(low, high or None)]), only rows in them are compared."""
    q = _quote(table)
    same = " and ".join(f"m.{_quote(c)} is o.{_quote(c)}" for c in cols) or "1"
    sql = (f"select m.rowid from main.{q} m left join pub.{q} o on o.rowid = m.rowid "
           f"where (o.rowid is null or not ({same}))")
    rows: set = set()
    for low, high in ranges if ranges is not None else [(None, None)]:
        bounds = [b for b in (low, high) if b is not None]
        where = (" and m.rowid >= ?" if low is not None else "") + (" and m.rowid <= ?" if high is not None else "")
        rows.update(r[0] for r in conn.execute(sql + where, bounds))
    return sorted(rows | masked)


def _rows_gone(conn: sqlite3.Connection, table: str, ranges: list[tuple[int, int]] | None = None) -> list[int]:
    """Rowids of the copy's ``table`` that the store no longer has (with ``ranges``, among those rowids)."""
    q = _quote(table)
    sql = f"select o.rowid from pub.{q} o where not exists (select 1 from main.{q} m where m.rowid = o.rowid)"
    if ranges is None:
        return [r[0] for r in conn.execute(sql)]
    return [r[0] for low, high in ranges for r in conn.execute(sql + " and o.rowid between ? and ?", [low, high])]


def _same_content(a: Path, b: Path, chunk: int = 1 << 20) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(chunk), fb.read(chunk)
            if x != y:
                return False
            if not x:
                return True


def _rows_by_id(conn: sqlite3.Connection, table: str, cols: list[str], rowids: list[int] | None,
                schema: str = "main"):
    """``(rowid, *cols)`` of ``schema``'s ``table``: every row, or those of ``rowids``."""
    quoted, select = f"{schema}.{_quote(table)}", ", ".join(_quote(c) for c in cols)
    if rowids is None:
        yield from conn.execute(f"select rowid, {select} from {quoted}")
        return
    for i in range(0, len(rowids), 500):
        part = rowids[i:i + 500]
        yield from conn.execute(f"select rowid, {select} from {quoted} where rowid in ({','.join('?' * len(part))})",
                                part)


def _public_row(table: str, cols: list[str], row, show_addresses: bool) -> tuple[list, dict]:
    """A row's values as published (every text masked, bytes read as text) and the columns that changed."""
    values, changed = [], {}
    for col, value in zip(cols, row):
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
            changed[col] = None  # a blob is published as its text: the column is rewritten
        if isinstance(value, str):
            text = redact_campaign_text(value) if (table, col) in _CAMPAIGN_TEXT else value
            if table == "log_sources":
                text = _public_source(col, text)
            text = public_text(text, show_addresses=show_addresses)
            if text != value or col in changed:
                changed[col] = text
            value = text
        values.append(value)
    return values, changed


def _public_source(col: str, text: str) -> str:
    """A log source by its file's name (the folders it was read from are the author's machine), and its
    import state without ``file_head``: the log's first bytes as hex, which no masking reads."""
    if col == "name":
        return source_name(text) or text
    if col == "state_json" and "file_head" in text:
        try:
            state = json.loads(text)
        except ValueError:
            return text
        if isinstance(state, dict):
            state.pop("file_head", None)
            return json.dumps(state)
    return text


def _publishable_table(conn: sqlite3.Connection, table: str, show_addresses: bool) -> list[int]:
    """Mask every text value of ``table`` in place; returns the rowids it changed."""
    cols = [r[1] for r in conn.execute(f"pragma main.table_info({_quote(table)})")]
    if not cols:
        return []
    changes = []
    for row in _rows_by_id(conn, table, cols, None):
        new = _public_row(table, cols, row[1:], show_addresses)[1]
        if new:
            changes.append((row[0], new))
    for rowid, new in changes:
        sets = ", ".join(_quote(c) + " = ?" for c in new)
        conn.execute(f"update main.{_quote(table)} set {sets} where rowid = ?", [*new.values(), rowid])
    return [rowid for rowid, _ in changes]


def write_run_samples(db, runs_dir: Path, run_id: int, *, show_addresses: bool = False) -> list[Path]:
    """One run's samples as CSV and JSON beside its articles; returns the files whose text changed."""
    rows = run_samples(db, run_id, show_addresses=show_addresses)
    written = []
    for suffix, text in (("csv", samples_csv(rows)), ("json", samples_json(rows, run_id))):
        path = runs_dir / f"run-{run_id}-samples.{suffix}"
        if not path.exists() or path.read_text() != text:  # an unchanged run's files stay as they are
            path.write_text(text)
            written.append(path)
    return written


def sample_files(runs_dir: Path, run_id: int) -> list[Path]:
    return [runs_dir / f"run-{run_id}-samples.{suffix}" for suffix in ("csv", "json")]


def remove_stale_samples(runs_dir: Path, run_ids) -> None:
    """The sample files of runs no longer in the database go."""
    keep = {f"run-{i}-samples" for i in run_ids}
    for f in list(runs_dir.glob("run-*-samples.csv")) + list(runs_dir.glob("run-*-samples.json")):
        if f.stem not in keep:
            f.unlink()


#: beside the articles: the store's file state the published copy was made from
_DATABASE_STATE = ".cardproof-database.json"


def _file_state(db_path: Path, dst: Path, show_addresses: bool) -> list:
    """What the published copy depends on, cheaply: the store's files (any write changes their size or
    time, a WAL write the -wal file's), the copy's own, the masking and the code that masks."""
    from .fingerprints import code_fingerprint, store_state

    try:
        st = dst.stat()
        copy = [st.st_size, st.st_mtime_ns]
    except OSError:
        copy = None
    return [store_state(db_path), copy, show_addresses, code_fingerprint()]


def _masking() -> str:
    """The code that decides what a published text looks like: a change to it masks every row again."""
    import hashlib

    from cardproof.daemon.store import redact

    from . import privacy

    h = hashlib.sha256()
    for module in (redact, privacy):
        h.update(Path(module.__file__).read_bytes())
    h.update(repr(sorted(_CAMPAIGN_TEXT)).encode())
    return h.hexdigest()


def write_public_database(db_path: Path, docs_dir: Path, *, show_addresses: bool = False) -> list[Path]:
    """The publishable database under ``downloads/``, made again only when the store's files changed.

    Copying the whole store costs seconds at a year of runs; a build that changed nothing must not
    pay it, and one that added a run masks only the rows that differ from the last copy
    (:func:`public_database`): the record beside the articles names the rows masking changed in it,
    for the copy of that size and time, masked by this masking code. Returns ``[path]`` when the
    file changed, else ``[]``.
    """
    downloads = docs_dir / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    dst = downloads / DATABASE_NAME
    state_path = docs_dir / _DATABASE_STATE
    masking = [show_addresses, _masking()]
    seen = None
    try:
        saved = json.loads(state_path.read_text())
        if saved["state"] == _file_state(db_path, dst, show_addresses):
            return []
        # the rows masked in the copy on disk, if it is the one recorded and masked the same way
        masked = {(t, int(r)) for t, r in saved["masked"]} \
            if saved["state"][1] == _file_state(db_path, dst, show_addresses)[1] and saved["masking"] == masking \
            else None
        seen = saved.get("changes") if masked is not None else None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        masked = None  # no or a damaged record: made whole
    record: dict = {}
    # the store as it was before the copy began: a capture that writes while the copy is made leaves a
    # record the next build does not match, so that build copies its rows
    store_before = _file_state(db_path, dst, show_addresses)[0]
    changed = public_database(Path(db_path), dst, show_addresses=show_addresses, masked=masked, record=record,
                              seen=seen)
    try:
        state = _file_state(db_path, dst, show_addresses)
        state[0] = store_before
        state_path.write_text(json.dumps({"state": state, "masking": masking, "masked": sorted(record["masked"]),
                                          "changes": record.get("changes")}))
    except OSError:
        pass  # only a shortcut for the next build
    return [dst] if changed else []


def write_exports(db_path: Path, docs_dir: Path, *, show_addresses: bool = False) -> list[Path]:
    """Each run's samples as CSV and JSON beside its articles, the publishable database under
    ``downloads/``, and a *Downloads* section on each evidence page. Returns the files written.

    The report build does this per run as it renders the run (report/build.py); this does every run.
    """
    runs_dir = docs_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    conn = connect_readonly(db_path)
    try:
        import sqlite_utils

        db = sqlite_utils.Database(conn)
        run_ids = [r[0] for r in db.execute("select id from runs order by id").fetchall()]
        for run_id in run_ids:
            written += write_run_samples(db, runs_dir, run_id, show_addresses=show_addresses)
    finally:
        conn.close()
    remove_stale_samples(runs_dir, run_ids)
    written += write_public_database(db_path, docs_dir, show_addresses=show_addresses)
    for run_id in run_ids:
        for lang in LANGUAGES:
            page = runs_dir / (f"run-{run_id}-evidence.md" if lang == "en" else f"run-{run_id}-evidence.{lang}.md")
            if page.exists():
                link_downloads(page, run_id, Lang(lang))
    return written


def downloads_section(run_id: int, L: Lang) -> str:
    """The evidence page's *Downloads* section in ``L``'s language (ids and numbers only: nothing foreign)."""
    _ = L.gettext
    return (f"\n\n## {_('Downloads')} {{#downloads}}\n\n{_DOWNLOADS_MARK}"
            + _("The rows of this page to re-derive every figure: the samples of run {run} as [CSV]({csv}) "
                "and [JSON]({json}), and [the whole database]({db}) (SQLite; addresses masked and credentials "
                "removed as on these pages).").format(run=run_id, csv=f"run-{run_id}-samples.csv",
                                                        json=f"run-{run_id}-samples.json",
                                                        db=f"../downloads/{DATABASE_NAME}")
            + "\n")


_SECTION = re.compile(r"\n\n## [^\n]*\{#downloads\}\n\n" + re.escape(_DOWNLOADS_MARK) + r"[^\n]*\n", re.S)


def with_downloads(text: str, run_id: int, L: Lang) -> str:
    """The evidence page ``text`` with its *Downloads* section, once."""
    text = str(text)  # plain text: an MD page would escape what is joined to it
    section = downloads_section(run_id, L)
    if section in text:
        return text
    return _SECTION.sub("", text).rstrip("\n") + section


def link_downloads(page: Path, run_id: int, L: Lang) -> None:
    """Give the evidence page its *Downloads* section, once (a page kept from an earlier build has it)."""
    text = page.read_text()
    new = with_downloads(text, run_id, L)
    if new != text:
        page.write_text(new)
