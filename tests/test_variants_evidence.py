"""A variant's evidence: the settings its load states (parsers on real lines), and each argument against them.

"Recorded line from this build" means a line of tests/fixtures/logs/variant-settings.log,
written by this project's real llama-server (see that folder's README); published lines
are quoted from tests/fixtures/logs/real/, whose README names their sources.
"""

from __future__ import annotations

from pathlib import Path

from cardproof.daemon.logs.lines import clean
from cardproof.daemon.logs.parsers import parse_line
from cardproof.daemon.campaign.variant_args import help_groups, merged, ollama_options, pairs, preset_lines
from cardproof.daemon.campaign.variant_evidence import check_variant

LOGS = Path(__file__).parent / "fixtures" / "logs"
RECORDED = (LOGS / "variant-settings.log").read_text().splitlines()


def facts(raw: str) -> dict:
    out = {}
    for f in parse_line(clean(raw)[2]):
        out[f"{f.name}/{f.device}" if f.device else f.name] = f.value_num if f.value_num is not None else f.value_text
    return out


def line(fragment: str, lines=RECORDED) -> str:
    return next(x for x in lines if fragment in x)


def published(name: str, fragment: str) -> str:
    return line(fragment, (LOGS / "real" / name).read_text().splitlines())


# -- parsers ---------------------------------------------------------------------------------------

def test_threads_from_system_info_recorded_and_published():
    assert facts(line("system_info")) == {"n_threads": 1.0, "n_threads_batch": 1.0}
    assert facts(published("poseidon-rocm-then-cpu.log", "system_info: n_threads = 8")) == {
        "n_threads": 8.0, "n_threads_batch": 8.0}
    assert facts(published("local-llama-failed-load.log", "system info: n_threads")) == {
        "n_threads": 4.0, "n_threads_batch": 4.0}
    # 2024 builds and ik_llama.cpp: fields of the message; n_threads_batch=-1 means "as n_threads"
    assert facts(published("ik-llama-pr237-15x3090.log", "system info |")) == {"n_threads": 64.0}
    # the thread pool's own line repeats the figure; the load's fact is system_info's
    assert facts("0.00.023.299 I cmn          init: llama threadpool init, n_threads = 2") == {}


def test_threads_from_the_servers_json_log():
    """--log-format json (the 2024 server's default, ik_llama.cpp): the fields of the "system info" message."""
    assert facts(published("ik-llama-discussion753-json-system-info.log", '"msg":"system info"')) == {
        "n_threads": 56.0, "n_threads_batch": 56.0}
    assert facts(published("ik-llama-discussion753-json-system-info.log", '"msg":"build info"')) == {}


def test_flash_attention_as_set_and_as_resolved():
    assert facts(line("flash_attn            = enabled")) == {"flash_attn": "on"}
    assert facts(line("flash_attn            = disabled")) == {"flash_attn": "off"}
    assert facts(line("resolve_fused_ops: Flash Attention")) == {"flash_attn": "on"}
    assert facts(published("yuy4o-llm-b7342-docker-a100.log", "Flash Attention was auto")) == {"flash_attn": "on"}
    assert facts(published("ik-llama-issue503-zsh-segfault.log", "flash_attn = ")) == {"flash_attn": "on"}
    assert facts(published("ik-llama-issue60-gdb-sigill.log", "flash_attn = ")) == {"flash_attn": "off"}
    # a fused-op line that is not about flash attention states nothing
    assert facts("0.00.022.999 I resolve_fused_ops: fused DeepSeek V4 HC pre enabled") == {}


def test_batch_and_physical_batch():
    assert facts(line("n_batch               = 2048")) == {"n_batch": 2048.0}
    assert facts(line("n_ubatch              = 128")) == {"n_ubatch": 128.0}
    assert facts(published("ik-llama-pr237-15x3090.log", "n_ubatch")) == {"n_ubatch": 1024.0}


def test_an_overridden_tensor_names_its_buffer_type():
    assert facts(line("overridden")) == {"tensor_override/CPU": "blk.0.ffn_up.weight"}


