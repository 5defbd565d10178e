"""Client addresses are masked everywhere they are published, credentials are never stored for display.

The masking of free text (log lines, error texts) is checked on its own;
the capture side against the real llama-server with a login in its URL
(llama-server without ``--api-key`` ignores the Basic header httpx sends), and
against a closed loopback port for the error text of a failed request.
"""

from __future__ import annotations

import httpx
import pytest

from cardproof.daemon.backends.base import BackendError
from cardproof.daemon.backends.http import make_client, request_json
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.store.redact import public_url, redact_campaign_text, redact_secrets, strip_userinfo
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import write_articles
from cardproof.report.evidence import run_evidence
from cardproof.report.privacy import mask_addresses, public_text
from conftest import campaign_text


@pytest.mark.parametrize("raw, shown", [
    ("GIN | 200 | 1.2ms | 192.168.1.5 | POST /api/chat", "GIN | 200 | 1.2ms | 192.168.1.x | POST /api/chat"),
    ("request: POST /completion 10.0.0.7 200", "request: POST /completion 10.0.0.x 200"),
    ("client 192.168.1.5:51234 left.", "client 192.168.1.x:51234 left."),
    ("from 010.001.002.003", "from 010.001.002.x"),  # leading zeros: still somebody's address
    ("peer=[2001:db8:85a3::8a2e:370:7334]:443", "peer=[2001:0db8:85a3:x]:443"),
    ("fe80::1%eth0 up", "fe80:0000:0000:x%eth0 up"),
    ("::ffff:192.168.1.5 connected", "0000:0000:0000:x connected"),
    ("2a02:8108:4c0:77::13, next", "2a02:8108:04c0:x, next"),
    ("listening on 127.0.0.1:8080 and [::1]:8080 and 0.0.0.0:11434", None),  # this machine, nobody's network
    ("build 0.21.162.986, version 1.2.3.4.5, at 12:00:00, 2025-08-07T18:27:18+00:00", None),  # no addresses
    ("std::vector<int> and a::b::c", None),
    # llama.cpp's log time before its level letter (-lv 4 / --log-timestamps): a time, never an address
    ("[59103] 0.00.001.000 I llama_model_loader: - kv   1: general.name str = tiny", None),
    ("0.12.250.100 W srv  update_slots: all slots are idle", None),
    # the same shape without a level letter after it is still masked: nothing says it is a time
    ("peer 0.12.250.100 gone", "peer 0.12.250.x gone"),
    ("0.12.250.100 I from 192.168.1.5", "0.12.250.100 I from 192.168.1.x"),
])
def test_addresses_in_free_text_are_masked_and_the_line_stays_recognisable(raw, shown):
    assert mask_addresses(raw) == (raw if shown is None else shown)


def test_a_version_shaped_like_an_address_is_masked_rather_than_an_address_leaked():
    assert mask_addresses("llama.cpp 1.2.3.4") == "llama.cpp 1.2.3.x"


@pytest.mark.parametrize("raw, shown", [
    ("http://user:pa@ss@host:8080/v1", "http://host:8080/v1"),
    ('url = "https://me:secret@example.org"', 'url = "https://example.org"'),
    ("GET http://u:p@10.1.2.3:80/models: refused", "GET http://10.1.2.3:80/models: refused"),
    ("mailto-like a@b and http://host/@user", None),  # an @ in a path is not a login
])
def test_userinfo_is_stripped_from_every_url(raw, shown):
    assert strip_userinfo(raw) == (raw if shown is None else shown)


@pytest.mark.parametrize("raw, shown", [
    ('api_key = "sk-abcdefghijklmnopqrstu"', 'api_key = "***"'),
    ('{"Authorization": "Bearer abc.def-123456"}', '{"Authorization": "***"}'),
    ("Authorization: Bearer abcdef123456", "Authorization: *** ***"),
    ("--api-key s3cr3t --port 8080", "--api-key *** --port 8080"),
    ("GET /v1/models?api_key=abc123&x=1", "GET /v1/models?api_key=***&x=1"),
    ('password = "hunter2"', 'password = "***"'),
    ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwx", "HF_TOKEN=***"),
    ("key sk-proj-abcdefghijklmnopqrstuvwxyz in text", "key *** in text"),
    # counts and tokenizer facts next to secret-sounding words stay
    ("print_info: EOS token = 2 '</s>'", None),
    ("n_tokens = 512, max_tokens = 8, prompt_tokens: 40", None),
    ('api_key_env = "OPENAI_API_KEY"', None),
    ("basic information about the token budget", None),
])
def test_secrets_are_redacted_and_ordinary_text_stays(raw, shown):
    assert redact_secrets(raw) == (raw if shown is None else shown)


