"""German for charts and the reasoning section."""

MESSAGES: dict[str, str] = {
    "prompt class": "Prompt-Klasse",
    "decode tok/s (median, min–max)": "Decode Tok./s (Median, Min–Max)",
    "decode change with reasoning on": "Decode-Änderung mit Reasoning an",
    "Decode tokens per second by model and prompt class, median with min–max":
    "Decode-Token pro Sekunde nach Modell und Prompt-Klasse, Median mit Min–Max",
    "Chart data": "Daten des Diagramms",
    "median": "Median",
    "min": "Min",
    "max": "Max",
    "change": "Änderung",
    "Reasoning on and off": "Reasoning an und aus",
    "Change of the decode median when the reasoning chain is switched on, same model and prompt class.":
    "Änderung des Decode-Medians, wenn die Reasoning-Kette eingeschaltet wird, gleiches Modell und gleiche Prompt-Klasse.",
    "Change of decode tokens per second with reasoning on, per model and prompt class":
    "Änderung der Decode-Token pro Sekunde mit Reasoning an, nach Modell und Prompt-Klasse",
    "Not measured: this run did not measure the same cells with reasoning on and off.":
    "Nicht gemessen: dieser Lauf hat nicht dieselben Zellen mit Reasoning an und aus gemessen.",
}
