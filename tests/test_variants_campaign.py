"""``[variants]`` in a campaign: named sets and crossed axes, and every refusal with its reason and key."""

from __future__ import annotations

import pytest

from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from cardproof.daemon.run.variants.run import planned_samples


def campaign(variants: str, *, backend: str = "llama-server", rules: str = "", classes='["short", "long"]') -> str:
    return f"""
[campaign]
name = "v"
prompt_classes = {classes}
repetitions = 3
max_tokens = 16

[server]
backend = "{backend}"
url = "http://127.0.0.1:9"

[[models]]
name = "a"

[[models]]
name = "b"
pinned = true

[variants]
{variants}
{rules}
"""


def refused(text: str) -> CampaignError:
    with pytest.raises(CampaignError) as err:
        parse_campaign(text, "c.toml")
    return err.value


def test_sets_then_the_crossed_axes_each_named_for_its_values():
    camp = parse_campaign(campaign('models = ["a"]\nthreads = [1, 2]\ncache_type = ["f16", "q8_0"]\n'
                                   'prompt_classes = ["long"]\nrepetitions = 2\n'
                                   '[variants.sets]\nfa = ["-fa", "on"]\n'))
    plan = camp.sections["variants"].plan(("a", "b"))
    assert [(m, v.name) for m, v in plan] == [("a", "fa"), ("a", "t1_kvf16"), ("a", "t1_kvq8_0"), ("a", "t2_kvf16"),
                                              ("a", "t2_kvq8_0")]
    assert plan[2][1].args == ("--threads", "1", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0")
    assert plan[2][1].settings == (("threads", 1), ("cache_type", "q8_0"))
    # 5 variants x 1 class x 2 repetitions on top of 2 models x 2 classes x 3
    assert planned_samples(camp) == 10


def test_every_model_by_default_and_the_other_axes():
    camp = parse_campaign(campaign("flash_attn = [false, true]\nubatch = [128]\nbatch = [256]\ngpu_layers = [0]\n"
                                   "n_cpu_moe = [2]\nctx_size = [8192]\n"))
    plan = camp.sections["variants"].plan(("a", "b"))
    assert {m for m, _ in plan} == {"a", "b"}
    assert [v.name for _, v in plan[:2]] == ["faoff_ub128_b256_ngl0_cmoe2_c8192", "faon_ub128_b256_ngl0_cmoe2_c8192"]
    assert planned_samples(camp) == 2 * 2 * 2 * 3


@pytest.mark.parametrize("variants, key, words", [
    ('[variants.sets]\nx = ["-m", "other.gguf"]', "variants.sets.x[0]", "set by cardproof"),
    ('[variants.sets]\nx = ["--port=1"]', "variants.sets.x[0]", "set by cardproof"),
    ('[variants.sets]\nx = ["-lv", "1"]', "variants.sets.x[0]", "variant's evidence"),
    ('[variants.sets]\nx = ["q8_0"]', "variants.sets.x[0]", "follows no flag"),
    ('[variants.sets]\nx = ["-fa", "yes"]', "variants.sets.x[0]", "on, off or auto"),
    ('[variants.sets]\nx = ["-t", "1", "-ctk", "q9"]', "variants.sets.x[2]", "f16"),
    ('[variants.sets]\nx = ["-t", "two"]', "variants.sets.x[0]", "whole number"),
    ('[variants.sets]\nx = ["-t"]', "variants.sets.x[0]", "needs a value"),
    ('[variants.sets]\nx = ["-cmoe", "2"]', "variants.sets.x[0]", "takes no value"),
    ('[variants.sets]\nx = ["-ngl", "most"]', "variants.sets.x[0]", "whole number"),
    ('[variants.sets]\n"kv-8" = ["-t", "1"]', "variants.sets.kv-8", "read in rules"),
    ('threads = [1]\n[variants.sets]\nt1 = ["-t", "1"]', "variants.sets.t1", "both a set and"),
    ('cache_type = ["q3"]', "variants.cache_type[0]", "q8_0"),
    ('threads = [1, 1]', "variants.threads[1]", "listed twice"),
    ('models = ["c"]\nthreads = [1]', "variants.models[0]", "unknown model"),
    ('prompt_classes = ["medium"]\nthreads = [1]', "variants.prompt_classes[0]", "same cells"),
    ('ctx_size = [64]', "variants.ctx_size[0]", "cannot hold"),
    ('repetitions = 3', "variants.sets", "expected an axis"),
    ('threads = [1, 2, 3, 4, 5, 6]\nubatch = [1, 2, 3, 4, 5, 6]', "variants.sets", "at most 32"),
])
def test_a_variant_the_server_cannot_or_must_not_take_is_refused(variants, key, words):
    err = refused(campaign(variants))
    assert f"'{key}'" in str(err) and words in str(err), str(err)


def test_the_spellings_other_builds_take_are_variants_too():
    """A bare -fa (the switch of builds before 2025-08), -ngl all/auto (builds from 2025-12), --cpu-moe."""
    camp = parse_campaign(campaign('[variants.sets]\nold = ["-fa", "-t", "1"]\nall = ["-ngl", "all", "-cmoe"]\n'))
    plan = camp.sections["variants"].plan(("a",))
    assert [v.args for _, v in plan] == [("-fa", "-t", "1"), ("-ngl", "all", "-cmoe")]


def test_a_variants_name_may_not_take_a_campaign_models():
    text = campaign('[variants.sets]\nt1 = ["-t", "1"]').replace('name = "b"', 'name = "a~t1"')
    assert "already a model of the campaign" in str(refused(text))


def test_backends_that_cannot_vary_a_setting_refuse_with_the_reason():
    err = refused(campaign("threads = [1]", backend="openai"))
    assert "cannot run variants" in str(err) and "API only" in str(err)
    for axis, words in (('cache_type = ["q8_0"]', "OLLAMA_KV_CACHE_TYPE"),
                        ("flash_attn = [true]", "OLLAMA_FLASH_ATTENTION"),
                        ("ubatch = [128]", "physical batch"), ("n_cpu_moe = [2]", "experts")):
        err = refused(campaign(axis, backend="ollama"))
        assert words in str(err) and f"'variants.{axis.split(' ')[0]}'" in str(err), str(err)
    err = refused(campaign('[variants.sets]\not = ["-ot", "exps=CPU"]', backend="ollama"))
    assert "'variants.sets.ot'" in str(err) and "tensor overrides" in str(err)
    ok = parse_campaign(campaign("threads = [1]\nbatch = [256]\ngpu_layers = [0]\nctx_size = [8192]", backend="ollama"))
    assert len(ok.sections["variants"].variants()) == 1


def test_rules_read_a_variants_figures_by_its_name():
    camp = parse_campaign(campaign('prompt_classes = ["long"]\n[variants.sets]\nkv8 = ["-ctk", "q8_0"]',
                                   rules="[rules]\nr = 'variant.kv8.decode.long >= decode.long and "
                                         "variant.kv8.kv_cache_type_k == \"q8_0\" and variant.kv8.n_threads >= 1'"))
    assert "variant.kv8.decode.long" in camp.rules["r"]
    for rule, words in (("variant.kv9.decode.long > 1", "names no variant 'kv9'"),
                        ("variant.kv8.decode.short > 1", "no probes or load steps"),
                        ("variant.kv8.probe.tools == 'PASS'", "no probes or load steps")):
        err = refused(campaign('prompt_classes = ["long"]\n[variants.sets]\nkv8 = ["-ctk", "q8_0"]',
                               rules=f"[rules]\nr = \"{rule}\""))
        assert words in str(err), str(err)
