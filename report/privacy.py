"""Client addresses and user names are personal data, credentials are secrets: none reaches the published site.

:func:`public_text` is what every text on its way into a page goes through
(``report.mdsafe`` calls it for every foreign value, the public database
copy for every text value): addresses and the user name in home-folder
paths masked unless the author opted out with ``--show-client-addresses``,
credentials always removed (``daemon.redact``).

What counts as a home-folder path: ``/home/NAME``, ``/Users/NAME`` (macOS;
``/var/home/NAME`` too), ``C:\\Users\\NAME`` and ``C:/Users/NAME`` on any drive
(``Documents and Settings`` too), also with the doubled backslashes of JSON text
(however deep), a doubled separator, or %-encoded (``%2Fhome%2FNAME``). NAME becomes ``<user>``:
the rest of the path (which model, which log) stays readable. A log source
is published by its file name alone (:func:`source_name`): where on the
author's machine it was read from says nothing a reader needs.

What counts as an address: anything in the text that parses as an IPv4 or
IPv6 address, except loopback and the unspecified address (they name no
one's network). A version string shaped like an address (``1.2.3.4``) is
masked too: a masked version is better than a leaked address.

In short, ``privacy.py``: ``campaign_as_shown``: a frozen campaign text as a page
shows it and how many lines were masked (credentials; addresses and user names), so the Setup
section can say when what it shows is not what was hashed; masking of client addresses (log lines
included), of the user name in home-folder paths (``/home/NAME``, ``/Users/NAME``, ``C:\\Users\\NAME``
→ ``<user>``; same opt-out as addresses) and credentials before anything is published; a log source
is published by its file name (``source_name``)
"""

from __future__ import annotations

import ipaddress
import re

from cardproof.daemon.store.redact import redact_campaign_text, redact_secrets

# Dotted quads: not inside a longer run of digits and dots ("1.2.3.4.5" is a version, not an address).
_IPV4 = re.compile(r"(?<![\d.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?!\d|\.\d)")
# IPv6 candidates: a run of hex digits, colons and dots with at least two colons, not glued to a
# word ("std::vector" stays); whether it is an address is decided by ipaddress, not by the regex.
# Possessive: a megabyte of hex digits is scanned once, never backtracked into.
_IPV6 = re.compile(r"(?<![0-9A-Za-z_:.])[0-9A-Fa-f:.]++(?![G-Zg-z_])")


def mask_ip(address: str | None) -> str:
    """``192.168.1.5`` -> ``192.168.1.x``; IPv6 keeps its first three groups.

    Loopback stays readable (it names this machine, nobody's home network);
    anything that is not an address is masked whole.
    """
    if not address:
        return "—"
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return "x"
    if ip.is_loopback:
        return str(ip)
    if ip.version == 4:
        return ".".join(str(ip).split(".")[:3] + ["x"])
    return ":".join(ip.exploded.split(":")[:3]) + ":x"


def _keep(ip) -> bool:
    return ip.is_loopback or ip.is_unspecified


def _v6(m: re.Match) -> str:
    text = m.group(0)
    if text.count(":") < 2:
        return text
    # "addr:port", "addr." at the end of a sentence: try the run, then without its tail
    for cut in (text, text.rstrip(":."), text.rsplit(":", 1)[0]):
        if len(cut) > 45 or cut.count(":") < 2:
            continue
        try:
            ip = ipaddress.IPv6Address(cut)
        except ValueError:
            continue
        shown = str(ip) if _keep(ip) else mask_ip(cut)
        return shown + text[len(cut):]
    return text


# llama.cpp's log time (common/log.cpp: minutes, then seconds, milliseconds and microseconds zero-padded
# to 2, 3 and 3 digits) before its level letter: "0.00.001.000 I load_tensors: ..." is a time, no address
_LLAMA_TIME_TAIL = re.compile(r" [A-Z] ")


def _llama_time(m: re.Match) -> bool:
    g = m.groups()
    return len(g[1]) == 2 and len(g[2]) == 3 and len(g[3]) == 3 \
        and _LLAMA_TIME_TAIL.match(m.string, m.end()) is not None


def _v4(m: re.Match) -> str:
    octets = [int(g) for g in m.groups()]
    if any(o > 255 for o in octets):
        return m.group(0)  # "0.21.162.986": a version number, no address
    if _llama_time(m):
        return m.group(0)
    # leading zeros ("010.001.002.003") are still an address to a reader
    ip = ipaddress.IPv4Address(".".join(map(str, octets)))
    if _keep(ip):
        return m.group(0)
    return ".".join(m.groups()[:3]) + ".x"


