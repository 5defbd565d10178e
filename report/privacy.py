"""Client addresses from access logs are personal data: masked when published."""

from __future__ import annotations

import ipaddress


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
