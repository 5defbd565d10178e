"""German for the memory section (report/templates/sections/memory.md.j2)."""

MESSAGES: dict[str, str] = {
    "Memory on the card": "Speicher auf der Karte",
    "card memory: not measured (no NVIDIA driver)": "Kartenspeicher: nicht gemessen (kein NVIDIA-Treiber)",
    "This run had no NVIDIA driver to ask, so no figure in this section comes from the card. The runtime's own "
    "figures below are what the server says about itself; they are not used in its place.":
        "Dieser Lauf hatte keinen NVIDIA-Treiber, den er hätte fragen können; keine Zahl in diesem Abschnitt "
        "stammt von der Karte. Die Zahlen unten sind die Selbstauskunft des Servers; sie treten nicht an ihre Stelle.",
    "Memory on the card was not captured in this run.": "Der Kartenspeicher wurde in diesem Lauf nicht erfasst.",
    "Recorded readings": "Aufgezeichnete Messwerte",
    "These figures were replayed from recorded NVML readings, not read from a card during this run.":
        "Diese Zahlen wurden aus aufgezeichneten NVML-Messwerten abgespielt, nicht während dieses Laufs "
        "von einer Karte gelesen.",
    "Card: memory the driver (NVML) attributes to the load's own server processes, found by port or PID; other "
    "processes on the same cards are listed separately and never counted. Self-report: the runtime's own figure "
    "for the cards. Items come from the load's log lines; those marked * are part of the self-report, the others "
    "are missing from it and explain the gap. Unexplained: the gap that no log line accounts for.":
        "Karte: Speicher, den der Treiber (NVML) den eigenen Serverprozessen des Ladevorgangs zuordnet, gefunden "
        "über Port oder PID; andere Prozesse auf denselben Karten stehen gesondert und zählen nie mit. "
        "Selbstauskunft: die eigene Zahl der Laufzeit für die Karten. Die Posten stammen aus den Protokollzeilen "
        "des Ladevorgangs; mit * markierte sind in der Selbstauskunft enthalten, die übrigen fehlen ihr und "
        "erklären die Differenz. Ungeklärt: der Teil der Differenz, den keine Protokollzeile belegt.",
    "Card": "Karte",
    "Self-report": "Selbstauskunft",
    "source": "Quelle",
    "Gap": "Differenz",
    "Weights": "Gewichte",
    "KV cache": "KV-Cache",
    "Compute": "Rechenpuffer",
    "Draft/MTP": "Entwurf/MTP",
    "Projector": "Projektor",
    "Unexplained": "Ungeklärt",
    "unexplained": "ungeklärt",
    "All figures in GiB.": "Alle Zahlen in GiB.",
    "not attributed": "nicht zugeordnet",
    "peak": "Spitze",
    "median": "Median",
    "share on the card": "Anteil auf der Karte",
    "none stored": "keine gespeichert",
    "explained by items the self-report omits": "erklärt durch Posten, die der Selbstauskunft fehlen",
    "estimate": "Schätzung",
    "Note": "Hinweis",
    "Budget": "Budget",
    "of": "von",
    "on": "auf",
    "card(s)": "Karte(n)",
    "headroom beside this model alone": "Reserve neben diesem Modell allein",
    "least free during the load, neighbours included": "am wenigsten frei während des Ladens, Nachbarn eingerechnet",
    "Free before the load": "Frei vor dem Laden",
    "Neighbours, not counted": "Nachbarn, nicht mitgezählt",
    "not a PID of this namespace": "keine PID dieses Namensraums",
    "Cell": "Zelle",
    "PIDs from another namespace": "PIDs aus einem anderen Namensraum",
    "The driver reported processes whose PIDs do not belong to this PID namespace (a container without "
    "--pid=host). They are listed, never matched to a server by number.":
        "Der Treiber meldete Prozesse, deren PIDs nicht zu diesem PID-Namensraum gehören (ein Container ohne "
        "--pid=host). Sie werden aufgeführt, aber nie über die Nummer einem Server zugeordnet.",
    "required": "benötigt",
    "Distinct PIDs": "Verschiedene PIDs",
    "a buffer line without a device was not counted": "eine Pufferzeile ohne Gerät wurde nicht gezählt",
    "printed more than once with different values; the largest is used":
        "mehrfach mit verschiedenen Werten ausgegeben; der größte wird verwendet",
    "printed by the server as estimates; the log does not say whether they overlap":
        "vom Server als Schätzung ausgegeben; das Protokoll sagt nicht, ob sie sich überschneiden",
    "the items exceed the gap: some overlap, or an estimate is high":
        "die Posten übersteigen die Differenz: einige überschneiden sich, oder eine Schätzung ist zu hoch",
    # card basis and self-report kinds (report/memory.py)
    "steady state after load": "eingeschwungen nach dem Laden",
    "median over the load": "Median über den Ladevorgang",
    "memory breakdown printed at exit": "Speicheraufstellung beim Beenden",
    "memory breakdown projected while fitting": "beim Einpassen vorausberechnete Speicheraufstellung",
    "sum of the buffer lines": "Summe der Pufferzeilen",
    "size_vram": "size_vram",
    "memory plan in the log": "Speicherplan im Protokoll",
    "Runtime's plan": "Plan der Laufzeit",
    "on the cards": "auf den Karten",
    "in all": "insgesamt",
    "what the runtime expected to place before loading; an estimate, not a reading":
        "was die Laufzeit vor dem Laden zu platzieren erwartete; eine Schätzung, keine Messung",
    # items (report/memory.py CATEGORY_LABEL)
    "weights": "Gewichte",
    "compute buffer": "Rechenpuffer",
    "output buffer": "Ausgabepuffer",
    "draft/MTP context": "Entwurfs-/MTP-Kontext",
    "projector": "Projektor",
}
