from cardproof.daemon.server.prompts import PROMPT_CLASSES, build_prompt, new_nonce


def test_prompts_open_with_nonce_and_scale():
    n1, n2 = new_nonce(), new_nonce()
    assert n1 != n2
    short = build_prompt(PROMPT_CLASSES["short"], n1)
    long = build_prompt(PROMPT_CLASSES["long"], n1)
    assert short.startswith(f"Request {n1}.")
    # sized in words at ~1.3 tokens a word
    assert 25 <= len(short.split()) <= 35
    assert 3500 <= len(long.split()) <= 3800
    assert build_prompt(40, n2) != short