def test_campaign_text_shows_no_value_of_an_unknown_server_key():
    text = """[campaign]
name = "x"  # api_key = "sk-in-a-comment-abcdefghijkl"

[server]
backend = "openai"
url = "http://admin:pw@192.168.1.20:8080"
api_key = "plain-secret-value"
"X-Custom-Header" = "also secret"
api_key_env = "OPENAI_KEY"

[server.headers]
Authorization = "Basic dXNlcjpwYXNz"

[[models]]
name = "m"
"""
    out = redact_campaign_text(text)
    for secret in ("sk-in-a-comment", "plain-secret-value", "also secret", "dXNlcjpwYXNz", "admin", ":pw@"):
        assert secret not in out, secret
    assert 'api_key_env = "OPENAI_KEY"' in out and 'backend = "openai"' in out and 'name = "m"' in out
    assert out.count("\n") == text.count("\n")  # line for line the file that ran
    assert "192.168.1.x" in public_text(out) and "192.168.1.20" in public_text(out, show_addresses=True)


def test_backend_errors_never_carry_the_login_of_the_url():
    assert BackendError("http", "GET http://u:pw@h:1/x: HTTP 500").text == "GET http://h:1/x: HTTP 500"
    client = make_client("http://admin:hunter2@127.0.0.1:9", 2.0)  # a closed port: a real refused connection
    with pytest.raises(BackendError) as err:
        request_json(client, "GET", "/models")
    assert err.value.kind == "connection" and "hunter2" not in str(err.value) and "admin" not in err.value.text
    assert "127.0.0.1:9/models" in err.value.text


def test_a_login_in_the_server_url_is_stored_for_display_without_it(fresh_server, tmp_path):
    # a server of its own: with the session's server, the model may have been
    # loaded by an earlier test, and a load that began before the run is not
    # among the run's published loads
    llama_server = fresh_server
    url = llama_server.url.replace("http://", "http://admin:hunter2@")
    assert httpx.get(url + "/health", timeout=10).status_code == 200  # the server ignores the Basic header
    db = tmp_path / "u.db"
    store = open_store(db)
    text = campaign_text(url, reps=1, max_tokens=4).replace(
        "request_timeout_s = 60", f'request_timeout_s = 60\nlog_file = "{llama_server.log_path}"')
    run_id = run_campaign(store, parse_campaign(text, "u.toml"), echo=lambda s: None).run_id
    row = store.db.execute("select server_url, status from runs where id = ?", [run_id]).fetchone()
    assert row == (public_url(url), "completed") and "hunter2" not in row[0]
    # the frozen file is evidence and keeps what was run; it is the article that must not show it
    assert "admin:hunter2@" in store.db.execute("select toml_text from campaigns").fetchone()[0]
    # lines the published evidence prints (the session's server log may hold
    # other tests' loads before this run's, which the article does not show)
    evidence = run_evidence(store.db, run_id)
    shown = [ln["id"] for ld in evidence["loads"] for ln in ld["shown"]] + \
        [ln["id"] for ln in evidence["unattributed"]["shown"]]
    assert len(shown) >= 2, "the server log was captured and its lines are published"
    lines = [(shown[0],), (shown[-1],)]
    # a recorded access line as a LAN client would leave it, and one with the login in it
    store.db.execute("update log_lines set raw = ? where id = ?",
                     ["srv  log_server_r: request: POST /v1/chat/completions 192.168.1.23 200", lines[0][0]])
    store.db.execute("update log_lines set raw = ? where id = ?",
                     [f"main: connecting to {url} from [2001:db8:1:2::42]:5555", lines[-1][0]])
    store.db.conn.commit()
    store.close()
    project = tmp_path / "proj"
    write_articles(db, project)
    def published(lang: str) -> str:
        """The run's article and any page of its own beside it (its evidence page)."""
        runs = project / "site" / "runs"
        return "\n".join(p.read_text() for p in sorted([*runs.glob(f"run-{run_id}.*md"), *runs.glob(f"run-{run_id}-*.md")])
                         if (lang == ".de") == p.name.endswith(".de.md"))

    for lang in ("", ".de"):
        md = published(lang)
        assert "hunter2" not in md and "192.168.1.23" not in md and "2001:db8:1:2::42" not in md
        assert "POST /v1/chat/completions 192\\.168\\.1\\.x 200" in md or "completions 192.168.1.x 200" in md
        assert "2001:0db8:0001:x" in md
    write_articles(db, project, show_addresses=True)
    md = published("")
    assert "192.168.1.23" in md and "2001:db8:1:2::42" in md and "hunter2" not in md  # addresses only