def mask_addresses(text: str | None) -> str | None:
    """Every non-loopback IPv4/IPv6 address in ``text`` masked as :func:`mask_ip` does, the rest of
    the text unchanged (``client 192.168.1.5:51234 POST`` -> ``client 192.168.1.x:51234 POST``)."""
    if not text:
        return text
    if ":" in text:
        text = _IPV6.sub(_v6, text)
    if "." in text:
        text = _IPV4.sub(_v4, text)
    return text


# the user's own folder: POSIX /home and macOS /Users (case as written: a URL's /users/42 is no home), and
# Windows' \Users (or XP's \Documents and Settings) on a drive or with backslashes (any case), JSON's doubled
# backslashes included, however often a text was JSON-encoded (a tool call's arguments inside an answer
# hold four), and a separator written twice (/home//alice). A Windows name may hold blanks
# ("C:\Users\Carol Smith\..."): up to the next separator where one follows. The same folders %-encoded, as
# a URL's query or a file:// link writes them (%2Fhome%2Falice, C%3A%5CUsers%5Cbob).
_NAME = r"[^\\/\s\"'`<>|:*?,;()\[\]{}]+"
_WINDOWS_HOME = r"(?i:users|documents and settings)"
_PCT_SEP = r"(?:%2[Ff]|%5[Cc])"
_HOME = re.compile(r"(?P<posix>/home/+|/Users/+)(" + _NAME + r")"
                   r"|(?P<windows>(?:\b[A-Za-z]:)?\\+" + _WINDOWS_HOME + r"\\+|\b[A-Za-z]:/+" + _WINDOWS_HOME + r"/+)"
                   r"([^\\/:*?\"<>|\r\n\t]{1,64}?(?=[\\/])|" + _NAME + ")"
                   r"|(?P<encoded>%2[Ff](?:home|Users)%2[Ff]"
                   r"|(?:\b[A-Za-z](?::|%3[Aa]))?" + _PCT_SEP + _WINDOWS_HOME + _PCT_SEP + ")"
                   r"((?:(?!" + _PCT_SEP + r")[^\\/\s\"'`<>|:*?,;()\[\]{}&=#])+)")
_MAYBE_HOME = re.compile(r"ome/|ome%2|sers|SERS|ettings|ETTINGS")
USER = "<user>"


def mask_home(text: str | None) -> str | None:
    """The user name in every home-folder path of ``text`` as ``<user>``
    (``/home/alice/models/x.gguf`` -> ``/home/<user>/models/x.gguf``)."""
    if not text or not _MAYBE_HOME.search(text):
        return text  # most texts name no home folder: one scan for a fragment decides
    return _HOME.sub(lambda m: (m["posix"] or m["windows"] or m["encoded"]) + USER, text)


def source_name(name: str | None) -> str | None:
    """A log source as published: its file's name without the folders (a unit name stays as it is)."""
    if not name:
        return name
    tail = re.split(r"[\\/]", name.split("?")[0].rstrip("/\\"))[-1]
    return tail or name


def public_text(text: str | None, *, show_addresses: bool = False) -> str | None:
    """``text`` as it may be published: credentials removed, addresses and home folders' user names masked
    unless opted out."""
    if not text:
        return text
    text = redact_secrets(text)
    return text if show_addresses else mask_home(mask_addresses(text))


def campaign_as_shown(text: str | None, *, show_addresses: bool = False) -> dict:
    """A frozen campaign text as a page shows it, and what was masked on the way.

    Only what must not be published is changed: credentials (``redact_campaign_text``: a secret-named
    key's value, a credential flag with its value, a bearer token, a key's shape, a server table's key
    not known to be public) and, unless opted out, addresses and home folders' user names. ``text`` is
    the shown text; ``secret_lines`` and ``personal_lines`` count the lines each kind changed, so a page
    can say that what it shows is not byte for byte what was hashed.
    """
    text = text or ""
    secrets_out = redact_campaign_text(text) or ""
    shown = secrets_out if show_addresses else (mask_home(mask_addresses(secrets_out)) or "")

    def changed(a: str, b: str) -> int:
        return sum(1 for x, y in zip(a.split("\n"), b.split("\n")) if x != y)

    return {"text": shown, "secret_lines": changed(text, secrets_out), "personal_lines": changed(secrets_out, shown),
            "exact": shown == text}


def requests_by_client(db, run_id: int, *, show_addresses: bool = False) -> list[dict]:
    """Requests seen during the run per client address (masked unless the user opted out)."""
    if "requests_seen" not in db.table_names():
        return []
    rows = list(db.query(
        """select client, count(*) as n, min(ts) as first_ts, max(ts) as last_ts,
                  group_concat(distinct method || ' ' || path) as paths
           from requests_seen where run_id = ? group by client order by n desc""", [run_id]))
    for r in rows:
        r["shown"] = r["client"] if show_addresses else mask_ip(r["client"])
    return rows
