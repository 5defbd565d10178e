"""German for charts and the reasoning section."""

MESSAGES: dict[str, str] = {
    "prompt class": "Prompt-Klasse",
    "decode tok/s (median, min–max)": "Decode Tok./s (Median, Min–Max)",
    "decode change with reasoning on": "Decode-Änderung mit Reasoning an",
    "Decode tokens per second by model and prompt class, median with min–max":
    "Decode-Token pro Sekunde nach Modell und Prompt-Klasse, Median mit Min–Max",
    "Chart data": "Daten des Diagramms",
    "GiB on the card (stacked by item); tick: self-report": "GiB auf der Karte (nach Posten gestapelt); Strich: Selbstauskunft",
    "Memory on the card stacked by item, with the self-report as a tick":
    "Speicher auf der Karte nach Posten gestapelt, mit der Selbstauskunft als Strich",
    "KV cache": "KV-Cache",
    "compute CUDA0": "Compute CUDA0",
    "compute CUDA1": "Compute CUDA1",
    "draft/MTP": "Draft/MTP",
    "projector": "Projektor",
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
