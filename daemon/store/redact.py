"""Credentials never leave the machine in text meant for display.

A server URL may carry a login (``http://user:password@host``: httpx sends
it as Basic auth), a campaign or an old database may hold an API key, and a
server's command line may name one (``--api-key ...``). The capture side
stores texts for display (error texts, ``runs.server_url``) through
:func:`strip_userinfo`; the report passes every published text through
:func:`redact_secrets` as well, because old and merged databases hold
whatever they were given.

In short, ``redact.py``: logins in URLs, API keys and tokens removed from anything
stored for display; a credential flag counts only standing on its own with its value (``--api-key
X``), so prose such as "8,192-token training context" is left alone
"""

from __future__ import annotations

import re

#: ``scheme://userinfo@``: the authority ends at the first ``/ ? #``, white space or quote; the
#: userinfo at the last ``@`` before that (a password may itself contain ``@``).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/?#\s\"'<>`]*@")

MASK = "***"

#: Key names whose values are secrets wherever they appear (TOML, JSON, query strings, headers, logs).
#: The name must end there ("api_key_env" names a variable and stays; "n_tokens" is a count).
_SECRET_NAME = re.compile(r"(?i)(?:api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key"
                          r"|client[_\-]?secret|secret|password|passwd|pwd|token|authorization|credentials?|cookie)$")
# Every "name = value" / "name: value" pair; whether the name is a secret's is decided per match
# (one pass over the words, instead of trying each secret name at every word).
_KEY_VALUE = re.compile(
    r"(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]++)"                            # the key
    r"(\"|')?(\s*[:=]\s*)"                                               # its separator
    r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s&,;\"'<>`]+)")                          # the value
#: ``--api-key VALUE`` / ``--hf-token=VALUE`` on a logged command line: a flag stands on its own (after a
#: blank, a quote, a bracket or a comma), so prose such as "8,192-token training context" is no flag.
_FLAG = re.compile(r"(?i)(?<![^\s\"'\[,(])(--?(?:api[_\-]?key|hf[_\-]?token|token|password|secret)(?:[_\-]file)?)"
                   r"(=|\s+)(\S+)")
#: ``Bearer abc...`` after any key name, or standing alone in a log line; ``Basic`` only before
#: something base64-like, so that prose ("basic information") stays.
_SCHEME_TOKEN = re.compile(r"(?i)\b(bearer)(\s+)([A-Za-z0-9._~+/=\-]{6,})"
                           r"|\b(Basic)(\s+)((?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{6,}={0,2})")
#: A bare "token" key is often a tokenizer's ("EOS token = 2 '</s>'"): only a value that looks
#: like a credential is masked there; these prefixes make it an auth token whatever its value.
_AUTH_TOKEN = re.compile(r"(?i)(?:access|auth|api|bearer|refresh|id|session|hf|github|gh|bot|secret|csrf)[_\-]?token$")
_CREDENTIAL_LIKE = re.compile(r"[A-Za-z0-9._~+/=\-]{12,}")
#: Well-known key shapes, caught even without a key name beside them.
_KEY_SHAPES = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}|\bhf_[A-Za-z0-9]{20,}|\bgh[pousr]_[A-Za-z0-9]{20,}"
                         r"|\bAKIA[0-9A-Z]{16}\b")
_NUMBER = re.compile(r"[+\-]?\d+(?:\.\d+)?")


def strip_userinfo(text: str | None) -> str | None:
    """Every ``scheme://user:password@`` in ``text`` without its ``user:password@``."""
    if not text or "@" not in text or "://" not in text:
        return text
    return _USERINFO.sub(r"\1", text)


def public_url(url: str | None) -> str | None:
    """A server URL as it may be stored for display: no userinfo."""
    return strip_userinfo(url)


def _key_value(m: re.Match) -> str:
    if not _SECRET_NAME.search(m.group(1)):
        return m.group(0)
    value = m.group(4)
    bare = value.strip("\"'")
    # a count or a flag next to a secret-sounding name ("EOS token = 2") is not a secret
    if not bare or _NUMBER.fullmatch(bare) or bare.lower() in ("true", "false", "none", "null"):
        return m.group(0)
    key = m.group(1).lower()
    if key.endswith("token") and not _AUTH_TOKEN.search(key) and not _CREDENTIAL_LIKE.fullmatch(bare):
        return m.group(0)
    quote = value[0] if value[0] in "\"'" and value[-1] == value[0] and len(value) > 1 else ""
    return f"{m.group(1)}{m.group(2) or ''}{m.group(3)}{quote}{MASK}{quote}"


def redact_secrets(text: str | None) -> str | None:
    """``text`` with credentials replaced by ``***``: userinfo in URLs, values of secret-named keys,
    ``--api-key`` style flags, ``Bearer`` tokens and well-known key shapes (``sk-...``, ``hf_...``)."""
    if not text:
        return text
    text = strip_userinfo(text)
    text = _SCHEME_TOKEN.sub(lambda m: f"{m.group(1) or m.group(4)}{m.group(2) or m.group(5)}{MASK}", text)
    text = _FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _KEY_VALUE.sub(_key_value, text)
    return _KEY_SHAPES.sub(MASK, text)


#: Keys of ``[server]``/``[embedding]`` that hold no secret. Any other key there (an ``api_key``
#: from an older cardproof or a merged database, a header) has its value masked when shown.
PUBLIC_SERVER_KEYS = frozenset({"backend", "url", "request_timeout_s", "log_file", "journal_unit", "num_ctx",
                                "api_key_env", "model"})
_TOML_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]*?)\s*\]\]?\s*(?:#.*)?$")
_TOML_ASSIGN = re.compile(r"^(\s*)([A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*')(\s*=\s*)(.*)$")


def redact_campaign_text(text: str | None) -> str | None:
    """A frozen campaign file as it may be shown: :func:`redact_secrets`, and in the server tables
    the value of every key not known to be public replaced by ``"***"`` (line by line; the file's
    layout and comments stay, so it still reads as the file that ran)."""
    if not text:
        return text
    table = ""
    out = []
    for line in text.split("\n"):
        m = _TOML_TABLE.match(line)
        if m:
            table = m.group(1).replace(" ", "").replace('"', "").lower()
        else:
            a = _TOML_ASSIGN.match(line)
            in_server = table.split(".")[0] in ("server", "embedding")
            if a and in_server and a.group(2).strip("\"'").lower() not in PUBLIC_SERVER_KEYS:
                line = f'{a.group(1)}{a.group(2)}{a.group(3)}"{MASK}"'
        out.append(line)
    return redact_secrets("\n".join(out))
