"""German for the caveat rules."""

MESSAGES: dict[str, str] = {
    "Prompt lengths differ": "Prompt-Längen unterscheiden sich",
    "In the {cls} class, {hi_model} read {excess} more prompt tokens than {lo_model} ({hi} against {lo}) for the same text, because the tokenizers differ: its rates are measured on a longer prompt and are not directly comparable.":
    "In der Klasse {cls} las {hi_model} für denselben Text {excess} mehr Prompt-Token als {lo_model} ({hi} gegenüber {lo}), weil die Tokenizer sich unterscheiden: seine Raten sind an einem längeren Prompt gemessen und nicht direkt vergleichbar.",
    "Speculative decoding on some rows": "Spekulatives Decoding in einigen Zeilen",
    "{model} ran with speculative decoding ({acc} of {gen} draft tokens accepted, {rate}); the other rows did not. Its decode rate depends on how well the draft model guesses and is not the model's plain speed.":
    "{model} lief mit spekulativem Decoding ({acc} von {gen} Draft-Token akzeptiert, {rate}); die anderen Zeilen nicht. Seine Decode-Rate hängt davon ab, wie gut das Draft-Modell rät, und ist nicht die reine Geschwindigkeit des Modells.",
    "The reasoning switch did not take": "Der Reasoning-Schalter hat nicht gegriffen",
    "Reasoning was switched on for {model}, but none of its {n} answered samples returned reasoning text: its \"reasoning on\" rows measure the same thing as \"reasoning off\".":
    "Für {model} war Reasoning eingeschaltet, aber keine seiner {n} beantworteten Messungen lieferte Reasoning-Text: seine Zeilen „Reasoning an“ messen dasselbe wie „Reasoning aus“.",
    "Unproven gates": "Unbewiesene Gates",
    "These gates never fired in this run and no canary showed that they can: {gates}. Their silence is not evidence that nothing went wrong.":
    "Diese Gates haben in diesem Lauf nie ausgelöst, und kein Kanarienvogel hat gezeigt, dass sie es können: {gates}. Ihr Schweigen ist kein Beleg dafür, dass nichts schiefging.",
    "Reproducible failure": "Reproduzierbarer Fehler",
    "{model} · {cls}: {failed} of {total} requests failed with the same error ({kind}: {text}). That is reproducible, not a glitch; the cell has no number.":
    "{model} · {cls}: {failed} von {total} Anfragen scheiterten mit demselben Fehler ({kind}: {text}). Das ist reproduzierbar, kein Ausrutscher; die Zelle hat keine Zahl.",
    "Not measured: the load was refused": "Nicht gemessen: das Laden wurde verweigert",
    "{model} was never loaded, so no request was sent for it: {reason}. Its rows are empty by design, to keep the pinned model on the cards.":
    "{model} wurde nie geladen, daher wurde keine Anfrage dafür gesendet: {reason}. Seine Zeilen sind absichtlich leer, damit das festgesetzte Modell auf den Karten bleibt.",
}
