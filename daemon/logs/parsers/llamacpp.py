"""Facts from llama.cpp / llama-server lines (this build and published older ones).

Each regex names the format it reads; older formats stay beside newer ones
because a user's journal may hold months of different builds.
"""

from __future__ import annotations

import re

from .base import Fact, LineParsers, mib
from ..lines import relative_seconds

PARSER = LineParsers("llamacpp")

# "load_tensors:        CUDA0 model buffer size = 14634.73 MiB"   (2025+)
# "llm_load_tensors:      CUDA0 buffer size =  8796.98 MiB"       (2024, no "model")
# "llm_load_tensors: AMD Radeon RX 7900 XTX (RADV NAVI31) buffer size = ..." (Vulkan names)
# the device name may hold spaces (a Vulkan card's); it begins and ends with a visible character and is
# bounded, so a line of padding cannot make the search backtrack without end (4,000 spaces once took 5 minutes)
_MODEL_BUF = re.compile(r"load_tensors:\s+(?P<dev>[^\s=](?:[^=]{0,120}?[^\s=])?)\s+(?:model )?buffer size =\s*"
                        r"(?P<n>[\d.]{1,40}) (?P<u>[KMG]i?B)")
_KV_BUF = re.compile(r"(?P<dev>\S{1,64}) KV buffer size =\s*(?P<n>[\d.]{1,40}) (?P<u>[KMG]i?B)")
_COMPUTE_BUF = re.compile(r"(?P<dev>\S{1,64}) compute buffer size =\s*(?P<n>[\d.]{1,40}) (?P<u>[KMG]i?B)")
_OUTPUT_BUF = re.compile(r"(?P<dev>\S{1,64})\s+output buffer size =\s*(?P<n>[\d.]{1,40}) (?P<u>[KMG]i?B)")
_RS_BUF = re.compile(r"(?P<dev>\S{1,64}) RS buffer size =\s*(?P<n>[\d.]{1,40}) (?P<u>[KMG]i?B)")


def _sized(rx: re.Pattern, name: str):
    def parse(text: str) -> list[Fact]:
        m = rx.search(text)
        if not m:
            return []
        return [Fact(name, mib(m["n"], m["u"]), unit="MiB", device=m["dev"].strip())]

    parse.__name__ = f"parse_{name}"
    return parse


parse_model_buffer = PARSER.on("model buffer size", "load_tensors:")(_sized(_MODEL_BUF, "model_buffer_mib"))
parse_kv_buffer = PARSER.on("KV buffer size")(_sized(_KV_BUF, "kv_buffer_mib"))
_parse_compute = _sized(_COMPUTE_BUF, "compute_buffer_mib")


@PARSER.on("compute buffer size")
def parse_compute_buffer(text: str) -> list[Fact]:
    """The model's compute buffers; the vision projector's own (``alloc_compute_meta``) apart from them."""
    facts = _parse_compute(text)
    if facts and "alloc_compute_meta" in text:
        return [f._replace(name="projector_compute_mib") for f in facts]
    return facts


# "llama_adapter_lora_init_impl:      CUDA0 LoRA buffer size =    19.00 MiB" (Ollama prints it for adapters)
_LORA_BUF = re.compile(r"(?P<dev>\S{1,64}) LoRA buffer size =\s*(?P<n>[\d.]{1,40}) (?P<u>[KMG]i?B)")
parse_lora_buffer = PARSER.on("LoRA buffer size")(_sized(_LORA_BUF, "lora_buffer_mib"))
parse_output_buffer = PARSER.on("output buffer size")(_sized(_OUTPUT_BUF, "output_buffer_mib"))
# recurrent state of hybrid models: no KV cache, but card memory all the same
parse_rs_buffer = PARSER.on("RS buffer size")(_sized(_RS_BUF, "rs_buffer_mib"))

# "load_tensors: offloaded 65/65 layers to GPU", older "llm_load_tensors: offloaded 61/61 layers to GPU"
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