def test_an_overridden_tensor_in_every_spelling_builds_printed():
    # ik_llama.cpp (and llama.cpp's first -ot builds): no size, "overriden"
    assert facts(published("ik-llama-discussion753-overriden-context.log", "blk.37.ffn_up_exps")) == {
        "tensor_override/CPU": "blk.37.ffn_up_exps.weight"}
    assert facts(published("ik-llama-pr645-draft-model-assert.log", "blk.3.ffn_gate_exps")) == {
        "tensor_override/CUDA1": "blk.3.ffn_gate_exps.weight"}
    # llama.cpp PR 11397 (ubergarm's comment): lower case, an RPC server as the buffer type
    assert facts("tensor blk.49.ffn_gate_exps.weight buffer type overriden to RPC[127.0.0.1:50053]") == {
        "tensor_override/RPC[127.0.0.1:50053]": "blk.49.ffn_gate_exps.weight"}
    # 2025 on, a CPU override may land in the repacked buffer (llama.cpp PR 14990); shimmy's --cpu-moe audit
    assert facts("tensor blk.1.ffn_down_exps.weight (99 MiB iq4_nl) buffer type overridden to CPU_REPACK") == {
        "tensor_override/CPU_REPACK": "blk.1.ffn_down_exps.weight"}


# -- arguments -------------------------------------------------------------------------------------

def test_pairs_merge_and_preset_keys():
    assert pairs(["-t", "1", "--no-mmap", "-ngl", "-1", "--ctx-size=4096"]) == [
        ("-t", "1"), ("--no-mmap", None), ("-ngl", "-1"), ("--ctx-size", "4096")]
    # the variant's -t replaces the base's --threads (one option, two spellings), nothing else moves
    assert merged(["-m", "x.gguf", "--threads", "2", "-c", "2048"], ["-t", "1"]) == [
        "-m", "x.gguf", "-c", "2048", "-t", "1"]
    groups = help_groups("-ngl,  --gpu-layers, --n-gpu-layers N   max. number of layers\n"
                         "--spec-draft-type-k, -ctkd, --cache-type-k-draft TYPE\n")
    assert groups["--gpu-layers"] == frozenset({"-ngl", "--gpu-layers", "--n-gpu-layers"})
    assert merged(["--cache-type-k-draft", "f16"], ["-ctkd", "q8_0"], groups) == ["-ctkd", "q8_0"]
    assert preset_lines(["-ctk", "q8_0", "--no-mmap"]) == [("ctk", "q8_0"), ("no-mmap", "true")]


def test_ollama_takes_what_it_has_a_request_option_for():
    assert ollama_options(["--threads", "4", "-b", "256", "-ngl", "10", "-c", "8192"]) == (
        {"num_thread": 4, "num_batch": 256, "num_gpu": 10, "num_ctx": 8192}, [])
    options, refused = ollama_options(["-fa", "on", "-ctk", "q8_0"])
    assert options == {} and "OLLAMA_FLASH_ATTENTION" in refused[0] and "OLLAMA_KV_CACHE_TYPE" in refused[1]


# -- each argument against the log ----------------------------------------------------------------

def numbered(lines):
    return list(enumerate(lines, start=1))


