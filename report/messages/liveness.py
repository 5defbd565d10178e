"""German for runs that did not finish (issue 16)."""

MESSAGES: dict[str, str] = {
    "stale": "ohne Lebenszeichen",
    "Interrupted": "Abgebrochen",
    "Failed": "Fehlgeschlagen",
    "Not finished": "Nicht beendet",
    "This run did not finish": "Dieser Lauf wurde nicht beendet",
    "This run had not finished when this page was built": "Dieser Lauf war noch nicht beendet, als diese Seite entstand",
    "coverage": "Abdeckung",
    "last sign of life": "letztes Lebenszeichen",
    "Its numbers are from an unfinished run and are not compared with other runs.":
    "Seine Zahlen stammen aus einem unvollständigen Lauf und werden nicht mit anderen Läufen verglichen.",
    "No headline: the run did not finish.": "Kein Ergebnis in einem Satz: Der Lauf wurde nicht beendet.",
    "Not compared: the run did not finish.": "Nicht verglichen: Der Lauf wurde nicht beendet.",
}
