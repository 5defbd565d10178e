"""German for the backends' provenance labels and the llama-bench section."""

MESSAGES: dict[str, str] = {
    # where a rate came from (samples.counter_source)
    "server counters (llama.cpp timings)": "Zähler des Servers (llama.cpp timings)",
    "server counters (Ollama eval_count / eval_duration)": "Zähler des Servers (Ollama eval_count / eval_duration)",
    "wall clock between streamed tokens (weaker evidence than counters)":
    "Uhrzeit zwischen gestreamten Token (schwächerer Beleg als Zähler)",
    "in-process measurement (llama-bench)": "Messung im Prozess (llama-bench)",
    "no rate (the request failed)": "keine Rate (die Anfrage schlug fehl)",
    "Decode and prefill rates in this run come from:": "Decode- und Prefill-Raten in diesem Lauf stammen aus:",
    # llama-bench section
    "llama-bench (in-process)": "llama-bench (im Prozess)",
    "Not comparable 1:1 with the server figures": "Nicht 1:1 mit den Server-Zahlen vergleichbar",
    "llama-bench measures inside one process: no HTTP, no chat template, no server scheduling, fixed prompt and generation lengths. Its tokens per second are not the server counters above and are shown on their own, never mixed into medians.":
    "llama-bench misst innerhalb eines Prozesses: kein HTTP, keine Chat-Vorlage, keine Ablaufsteuerung des Servers, feste Prompt- und Erzeugungslängen. Seine Token pro Sekunde sind nicht die Server-Zähler oben und stehen für sich, nie in Medianen vermischt.",
    "Test": "Test",
    "tok/s, median (min–max, n)": "Token/s, Median (Min–Max, n)",
    "mean ± sd (llama-bench)": "Mittel ± Std.-Abw. (llama-bench)",
    "Configuration": "Konfiguration",
    "Spread over the raw samples_ts of each test; mean and standard deviation as llama-bench printed them.":
    "Streuung über die rohen samples_ts jedes Tests; Mittelwert und Standardabweichung so, wie llama-bench sie ausgab.",
    "build": "Build",
    "backend": "Backend",
    "device": "Gerät",
    "GPU layers": "GPU-Schichten",
    "threads": "Threads",
    "batch/ubatch": "Batch/Ubatch",
    "KV cache K/V": "KV-Cache K/V",
    "flash attention": "Flash Attention",
    "split mode": "Aufteilung",
}