@PARSER.on("offloaded ")
def parse_offloaded(text: str) -> list[Fact]:
    m = _OFFLOADED.search(text)
    if not m:
        return []
    return [Fact("offloaded_layers", float(m[1]), unit="layers"), Fact("total_layers", float(m[2]), unit="layers")]


# "llama_kv_cache: size =   24.00 MiB ( 12288 cells, 4 layers, 1/1 seqs), K (f16):   12.00 MiB, V (f16):   12.00 MiB"
# older "llama_new_context_with_model: KV self size  =  ... MiB, K (f16): ..., V (f16): ..."
_KV_TYPES = re.compile(r"K \((\w+)\):.*?V \((\w+)\):")


# With MLA (DeepSeek in ik_llama.cpp) one compressed cache replaces K and V, stored in the K type
# (-ctk): "KV self size  =  583.31 MiB, c^KV (q8_0):  583.31 MiB, kv^T: not used" -- there is no V cache
_MLA_KV_TYPE = re.compile(r"\bc\^KV \((\w+)\):")


@PARSER.on("K (", "c^KV (")
def parse_kv_types(text: str) -> list[Fact]:
    m = _KV_TYPES.search(text)
    if not m:
        m = _MLA_KV_TYPE.search(text)
        return [Fact("kv_cache_type_k", value_text=m[1])] if m else []
    return [Fact("kv_cache_type_k", value_text=m[1]), Fact("kv_cache_type_v", value_text=m[2])]


# Server settings a variant changes (daemon/run/variants/), each as the load itself states it: what was
# asked on the command line is not proof that it took.
# "common_param: system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : SSE3 = 1 | ..."    (2026)
# "system_info: n_threads = 8 / 16 | AVX = 1 | ..." (2024); the server's own line
# "system info: n_threads = 8, n_threads_batch = 8, total_threads = 16"; 2024 builds and ik_llama.cpp
# 'INFO [ main] system info | tid="1" timestamp=1 n_threads=64 n_threads_batch=-1' (-1: as n_threads)
# the same fields in the server's JSON log (--log-format json, the 2024 default; ik_llama.cpp):
# '{"tid":"1","timestamp":1,"level":"INFO","function":"main","line":3634,"msg":"system info","n_threads":56,
# "n_threads_batch":56,"total_threads":112,"system_info":"AVX = 1 | ..."}'
_THREADS = re.compile(r"system[_ ]info: n_threads = (\d{1,6})(?: \(n_threads_batch = (\d{1,6})\)|, "
                      r"n_threads_batch = (\d{1,6}))?|system info \|.*?\bn_threads=(\d{1,6})"
                      r"(?: n_threads_batch=(\d{1,6}))?"
                      r"|\"msg\":\s*\"system info\".*?\"n_threads\":\s*(\d{1,6})(?:,\s*\"n_threads_batch\":\s*(\d{1,6}))?")


@PARSER.on("n_threads = ", "n_threads=", '"n_threads":')
def parse_threads(text: str) -> list[Fact]:
    m = _THREADS.search(text)
    if not m:
        return []
    facts = [Fact("n_threads", float(m[1] or m[4] or m[6]), unit="threads")]
    batch = m[2] or m[3] or m[5] or m[7]
    if batch:
        facts.append(Fact("n_threads_batch", float(batch), unit="threads"))
    return facts


# "llama_context: flash_attn            = auto|enabled|disabled" (2025 on), older
# "llama_new_context_with_model: flash_attn = 1"; where it was auto, the resolution follows:
# "sched_reserve: Flash Attention was auto, set to enabled", "llama_context: Flash Attention was auto, set to
# enabled", "resolve_fused_ops: Flash Attention enabled" (this build). value_text: on, off or auto
_FA_SETTING = re.compile(r"(?:llama_context|llama_new_context_with_model|llama_init_from_model): "
                         r"flash_attn\s*=\s*(\w+)")
