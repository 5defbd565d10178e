"""A model's shape from its GGUF header (daemon/server/modelfile.py gguf_header), stored with it (m023).

Real parts: GGUF files written by the gguf package's own writer (the format llama.cpp's converters write),
a dense one and a mixture of experts with routed and shared expert tensors, read back by cardproof's
header reader and by the gguf package's reader; a real store.
"""

from __future__ import annotations

import numpy as np
import pytest

from cardproof.daemon.server import modelfile
from cardproof.daemon.store import open_store


def _write(path, *, experts: int = 0, used: int = 0, tokens=("<s>", "a", "b"), ftype: int = 15, name="Tiny"):
    import gguf

    w = gguf.GGUFWriter(str(path), "qwen3moe" if experts else "llama")
    w.add_basename(name)
    w.add_file_type(ftype)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(list(tokens))
    if experts:
        w.add_expert_count(experts)
        w.add_expert_used_count(used)
    w.add_tensor("token_embd.weight", np.zeros((len(tokens), 8), dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((8, 8), dtype=np.float32))
    if experts:
        w.add_tensor("blk.0.ffn_gate_exps.weight", np.zeros((experts, 16, 8), dtype=np.float32))
        w.add_tensor("blk.0.ffn_down_exps.weight", np.zeros((experts, 8, 16), dtype=np.float32))
        w.add_tensor("blk.0.ffn_down_shexp.weight", np.zeros((8, 16), dtype=np.float32))
    else:
        w.add_tensor("blk.0.ffn_down.weight", np.zeros((8, 16), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_dense_header(tmp_path):
    got = modelfile.gguf_header(_write(tmp_path / "d.gguf"))
    assert got["architecture"] == "llama" and got["quantisation"] == "Q4_K_M" and got["basename"] == "Tiny"
    assert got["params"] == got["active_params"] == 3 * 8 + 64 + 128
    assert got["expert_count"] == got["expert_used_count"] == 0


def test_a_mixture_of_experts_counts_only_the_routed_experts_it_uses(tmp_path):
    import gguf

    path = _write(tmp_path / "m.gguf", experts=8, used=2)
    got = modelfile.gguf_header(path)
    reader = gguf.GGUFReader(str(path))  # the reference reader agrees on every tensor
    assert got["params"] == sum(int(t.n_elements) for t in reader.tensors)
    routed = 2 * 8 * 16 * 8
    assert got["expert_count"] == 8 and got["expert_used_count"] == 2
    assert got["active_params"] == got["params"] - routed + routed * 2 // 8  # shared experts count whole


def test_the_tokenizer_hash_tells_bases_apart_and_ignores_the_quantisation(tmp_path):
    a = modelfile.gguf_header(_write(tmp_path / "a.gguf", ftype=15))
    b = modelfile.gguf_header(_write(tmp_path / "b.gguf", ftype=7))
    c = modelfile.gguf_header(_write(tmp_path / "c.gguf", tokens=("<s>", "a", "c")))
    assert a["quantisation"] != b["quantisation"] and a["tokenizer_sha256"] == b["tokenizer_sha256"]
    assert c["tokenizer_sha256"] != a["tokenizer_sha256"]


@pytest.mark.parametrize("cut", [0, 3, 30, 200])
def test_a_cut_off_or_foreign_file_gives_no_shape(tmp_path, cut):
    whole = _write(tmp_path / "w.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(whole[:cut])
    assert modelfile.gguf_header(tmp_path / "cut.gguf") == {}
    (tmp_path / "text.gguf").write_text("not a model\n")
    assert modelfile.gguf_header(tmp_path / "text.gguf") == {}


def test_a_model_registered_before_m023_gains_its_shape_when_registered_again(tmp_path):
    path = _write(tmp_path / "d.gguf")
    store = open_store(tmp_path / "s.db")
    row = modelfile.describe("tiny", str(path))
    old = {k: v for k, v in row.items() if k not in store.SHAPE_COLUMNS}
    mid = store.upsert_model(old)
    assert store.db.execute("select params from models where id = ?", [mid]).fetchone()[0] is None
    assert store.upsert_model(row) == mid
    got = dict(zip(store.SHAPE_COLUMNS, store.db.execute(
        f"select {', '.join(store.SHAPE_COLUMNS)} from models where id = ?", [mid]).fetchone()))
    assert got == {k: row[k] for k in store.SHAPE_COLUMNS}
    store.db.execute("update models set basename = 'kept' where id = ?", [mid])
    store.db.conn.commit()
    store.upsert_model(row)  # a column already set is left as stored
    assert store.db.execute("select basename from models where id = ?", [mid]).fetchone()[0] == "kept"
    store.close()


def _gguf_split(src, stem, tmp_path):
    """Cut ``src`` with llama.cpp's own ``llama-gguf-split`` (one tensor a part), as big models ship."""
    import subprocess

    from cardproof.daemon.server import llamacpp

    tool = llamacpp.find_binary("llama-gguf-split")
    out = subprocess.run([str(tool), "--split", "--split-max-tensors", "1", str(src), str(tmp_path / stem)],
                         env=llamacpp.server_env(tool), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return sorted(tmp_path.glob(f"{stem}-*-of-*.gguf"))


def test_a_model_cut_into_parts_by_gguf_split_counts_every_part(tmp_path):
    """Real part: llama.cpp's ``llama-gguf-split`` (built with the server). llama-server loads a split model
    from its first part; its size and parameters are those of all parts, its shape that of the whole."""
    whole = _write(tmp_path / "whole.gguf", experts=8, used=2)
    parts = _gguf_split(whole, "moe", tmp_path)
    assert len(parts) == 5 and parts[0].name == "moe-00001-of-00005.gguf"
    want = modelfile.gguf_header(whole)
    got = modelfile.gguf_header(parts[0])
    assert got.pop("split_parts") == 5
    for key in ("params", "active_params", "expert_count", "expert_used_count", "architecture",
                "quantisation", "tokenizer_sha256"):
        assert got[key] == want[key], key
    row = modelfile.describe("moe", str(parts[0]))
    assert row["file_bytes"] == sum(p.stat().st_size for p in parts) > parts[0].stat().st_size
    assert row["params"] == want["params"] and "split_parts" not in row

    parts[3].unlink()  # a part missing: the size of the model is not known, and not guessed
    short = modelfile.gguf_header(parts[0])
    assert "params" not in short and "active_params" not in short
    assert short["architecture"] == want["architecture"]
    row = modelfile.describe("moe", str(parts[0]))
    assert "file_bytes" not in row and "params" not in row and row["digest"]


def test_a_single_servers_model_is_described_from_the_file_its_props_name(tiny_models, tmp_path, llama_server):
    """A real single-model llama-server names its file in ``/props`` (``model_path``): the models row gets the
    file's size, digest and GGUF shape from it, as a router's listed ``--model`` gives them (the findings
    group models by that shape). A router describes no model this way: it lists each model's file itself."""
    from cardproof.daemon.server import llamacpp
    from cardproof.daemon.backends.llamaserver import LlamaServerBackend

    path = tiny_models["tiny-a"]
    server = llamacpp.LlamaServerProcess(["-m", str(path), "--alias", "tiny-a", "-c", "256", "-t", "1"],
                                         log_path=tmp_path / "single.log")
    server.start()
    try:
        row = LlamaServerBackend(server.url, timeout_s=30).describe_model("tiny-a")
    finally:
        server.stop()
    want = modelfile.describe("tiny-a", str(path))
    assert row["path"] == str(path) and row["file_bytes"] == path.stat().st_size
    for key in ("digest", "params", "active_params", "tokenizer_sha256", "architecture", "quantisation"):
        assert row[key] == want[key], key
    assert LlamaServerBackend(llama_server.url, timeout_s=30).describe_model("tiny-a") is None
