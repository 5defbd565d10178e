"""German for contradictions and author's notes."""

MESSAGES: dict[str, str] = {
    "Open contradictions": "Offene Widersprüche",
    "Two measurements disagree; neither side is dropped until someone resolves it.":
    "Zwei Messungen widersprechen sich; keine Seite wird verworfen, bis jemand den Widerspruch auflöst.",
    "detected from the data": "aus den Daten erkannt",
    "written by the author": "vom Autor eingetragen",
    "None: no detector found two measurements that disagree, and no author recorded one.":
    "Keine: kein Detektor fand zwei Messungen, die sich widersprechen, und kein Autor hat einen eingetragen.",
    "Resolved contradictions": "Aufgelöste Widersprüche",
    "memory": "Speicher",
}
