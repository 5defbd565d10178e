"""A log capture reads what was written before it began: a writer faster than the reader (a busy
machine, a chatty server at -lv 4) must not keep one capture, and with it a run's end or the
daemon's shutdown, going for ever. Lines written meanwhile are the next capture's."""

from __future__ import annotations

from cardproof.daemon.logs.importer import capture_file
from cardproof.daemon.logs.sources import FileReader
from cardproof.daemon.store import open_store


def _lines(reader: FileReader) -> list[str]:
    return [rec[5] for batch in reader.batches() for rec in batch]


def test_reader_stops_at_the_limit_and_leaves_a_cut_line_for_later(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(10)))
    cut = len(b"".join(b"line %d\n" % i for i in range(5))) + 3  # inside line 5
    reader = FileReader(log, final=True, until=cut)
    assert _lines(reader) == [f"line {i}" for i in range(5)]
    assert reader.position["offset"] == cut - 3  # line 5 is read whole by the next capture
    rest = FileReader(log, offset=reader.position["offset"], final=True)
    assert _lines(rest) == [f"line {i}" for i in range(5, 10)]


def test_a_finished_file_ending_at_the_limit_keeps_its_last_line(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"a\nb\nlast without newline")
    reader = FileReader(log, final=True, until=log.stat().st_size)
    assert _lines(reader) == ["a", "b", "last without newline"]


def test_capture_ends_while_a_faster_writer_keeps_appending(tmp_path, monkeypatch):
    """Between the capture's chunks the writer adds two chunks' worth of lines (a writer faster than
    the reader, made deterministic): the capture still ends after the lines that were there first."""
    from cardproof.daemon.logs import importer

    chunk = 500
    monkeypatch.setattr(importer, "CAPTURE_CHUNK_LINES", chunk)
    monkeypatch.setattr(importer, "_BETWEEN_CHUNKS_S", 0)
    log = tmp_path / "s.log"
    log.write_bytes(b"".join(b"before %d\n" % i for i in range(3 * chunk)))
    real, calls = importer.run_import, []

    def run_import_then_write(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(out["lines"])
        if len(calls) < 50:  # a chasing capture would take all 50 rounds
            with open(log, "ab") as f:
                f.write(b"".join(b"meanwhile %d %d\n" % (len(calls), i) for i in range(2 * chunk)))
        return out

    monkeypatch.setattr(importer, "run_import", run_import_then_write)
    store = open_store(tmp_path / "c.db")
    counts = capture_file(store, log)
    assert len(calls) <= 4, calls  # 3 chunks of what was there, at most one empty look after them
    assert counts["lines"] == 3 * chunk
    stored = [r[0] for r in store.db.conn.execute("select raw from log_lines order by id")]
    assert stored == [f"before {i}" for i in range(3 * chunk)]
    monkeypatch.setattr(importer, "run_import", real)
    capture_file(store, log, final=True)  # the next capture reads the rest, nothing lost or doubled
    assert [r[0] for r in store.db.conn.execute("select raw from log_lines order by id")] == \
        log.read_text().splitlines()
