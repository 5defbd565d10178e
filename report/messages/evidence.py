"""German for the log-evidence section (report/templates/sections/evidence_logs.md.j2)."""

MESSAGES: dict[str, str] = {
    "Server log": "Server-Protokoll",
    "No server log was captured for this run.": "Für diesen Lauf wurde kein Server-Protokoll erfasst.",
    "Every line is stored as the server wrote it and belongs to one model load, proven by the router port, "
    "the process ID or explicit start and exit lines; never by time. Lines that cannot be proven to belong "
    "to a load are listed as unattributed.":
    "Jede Zeile ist so gespeichert, wie der Server sie schrieb, und gehört zu genau einem Ladevorgang – belegt "
    "durch den Router-Port, die Prozess-ID oder ausdrückliche Start- und Endzeilen, nie durch die Uhrzeit. "
    "Zeilen, deren Zugehörigkeit sich nicht belegen lässt, stehen als nicht zugeordnet da.",
    "lines": "Zeilen",
    "loads": "Ladevorgänge",
    "unattributed": "nicht zugeordnet",
    "Gap in capture": "Lücke in der Erfassung",
    "load": "Ladevorgang",
    "port": "Port",
    "Fact": "Befund",
    "Device": "Gerät",
    "Value": "Wert",
    "requests": "Anfragen",
    "No fact was found in the lines of this load.": "In den Zeilen dieses Ladevorgangs fand sich kein Befund.",
    "Speculative decoding, as the server logged it": "Spekulatives Dekodieren, wie der Server es protokollierte",
    "All lines of this load": "Alle Zeilen dieses Ladevorgangs",
    "Lines of load": "Zeilen von Ladevorgang",
    "more lines of this load are in the database (table log_lines).":
    "weitere Zeilen dieses Ladevorgangs stehen in der Datenbank (Tabelle log_lines).",
    "Unattributed lines": "Nicht zugeordnete Zeilen",
}
