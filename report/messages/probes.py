"""German for the decision section: pass rules, probe verdicts, what the run does not show.

Verdict and arm codes (PASS, NOT_CAPABLE, no_tool_call, ...) are vocabulary
and stay untranslated.
"""

MESSAGES: dict[str, str] = {
    "Decision": "Entscheidung",
    "This run had neither probes nor pass rules.": "Dieser Lauf hatte weder Prüfungen noch Bestehensregeln.",
    "Pass rules, written before the run": "Bestehensregeln, vor dem Lauf festgelegt",
    "Registered": "Registriert",
    "run started": "Lauf begonnen",
    "The rule is the one frozen with the campaign before the run: text, hash and time verified.":
    "Die Regel ist die, die vor dem Lauf mit der Kampagne eingefroren wurde: Text, Hash und Zeitpunkt geprüft.",
    "Not a pre-registered rule": "Keine vorab registrierte Regel",
    "This rule cannot be shown to have stood before the run, so no outcome below counts as a pass.":
    "Es lässt sich nicht zeigen, dass diese Regel vor dem Lauf feststand; kein Ergebnis unten zählt daher als bestanden.",
    "Outcome": "Ergebnis",
    "Arm": "Zweig",
    "missing": "fehlt",
    "pass": "bestanden",
    "fail": "nicht bestanden",
    "undecided": "unentschieden",
    "unverified": "nicht belegt",
    "Rule": "Regel",
    "Prompt class": "Prompt-Klasse",
    "Candidate decode tok/s": "Kandidat Decode tok/s",
    "Incumbent decode tok/s": "Bestandsmodell Decode tok/s",
    "Ratio (range)": "Verhältnis (Spanne)",
    "No decode figures that both models share: no speed ratio.":
    "Keine Decode-Werte, die beide Modelle teilen: kein Geschwindigkeitsverhältnis.",
    "not measured on the card for both models": "nicht für beide Modelle auf der Karte gemessen",
    "Probe differences that count": "Unterschiede in den Prüfungen, die zählen",
    "none": "keine",
    "one task of difference is one task of difference": "eine Aufgabe Unterschied ist eine Aufgabe Unterschied",
    "Differences that only look like one": "Unterschiede, die nur so aussehen",
    "not capable:": "nicht fähig:",
    "never declared": "hat nie angemeldet:",
    "unstable:": "instabil:",
    "got different verdicts on identical input; the probe does not grade the model":
    "bekam bei identischer Eingabe verschiedene Befunde; die Prüfung bewertet das Modell nicht",
    "no verdict on the model:": "kein Befund über das Modell:",
    "probe defect:": "Mangel der Prüfung:",
    "not run on both models": "nicht auf beiden Modellen gelaufen",
    "Same verdict on both": "Gleicher Befund bei beiden",
    "A capability the candidate lacks": "Eine Fähigkeit, die dem Kandidaten fehlt",
    "The incumbent declares": "Das Bestandsmodell meldet",
    ", the candidate does not. That is not a probe verdict, but a replacement has to do what the incumbent does.":
    " an, der Kandidat nicht. Das ist kein Prüfbefund, aber ein Ersatz muss können, was das Bestandsmodell kann.",
    "No model is pinned, so there is no incumbent to compare against; only the rule outcomes above apply.":
    "Kein Modell ist festgesetzt, also gibt es kein Bestandsmodell zum Vergleich; es gelten nur die Regelergebnisse oben.",
    "Probe verdicts": "Befunde der Prüfungen",
    "Each probe asks every task more than once on identical input where the campaign says so; a probe whose answers disagree does not grade the model. NOT_CAPABLE: the model never declared the capability, and that is not counted against it. DECLARED_NOT_DELIVERED: it declared the capability and did not deliver.":
    "Jede Prüfung stellt jede Aufgabe mehrmals mit identischer Eingabe, wo die Kampagne es verlangt; eine Prüfung, deren Antworten sich widersprechen, bewertet das Modell nicht. NOT_CAPABLE: das Modell hat die Fähigkeit nie angemeldet, und das wird ihm nicht angerechnet. DECLARED_NOT_DELIVERED: es hat die Fähigkeit angemeldet und nicht geliefert.",
    "Probe": "Prüfung",
    "Verdict": "Befund",
    "declared": "angemeldet",
    "attempts": "Versuche",
    "time": "Zeit",
    "known defects": "bekannte Mängel",
    "unknown": "unbekannt",
    "yes": "ja",
    "no": "nein",
    "unstable: does not grade the model": "instabil: bewertet das Modell nicht",
    "Known defects of the probes": "Bekannte Mängel der Prüfungen",
    "since": "seit",
    "differences in this probe do not count": "Unterschiede in dieser Prüfung zählen nicht",
    "What this run does not show": "Was dieser Lauf nicht zeigt",
    "The run lasted": "Der Lauf dauerte",
    "minutes: nothing about sustained load.": "Minuten: nichts über Dauerlast.",
    "One run: the ratios above are ranges over its samples, not over days or configurations.":
    "Ein Lauf: die Verhältnisse oben sind Spannen über seine Messungen, nicht über Tage oder Konfigurationen.",
    "No pinned model, so no comparison with an incumbent.": "Kein festgesetztes Modell, also kein Vergleich mit einem Bestandsmodell.",
    "scored tasks": "bewertete Aufgaben",
    "A difference of one task is one task.": "Ein Unterschied von einer Aufgabe ist eine Aufgabe.",
    "Probes were asked once per task: their stability was not checked.":
    "Jede Aufgabe wurde nur einmal gestellt: die Stabilität der Prüfungen ist ungeprüft.",
    "known probe defects are named, not fixed; read every verdict with them.":
    "bekannte Mängel der Prüfungen sind benannt, nicht behoben; jeder Befund ist mit ihnen zu lesen.",
    "is undecided for": "ist unentschieden für",
    "the run has no value for": "dem Lauf fehlt ein Wert für",
    "Memory was not read from the card in this run.": "Der Speicher wurde in diesem Lauf nicht von der Karte gelesen.",
    "Probe exchanges": "Wortwechsel der Prüfungen",
    "before the declaration": "vor der Anmeldung",
    "detector, not scored": "Detektor, nicht bewertet",
    "same answer as attempt": "gleiche Antwort wie Versuch",
    "answer": "Antwort",
    "trace": "Denkspur",
    "tool calls": "Werkzeugaufrufe",
    "code": "Code",
}