def test_every_argument_the_recorded_load_states_took():
    first = numbered(RECORDED[:5])  # -t 1 -ctk q8_0 -ctv q8_0 -fa on -ub 128
    status, checks = check_variant(["-t", "1", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on", "-ub", "128"], first)
    assert status == "took", checks
    by = {c.flag: c for c in checks}
    assert by["-t"].line_id == 1 and by["-ub"].line_id == 3 and by["-ctk"].line_id == 5


def test_a_contradicted_argument_is_caught_with_what_the_log_says():
    first = numbered(RECORDED[:5])
    status, checks = check_variant(["-fa", "off", "-ctv", "f16"], first)
    assert status == "contradicted"
    assert [(c.status, c.observed) for c in checks] == [("contradicted", "on"), ("contradicted", "q8_0")]
    # -ub above -b: the build caps it, and the check says which argument to add
    capped = numbered(RECORDED[5:8])
    status, checks = check_variant(["-ub", "512"], capped)
    assert status == "contradicted" and checks[0].observed == "256" and "-b" in checks[0].note


def test_auto_resolved_later_in_the_log_is_what_counts():
    lines = numbered(["0.00.021.921 I llama_context: flash_attn            = auto", RECORDED[8]])
    assert check_variant(["-fa", "on"], lines)[0] == "took"
    assert check_variant(["-fa", "off"], lines)[0] == "contradicted"


def test_parallel_slots_from_the_servers_slots_line():
    lines = numbered([published("poseidon-rocm-then-cpu.log", "initializing slots, n_slots = 4")])
    status, checks = check_variant(["-np", "4"], lines)
    assert status == "took" and (checks[0].observed, checks[0].line_id) == ("4", 1), checks
    assert check_variant(["--parallel", "2"], lines)[0] == "contradicted"


def test_not_shown_and_not_checked_make_a_partial_verdict():
    lines = numbered(RECORDED[:5])
    status, checks = check_variant(["-ngl", "99", "--no-mmap"], lines)
    assert status == "partly"
    assert [c.status for c in checks] == ["not shown", "not checked"]
    assert "CPU-only" in checks[0].note
    assert check_variant(["-t", "1"], [])[0] == "no_log"


def test_tensor_overrides_by_pattern_and_expert_layers():
    lines = numbered([RECORDED[9]])
    assert check_variant(["-ot", r"blk\.0\.ffn_up.*=CPU"], lines)[0] == "took"
    assert check_variant(["-ot", r"blk\.1\.ffn_up.*=CPU"], lines)[0] == "contradicted"
    moe = numbered([
        "tensor blk.0.ffn_up_exps.weight (1 MiB q4_K) buffer type overridden to CPU",
        "tensor blk.1.ffn_down_exps.weight (1 MiB q4_K) buffer type overridden to CUDA_Host",
    ])
    assert check_variant(["--n-cpu-moe", "2"], moe)[0] == "took"
    assert check_variant(["--n-cpu-moe", "1"], moe)[0] == "contradicted"
    status, checks = check_variant(["--n-cpu-moe", "2"], lines)  # a dense model: no experts named
    assert status == "partly" and checks[0].status == "not shown"


def test_published_logs_give_a_verdict_not_an_error():
    """Whole published logs of other builds: each setting they state is read, none raises."""
    lines = numbered((LOGS / "real" / "ik-llama-pr237-15x3090.log").read_text().splitlines())
    status, checks = check_variant(["-fa", "off", "-ub", "1024", "-t", "64"], lines)
    assert status == "took", checks
    lines = numbered((LOGS / "real" / "yuy4o-llm-b7342-docker-a100.log").read_text().splitlines())
    assert check_variant(["-fa", "on"], lines)[0] == "took"  # "Flash Attention was auto, set to enabled"


def test_a_draft_models_own_context_is_not_the_variants():
    """ik_llama.cpp PR 645: the target's context (-ub 4096, flash attention on), then the draft model's
    (512, off). Only the target's settings are the variant's."""
    lines = numbered((LOGS / "real" / "ik-llama-pr645-draft-model-assert.log").read_text().splitlines())
    status, checks = check_variant(["-fa", "on", "-ub", "4096"], lines)
    assert status == "took", checks


def test_every_note_of_a_check_has_german():
    from cardproof.daemon.campaign.variant_evidence import NOTES
    from cardproof.report.i18n import CATALOGUE

    assert NOTES and all(n in CATALOGUE for n in NOTES)


# -- the spellings of other builds, on their own published logs ------------------------------------

def real(name: str):
    return numbered((LOGS / "real" / name).read_text().splitlines())


# ik_llama.cpp PR 645, ChicoPinto70's command (2025-07-26; its log is the fixture)
PR645_ARGS = ["-ngl", "64", "-c", "16384", "-fa", "-t", "32", "-ctk", "q8_0",
              "-ot", r"blk\.[0-6]\..*_exps\.=CUDA1,blk\.(7|8|9|10)\..*_exps\.=CUDA2,exps=CPU",
              "-b", "4096", "-ub", "4096"]


def test_a_published_command_line_took_on_its_own_log():
    """Every argument of the real command against its own log: a bare -fa (the switch of builds before
    2025-08) is flash attention on, and -ot's tensors are named 'Tensor ... overriden to CUDA1'."""
    status, checks = check_variant(PR645_ARGS, real("ik-llama-pr645-draft-model-assert.log"))
    assert status == "took", checks
    by = {c.flag: c for c in checks}
    assert by["-fa"].expected == "on" and by["-fa"].line_id == 400
    assert by["-ot"].observed.startswith("174 tensors")


def test_flash_attention_in_every_spelling_asked():
    lines = real("ik-llama-issue503-zsh-segfault.log")  # flash_attn = 1
    for asked in (["-fa"], ["--flash-attn"], ["-fa", "on"], ["-fa", "1"], ["--flash-attn=true"], ["-fa", "auto"]):
        assert check_variant(asked, lines)[0] == "took", asked
    for asked in (["-fa", "off"], ["-fa", "0"], ["--flash-attn", "disabled"]):
        assert check_variant(asked, lines)[0] == "contradicted", asked
    # a word no build takes is not read as a claim either way
    assert check_variant(["-fa", "yes"], lines)[1][0].status == "not checked"


def test_a_command_line_in_the_log_is_no_evidence():
    """ik_llama.cpp issue 503: the log starts with the user's command (-ctk q8_0 ... --ctx-size 16768); only
    the load's own lines count, and a build that pads the context to 256 cells still took -c."""
    lines = real("ik-llama-issue503-zsh-segfault.log")
    status, checks = check_variant(["-ctk", "f16", "-c", "16768"], lines)
    assert [(c.status, c.observed, c.line_id) for c in checks] == [
        ("contradicted", "q8_0", 118), ("took", "16896", 107)]
    assert "256" in checks[1].note
    assert check_variant(["-c", "8192"], lines)[1][0].observed == "16896"
    assert check_variant(["-c", "8192"], lines)[0] == "contradicted"
    assert check_variant(["-c", "0"], lines)[0] == "took"  # the model's own context, whatever it is


def test_gpu_layers_as_a_count_auto_or_all():
    """-ngl takes 'auto' and 'all' in builds from 2025-12 (common/arg.cpp), -1 and -2 the same."""
    lines = real("ik-llama-pr645-draft-model-assert.log")  # offloaded 62/62
    for asked in ("all", "-2", "auto", "-1", "99", "62"):
        assert check_variant(["-ngl", asked], lines)[0] == "took", asked
    assert check_variant(["--n-gpu-layers", "10"], lines)[1][0].observed == "62/62"
    assert check_variant(["--gpu-layers", "10"], lines)[0] == "contradicted"
    assert check_variant(["-ngl", "most"], lines)[1][0].status == "not checked"


def test_the_first_matching_pattern_places_a_tensor():
    """llama.cpp puts a tensor where the first pattern that matches it says: with exps=CPU first, the
    experts of layers 3-6 would be on the CPU, and the log's 'blk.3... overriden to CUDA1' contradicts it."""
    lines = real("ik-llama-pr645-draft-model-assert.log")
    status, checks = check_variant(["-ot", r"exps=CPU,blk\.[0-6]\..*_exps\.=CUDA1"], lines)
    assert status == "contradicted" and checks[0].observed == "blk.3.ffn_gate_exps.weight on CUDA1"
    # the same rules as three -ot arguments: a tensor is the first's where the first and the third match
    status, checks = check_variant(["-ot", r"blk\.[0-6]\..*_exps\.=CUDA1", "-ot", r"blk\.(7|8|9|10)\..*_exps\.=CUDA2",
                                    "-ot", "exps=CPU"], lines)
    assert status == "took", checks
    status, checks = check_variant(["-ot", r"blk\.[0-6]\..*_exps\.=CUDA1", "-ot", "exps=CPU"], lines)
    assert status == "contradicted" and checks[1].observed == "blk.7.ffn_gate_exps.weight on CUDA2"


def test_expert_layers_are_counted_from_the_first_with_experts():
    """GLM-4.5-Air's layer 0 is dense (ik_llama.cpp discussion 753): its experts start at blk.1."""
    lines = real("ik-llama-discussion753-overriden-context.log")
    assert check_variant(["-ot", r"blk\..*\.ffn_(up)_exps\.weight=CPU"], lines)[0] == "took"
    assert check_variant(["--n-cpu-moe", "47"], lines)[0] == "took"
    assert check_variant(["-cmoe"], lines)[0] == "took"
    status, checks = check_variant(["-ncmoe", "40"], lines)  # layers 40-46 kept on the CPU as well
    assert status == "contradicted" and checks[0].observed.startswith("layers 37-46 on the CPU")


def test_a_cpu_override_may_land_in_a_repacked_buffer():
    """llama.cpp PR 14990: an override to the CPU takes the host's other buffer types (CPU_REPACK)."""
    lines = numbered([  # shimmy's --cpu-moe audit, deepseek-moe-16b Q2_K
        "tensor blk.1.ffn_gate_exps.weight (57 MiB q2_K) buffer type overridden to CPU",
        "tensor blk.1.ffn_down_exps.weight (99 MiB iq4_nl) buffer type overridden to CPU_REPACK",
        "tensor blk.1.ffn_up_exps.weight (57 MiB q2_K) buffer type overridden to CPU",
    ])
    assert check_variant(["-ot", "ffn_down_exps=CPU"], lines[1:2])[0] == "took"
    assert check_variant(["--n-cpu-moe", "2"], lines)[0] == "took"


def test_json_threads_prove_t_and_tb():
    lines = real("ik-llama-discussion753-json-system-info.log")
    assert check_variant(["--threads", "56", "--threads-batch", "56"], lines)[0] == "took"
    assert check_variant(["-t", "8"], lines)[0] == "contradicted"
