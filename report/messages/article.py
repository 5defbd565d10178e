"""German for the run article's findings: stable cells, measurable differences, the headline, the lead."""

MESSAGES: dict[str, str] = {
    "stable": "stabil",
    "unstable": "instabil",
    "switched on": "an",
    "switched off": "aus",
    "Unstable cells": "Instabile Zellen",
    "In {n} cells the fastest sample was more than {limit} times the slowest: {cells}. They are "
    "marked in the tables and charts, and no headline, ratio or rule is stated from them.":
    "In {n} Zellen war die schnellste Messung mehr als {limit}-mal so schnell wie die langsamste: {cells}. "
    "Sie sind in Tabellen und Diagrammen markiert; kein Ergebnis, kein Verhältnis und keine Regel wird aus "
    "ihnen abgeleitet.",
    "Decode and prefill in tokens per second: the median over the valid samples of each cell, below it "
    "min–max and n. Load: seconds until the server reported the model ready, over the measured loads only "
    "(no canary or probe load).":
    "Decode und Prefill in Token pro Sekunde: der Median über die gültigen Messungen jeder Zelle, darunter "
    "Min–Max und n. Laden: Sekunden, bis der Server das Modell als bereit meldete, nur über die gemessenen "
    "Ladevorgänge (kein Kanarien- oder Prüf-Ladevorgang).",
    "Marked unstable: the fastest sample is more than {limit} times the slowest; no finding is stated from "
    "such a cell.":
    "Als instabil markiert: Die schnellste Messung ist mehr als {limit}-mal so schnell wie die langsamste; aus "
    "einer solchen Zelle wird kein Ergebnis abgeleitet.",
    "is the fastest on every prompt class, against": "ist in jeder Prompt-Klasse am schnellsten, gegenüber",
    "ratio of decode medians; in brackets the range over all sample pairs.":
    "Verhältnis der Decode-Mediane; in Klammern die Spanne über alle Messpaare.",
    "no measurable difference between": "kein messbarer Unterschied zwischen",
    "their ranges overlap": "ihre Spannen überlappen",
    "Decode tokens per second, medians; × is the ratio of medians, in brackets the range over all sample pairs.":
    "Decode in Token pro Sekunde, Mediane; × ist das Verhältnis der Mediane, in Klammern die Spanne über "
    "alle Messpaare.",
    "Left out as unstable:": "Als instabil ausgelassen:",
    "No headline: no prompt class has stable cells to compare (stable: the fastest decode sample is at most "
    "{limit} times the slowest). The table shows every median, marked where it is unstable.":
        "Kein Ergebnis in einem Satz: Keine Prompt-Klasse hat stabile Zellen zum Vergleich (stabil: die schnellste "
        "Decode-Messung ist höchstens {limit}-mal so schnell wie die langsamste). Die Tabelle zeigt jeden Median, "
        "instabile markiert.",
    "no measurable difference": "kein messbarer Unterschied",
    "Not shown as an effect:": "Nicht als Effekt gezeigt:",
    "the reasoning switch did not take": "der Reasoning-Schalter griff nicht",
    "How fast does each model decode and read prompts on this server, and how far apart are they?":
    "Wie schnell decodiert jedes Modell auf diesem Server und liest Prompts ein, und wie weit liegen sie auseinander?",
    "Measured on": "Gemessen auf",
    "CPU only": "nur CPU",
    "no GPU seen by NVML": "keine GPU über NVML sichtbar",
    "server": "Server",
    "build": "Build",
    "Models": "Modelle",
    "not in the log": "nicht im Log",
    "Prompt classes": "Prompt-Klassen",
    "prompt tokens": "Prompt-Token",
    "each with reasoning off and on": "jeweils mit Reasoning aus und an",
    "repetitions per cell": "Wiederholungen je Zelle",
    "Run from": "Lauf von",
    "minutes": "Minuten",
    "Every sample, canary and server log line of this run is on its own page:":
    "Jede Messung, jede Kanarienprobe und jede Logzeile des Servers aus diesem Lauf steht auf einer eigenen Seite:",
    "Evidence of run": "Belege zu Lauf",
    "Every number above links to the row it comes from.": "Jede Zahl oben verweist auf die Zeile, aus der sie stammt.",
    "The rows behind every number of the article": "Die Zeilen hinter jeder Zahl des Artikels",
    "Each cell links back to the figure it supports; the sample marked median is the one the table shows "
    "(two where n is even).":
    "Jede Zelle verweist zurück auf die Zahl, die sie belegt; die als Median markierte Messung ist die, die "
    "die Tabelle zeigt (zwei bei geradem n).",
    "Samples": "Messungen",
    "Every sample of this run, as stored.": "Jede Messung dieses Laufs, wie gespeichert.",
    "fired on every measured sample": "hat bei jeder gemessenen Messung ausgelöst",
    "These gates never fired during the measurements. Beside each, the proof that it can fire: its canary, a "
    "deliberate provocation kept apart from the measurements.":
    "Diese Gates haben während der Messungen nie ausgelöst. Neben jedem steht der Beleg, dass es auslösen kann: "
    "seine Kanarienprobe, eine absichtliche Provokation, getrennt von den Messungen gehalten.",
    "The campaign was registered": "Die Kampagne wurde",
    "days": "Tage",
    "hours": "Stunden",
    "before the run": "vor dem Lauf registriert",
    "its rules and expectations stood before anything was measured.":
    "ihre Regeln und Erwartungen standen fest, bevor etwas gemessen wurde.",
    "Registered at run start: no registration of this campaign text was made before the run, so its rules are "
    "the author's, frozen when the run began.":
    "Registriert beim Start des Laufs: Vor dem Lauf wurde dieser Kampagnentext nicht registriert; seine Regeln "
    "sind die des Autors, eingefroren beim Beginn des Laufs.",
    "over": "vor",
    "every class": "jede Klasse",
    "Latest result per campaign": "Neuestes Ergebnis je Kampagne",
    "No finished run in the database yet.": "Noch kein abgeschlossener Lauf in der Datenbank.",
    "Figures that count different things": "Zahlen, die Verschiedenes zählen",
    "These pairs look as if they disagree; each side says which requests or which clock it counts.":
    "Diese Paare sehen aus, als widersprächen sie sich; jede Seite sagt, welche Anfragen oder welche Uhr sie zählt.",
    "Load time: two clocks": "Ladezeit: zwei Uhren",
    "{model}: {client} s on cardproof's clock (from the load request until the server reported the "
    "model ready; measured loads: {n}) against {server} s in the server log (its own clock since the "
    "process started, at \"model loaded\"). They count different spans of the same loads: the "
    "process start and the readiness poll lie between them.":
    "{model}: {client} s auf der Uhr von cardproof (von der Ladeanfrage, bis der Server das Modell als bereit "
    "meldete; gemessene Ladevorgänge: {n}) gegenüber {server} s im Serverlog (seine eigene Uhr seit dem "
    "Prozessstart, bei \"model loaded\"). Sie zählen verschiedene Spannen derselben Ladevorgänge: Prozessstart "
    "und Bereitschaftsabfrage liegen dazwischen.",
    "Draft acceptance: two counts": "Draft-Annahme: zwei Zählungen",
    "{model}: {acc} of {gen} draft tokens accepted over {n} measured requests (the answers' "
    "counters); the server log counts {l_acc} of {l_gen} over {l_req} requests, because it logs "
    "every request of the load: canaries, probes and warm-ups included.":
    "{model}: {acc} von {gen} Draft-Token angenommen über {n} gemessene Anfragen (die Zähler der Antworten); "
    "das Serverlog zählt {l_acc} von {l_gen} über {l_req} Anfragen, weil es jede Anfrage des Ladevorgangs "
    "protokolliert: Kanarienproben, Prüfungen und Aufwärmanfragen eingeschlossen.",
    "Memory: the cards against host memory": "Speicher: die Karten gegenüber dem Hauptspeicher",
    "{model}: the runtime reports {reported} MiB for the cards, while its log lists {host} MiB of "
    "buffers in host memory (CPU). Both are right: the self-report counts card memory only, and on "
    "this run the model lived in host memory.":
    "{model}: Die Laufzeit meldet {reported} MiB für die Karten, während ihr Log {host} MiB Puffer im Hauptspeicher "
    "(CPU) aufführt. Beides stimmt: Die Selbstauskunft zählt nur Kartenspeicher, und in diesem Lauf lag das "
    "Modell im Hauptspeicher.",
    "not graded: incumbent": "nicht bewertet: Amtsinhaber",
    "registered at run start: no registration of this text before the run":
    "registriert beim Start des Laufs: keine Registrierung dieses Texts vor dem Lauf",
    "What the author expected": "Was der Autor erwartete",
    "Beliefs written into the campaign before the run, in the rule language; each is confirmed or refuted by "
    "the figure it reads.":
    "Annahmen, vor dem Lauf in der Regelsprache in die Kampagne geschrieben; jede wird durch die Zahl bestätigt "
    "oder widerlegt, die sie liest.",
    "confirmed": "bestätigt",
    "refuted": "widerlegt",
    "undecided": "unentschieden",
    "Non-weights (card − file)": "Ohne Gewichte (Karte − Datei)",
    "Share of the cards": "Anteil an den Karten",
    "Left beside it": "Daneben frei",
    "Every question and answer of the probes is on the evidence page:":
    "Jede Frage und Antwort der Prüfungen steht auf der Belegseite:",
}