_FA_RESOLVED = re.compile(r"Flash Attention (?:was auto, set to )?(enabled|disabled)\b")
_FA_WORDS = {"1": "on", "enabled": "on", "true": "on", "on": "on",
             "0": "off", "disabled": "off", "false": "off", "off": "off", "auto": "auto"}


@PARSER.on("flash_attn", "Flash Attention ")
def parse_flash_attn(text: str) -> list[Fact]:
    m = _FA_SETTING.search(text) or _FA_RESOLVED.search(text)
    word = _FA_WORDS.get(m[1].lower()) if m else None
    return [Fact("flash_attn", value_text=word)] if word else []


# "llama_context: n_batch               = 2048" / "n_ubatch              = 512"; older
# "llama_new_context_with_model: n_ubatch   = 512". n_ubatch is min(-ub, -b): the log says which won
_BATCH = re.compile(r"(?:llama_context|llama_new_context_with_model|llama_init_from_model): n_(u?)batch\s+= (\d{1,9})")


@PARSER.on("n_batch ", "n_ubatch ")
def parse_batch(text: str) -> list[Fact]:
    m = _BATCH.search(text)
    return [Fact("n_ubatch" if m[1] else "n_batch", float(m[2]), unit="tokens")] if m else []


# A tensor kept off the default device by -ot / --n-cpu-moe (LLAMA_LOG_DEBUG: printed from -lv 5):
# "tensor blk.1.ffn_up_exps.weight (1 MiB q4_K) buffer type overridden to CPU", "... overridden to CUDA_Host",
# "... overridden to CPU_REPACK" (2025 on); the first builds with -ot (2025-03) named no size and misspelled it:
# "tensor blk.49.ffn_up_exps.weight buffer type overriden to RPC[127.0.0.1:50053]", and ik_llama.cpp still
# does, capitalised: "Tensor blk.3.ffn_gate_exps.weight buffer type overriden to CUDA1"
_OVERRIDE = re.compile(r"\b[Tt]ensor (\S+) (?:\([^)]*\) )?buffer type overrid{1,2}en to (\S+)")


@PARSER.on("buffer type overridden", "buffer type overriden")
def parse_tensor_override(text: str) -> list[Fact]:
    """``tensor_override``: the tensor's name, its buffer type as the device."""
    m = _OVERRIDE.search(text)
    return [Fact("tensor_override", value_text=m[1], device=m[2])] if m else []


# "llama_context: n_ctx                 = 12288"; older "llama_new_context_with_model: n_ctx      = 16896"
_N_CTX = re.compile(r"(?:llama_context|llama_new_context_with_model|llama_init_from_model): n_ctx\s+= (\d+)")


@PARSER.on("n_ctx ")
def parse_ctx(text: str) -> list[Fact]:
    m = _N_CTX.search(text)
    return [Fact("ctx_size", float(m[1]), unit="tokens")] if m else []


# At the default verbosity many builds print no llama_context line; the slots say it:
# "slot   load_model: id  0 | task -1 | new slot, n_ctx = 131072"            (2025 on, per slot)
# "srv    load_model: initializing, n_slots = 1, n_ctx_slot = 65536"          (2026)
# "INFO [  init] new slot | tid="..." timestamp=... id_slot=0 n_ctx_slot=32768" (2024, ik_llama.cpp)
# {"function":"initialize",...,"msg":"new slot","n_ctx_slot":2048,...}         (2024 JSON log)
_SLOT_CTX = re.compile(r"new slot, n_ctx = (\d{1,12})\b|n_ctx_slot\"?[ =:]+(\d{1,12})\b")
# "srv    load_model: initializing slots, n_slots = 4"; "INFO [ init] initializing slots | ... n_slots=1"
_N_SLOTS = re.compile(r"n_slots\"?[ =:]+(\d{1,12})\b")


