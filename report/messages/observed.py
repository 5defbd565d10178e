"""German for the observed-requests section and the article of a server log with no run (issue 15)."""

MESSAGES: dict[str, str] = {
    "Observed in the server log, not measured by cardproof":
    "Im Server-Protokoll beobachtet, nicht von cardproof gemessen",
    "These are the server's own counters for requests that cardproof did not send: production traffic, tests, "
    "anything that reached the server while its log was captured. They are shown apart from the measured samples "
    "and never enter a median, a gate or a comparison.":
    "Das sind die eigenen Zähler des Servers für Anfragen, die nicht von cardproof kamen: Produktionsverkehr, "
    "Tests, alles, was den Server erreichte, während sein Protokoll erfasst wurde. Sie stehen getrennt von den "
    "gemessenen Stichproben und gehen in keinen Median, kein Gate und keinen Vergleich ein.",
    "model": "Modell",
    "draft acceptance": "Draft-Annahme",
    "Median (minimum–maximum, number of requests), computed from the token counts and milliseconds the server "
    "printed for each request; the request count links to the first of them.":
    "Median (Minimum–Maximum, Zahl der Anfragen), berechnet aus den Token-Zahlen und Millisekunden, die der "
    "Server für jede Anfrage ausgab; die Zahl der Anfragen verweist auf die erste davon.",
    "Server logs": "Server-Protokolle",
    "A server log imported without a campaign: the loads it shows, their facts, the requests the server counted "
    "itself and its errors, each linked to the lines it comes from.":
    "Ein Server-Protokoll, eingelesen ohne Kampagne: die Ladevorgänge darin, ihre Befunde, die Anfragen, die der "
    "Server selbst zählte, und seine Fehler, jeweils mit den Zeilen verknüpft, aus denen sie stammen.",
    "Server logs imported without a campaign.": "Ohne Kampagne eingelesene Server-Protokolle.",
    "imported": "eingelesen",
    "still running when the log ends": "läuft noch, als das Protokoll endet",
    "ended": "beendet",
    "CUDA errors": "CUDA-Fehler",
    "No CUDA error in this log.": "Kein CUDA-Fehler in diesem Protokoll.",
}
