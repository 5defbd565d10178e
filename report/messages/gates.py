"""German for the gates section."""

from cardproof.daemon.gates import GATES

MESSAGES: dict[str, str] = {
    "Gates": "Gates",
    "gates fired": "ausgelöste Gates",
    "Requests from other clients": "Anfragen anderer Clients",
    "client": "Client",
    "requests": "Anfragen",
    "first": "erste",
    "last": "letzte",
    "what": "was",
    "Addresses are masked in the published site unless the author opted out.":
    "Adressen sind in der veröffentlichten Seite maskiert, sofern der Autor nicht widersprochen hat.",
    "No access log entries were captured for this run, so requests are known only from the server's token counters (see foreign_load).":
    "Für diesen Lauf wurden keine Zugriffslog-Einträge erfasst; Anfragen sind nur aus den Token-Zählern des Servers bekannt (siehe foreign_load).",
    "Gate": "Gate",
    "checks": "prüft",
    "fired": "ausgelöst",
    "not_fired": "nicht ausgelöst",
    "recorded": "aufgezeichnet",
    "not_run": "nicht gelaufen",
    "threshold": "Schwelle",
    "effect": "Wirkung",
    "canary": "Kanarienvogel",
    "excludes": "schließt aus",
    "counts only": "zählt nur",
    "excluded": "ausgeschlossen",
    "not observable": "nicht beobachtbar",
    "Every answered sample went through every gate. A gate marked \"excludes\" keeps the sample as evidence but leaves it out of the medians; \"counts only\" reports it and leaves the sample in.":
    "Jede beantwortete Messung lief durch jedes Gate. Ein Gate mit „schließt aus“ behält die Messung als Beleg, lässt sie aber aus den Medianen heraus; „zählt nur“ meldet sie und lässt die Messung drin.",
    "Where gates fired": "Wo Gates ausgelöst haben",
    "Gates that never fired in this run": "Gates, die in diesem Lauf nie ausgelöst haben",
    "unproven: this gate was never seen to fire, so its silence proves nothing":
    "unbewiesen: dieses Gate wurde nie auslösend gesehen, sein Schweigen beweist also nichts",
    "Every gate fired at least once during measurement.": "Jedes Gate hat während der Messung mindestens einmal ausgelöst.",
    "Canary samples": "Kanarienvogel-Messungen",
    "Not on the card": "Nicht auf der Karte",
    "not_on_card fired on every sample: these numbers were not measured on a GPU.":
    "not_on_card hat bei jeder Messung ausgelöst: diese Zahlen wurden nicht auf einer GPU gemessen.",
    "Observed:": "Beobachtet:",
    "see the gate results in the evidence appendix.": "siehe die Gate-Ergebnisse im Belegteil.",
    "samples were kept as evidence but left out of the medians because an excluding gate fired on them:":
    "Messungen wurden als Beleg behalten, aber aus den Medianen gelassen, weil ein ausschließendes Gate bei ihnen ausgelöst hat:",
    "Capability probes are not run yet; this article does not claim anything about tool use, reasoning quality or coding.":
    "Fähigkeitsproben laufen noch nicht; dieser Artikel behauptet nichts über Werkzeugnutzung, Qualität des Reasoning oder Programmieren.",
    # each gate's own description, in both languages, from its module (daemon/gates/<name>.py)
    **{g.description: g.description_de for g in GATES.values()},
}