@PARSER.on("new slot", "n_ctx_slot", "n_slots")
def parse_slots(text: str) -> list[Fact]:
    """Context per slot (``slot_ctx_size``) and the number of slots (``slots``)."""
    facts = []
    m = _N_SLOTS.search(text)
    if m and ("initializing" in text or "init" in text):
        facts.append(Fact("slots", float(m[1]), unit="slots"))
    m = _SLOT_CTX.search(text)
    if m and ("new slot" in text or "initializing" in text):
        facts.append(Fact("slot_ctx_size", float(m[1] or m[2]), unit="tokens"))
    return facts


# Whether all slots share one KV cache (then each slot's n_ctx is the whole context):
# "llama_context: kv_unified    = true"; "main: setting n_parallel = 4 and kv_unified = true (add -kvu ...)"
# (late 2025, before build:); "main: n_parallel is set to auto, using n_parallel = 4 and kv_unified = true";
# "srv    load_model: initializing, n_slots = 1, n_ctx_slot = 65536, kv_unified = 'true'" (2026)
_KV_UNIFIED = re.compile(r"\bkv_unified\s*=\s*'?(true|false)\b")


@PARSER.on("kv_unified")
def parse_kv_unified(text: str) -> list[Fact]:
    m = _KV_UNIFIED.search(text)
    return [Fact("kv_unified", value_text=m[1])] if m else []


# The context of one sequence before the slots take it: "llama_context: n_ctx_seq     = 65536", the warning
# "llama_context: n_ctx_seq (8192) < n_ctx_train (32768) -- ...", and where a slot is capped to the training
# context, "srv    load_model: the slot context (264960) exceeds the training context of the model (262144)"
_SEQ_CTX = re.compile(r"\bn_ctx_seq\s+= (\d{1,12})\b|\bn_ctx_seq \((\d{1,12})\) [<>]"
                      r"|the slot context \((\d{1,12})\) exceeds")


@PARSER.on("n_ctx_seq", "the slot context (")
def parse_seq_ctx(text: str) -> list[Fact]:
    m = _SEQ_CTX.search(text)
    return [Fact("seq_ctx_size", float(m[1] or m[2] or m[3]), unit="tokens")] if m else []


# "spec common_specu: adding speculative implementation 'draft-simple'"
# "common_speculative_impl_draft_mtp: adding speculative implementation 'draft-mtp'"
_SPEC_ADD = re.compile(r"adding speculative implementation '([^']+)'")
# "spec common_specu: - n_max=3, n_min=0, p_min=0.000000"
_SPEC_NMAX = re.compile(r"\bn_max=(\d+), n_min=")


@PARSER.on("speculative implementation", "n_max=")
def parse_spec(text: str) -> list[Fact]:
    m = _SPEC_ADD.search(text)
    if m:
        return [Fact("spec_type", value_text=m[1])]
    m = _SPEC_NMAX.search(text)
    return [Fact("spec_draft_n_max", float(m[1]), unit="tokens")] if m else []


@PARSER.on("no implementations specified for speculative decoding")
def parse_spec_none(text: str) -> list[Fact]:
    """The server says it runs without speculative decoding: spec_type = none."""
    return [Fact("spec_type", value_text="none")]


# "common_speculative_init_result: loading draft model '/models/draft.gguf'"
# older "srv    load_model: loading draft model '/models/draft.gguf'"; the 2024 builds and ik_llama.cpp
# name it as a field of the message instead: 'INFO [ load_model] loading draft model | tid="1" ...
# model="/models/draft.gguf"', and their JSON log as '"msg":"loading draft model",...,"model":"..."'
_DRAFT_MODEL = re.compile(r"""loading draft model(?: '([^']+)'|.{0,400}?\bmodel"?\s*[=:]\s*"((?:[^"\\]|\\.)+)")""")


@PARSER.on("loading draft model")
def parse_draft_model(text: str) -> list[Fact]:
    m = _DRAFT_MODEL.search(text)
    return [Fact("draft_model", value_text=m[1] or m[2])] if m else []


# "srv    load_model: [spec] estimated memory usage of MTP context is 2250.06 MiB"
_MTP_CTX = re.compile(r"memory usage of (?:MTP|draft) context is\s+([\d.]+) (MiB|GiB)")


@PARSER.on("context is")
def parse_draft_context(text: str) -> list[Fact]:
    m = _MTP_CTX.search(text)
    return [Fact("draft_context_mib", mib(m[1], m[2]), unit="MiB")] if m else []


# "srv    load_model: [mtmd] estimated worst-case memory usage of mmproj is 1161.02 MiB (took 3.10 ms)"
# earlier "srv    load_model: [mtmd] estimated memory usage of mmproj is 2447.80 MiB"
_MMPROJ = re.compile(r"memory usage of mmproj is\s+([\d.]+) (MiB|GiB)")


@PARSER.on("mmproj is")
def parse_projector(text: str) -> list[Fact]:
    m = _MMPROJ.search(text)
    return [Fact("projector_mib", mib(m[1], m[2]), unit="MiB")] if m else []


# "slot print_timing: id  0 | task 0 | draft acceptance = 0.00000 (    0 accepted /    87 generated), mean len =  1.00"
# older "draft acceptance rate = 0.57576 (  171 accepted /   297 generated)"
_ACCEPT = re.compile(r"draft acceptance(?: rate)? = ([\d.]+) \(\s*(\d+) accepted /\s*(\d+) generated\)")


@PARSER.on("draft acceptance")
def parse_draft_acceptance(text: str) -> list[Fact]:
    """value_num: the rate as printed; value_text: ``accepted/generated``."""
    m = _ACCEPT.search(text)
    return [Fact("draft_acceptance", float(m[1]), f"{m[2]}/{m[3]}", unit="ratio")] if m else []


# "CUDA error: an illegal memory access was encountered"; the line before it,
# ".../ggml-cuda.cu:88: CUDA error", names no cause and is not a fact. ggml's CUDA code built for AMD
# (HIP) or Moore Threads (MUSA) prints the same line under its platform's name ("ROCm error: invalid
# device function"): the same device error, stored as one with the platform named in its text.
_CUDA_ERROR = re.compile(r"\b(CUDA|ROCm|HIP|MUSA) error: (.+)")
# "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1412.77 MiB on device 0: cudaMalloc failed: out of memory"
_CUDA_MALLOC = re.compile(r"(cudaMalloc failed: .+)")


@PARSER.on("CUDA error: ", "ROCm error: ", "HIP error: ", "MUSA error: ", "cudaMalloc failed")
def parse_cuda_error(text: str) -> list[Fact]:
    """A device error (CUDA's text as printed; another platform's with its name first)."""
    m = _CUDA_ERROR.search(text)
    if m:
        cause = m[2].strip()
        return [Fact("cuda_error", value_text=cause if m[1] == "CUDA" else f"{m[1]} error: {cause}")]
    m = _CUDA_MALLOC.search(text)
    return [Fact("cuda_error", value_text=m[1].strip())] if m else []


# "ggml_metal_device_init: recommendedMaxWorkingSetSize  = 12713.12 MB": how much of an Apple GPU's
# unified memory Metal recommends for the process's GPU work. ggml-metal prints bytes / 1e6 (decimal MB).
_WORKING_SET = re.compile(r"recommendedMaxWorkingSetSize\s*=\s*([\d.]+) MB")


@PARSER.on("recommendedMaxWorkingSetSize")
def parse_metal_working_set(text: str) -> list[Fact]:
    m = _WORKING_SET.search(text)
    return [Fact("metal_working_set_mib", round(float(m[1]) * 1e6 / 2**20, 2), unit="MiB")] if m else []


@PARSER.on("model loaded")
def parse_load_seconds(text: str) -> list[Fact]:
    """The server's own load time: its log clock (since process start) at ``model loaded``.

    Only lines with llama.cpp's relative timestamp carry it; an untimed
    ``main: model loaded`` gives nothing rather than a guess.
    """
    if not text.rstrip().endswith("model loaded"):
        return []
    seconds = relative_seconds(text)
    return [Fact("load_seconds", seconds, unit="s")] if seconds is not None else []
