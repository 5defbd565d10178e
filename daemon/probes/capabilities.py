"""What a model declares it can do, read from the server, with the evidence for each claim.

llama-server: ``/props`` (per router child) carries ``modalities`` (vision,
audio) and the chat template; the template's own capabilities
(``chat_template_caps.supports_tools``) where this build reports them, else
whether the template text references tools. Thinking is declared when the
template has a thinking switch or think tags.

Ollama: ``/api/show`` returns ``capabilities`` (``completion``, ``tools``,
``thinking``, ``vision``, ...) directly.

Each capability is True (declared), False (the source says no) or None (the
source could not be read): only True and False decide between
DECLARED_NOT_DELIVERED and NOT_CAPABLE.
"""

from __future__ import annotations

import re

from ..backends import BackendError

CAPABILITIES = ("tools", "thinking", "vision")

_TOOLS_IN_TEMPLATE = re.compile(r"\btools\b|tool_calls|tool_call\b")
_THINKING_IN_TEMPLATE = re.compile(r"enable_thinking|<think>|reasoning_content|\bthinking\b")


def from_llama_props(props: dict) -> dict:
    """{"declared": {cap: bool|None}, "evidence": {cap: text}} from llama-server /props."""
    template = props.get("chat_template") or ""
    caps = props.get("chat_template_caps") or {}
    modalities = props.get("modalities")
    declared: dict = {}
    evidence: dict = {}
    if "supports_tools" in caps or "supports_tool_calls" in caps:
        declared["tools"] = bool(caps.get("supports_tools") or caps.get("supports_tool_calls"))
        evidence["tools"] = (f"/props chat_template_caps supports_tools={caps.get('supports_tools')} "
                             f"supports_tool_calls={caps.get('supports_tool_calls')}")
    elif template:
        m = _TOOLS_IN_TEMPLATE.search(template)
        declared["tools"] = bool(m)
        evidence["tools"] = f"chat template references {m.group()!r}" if m else "chat template never mentions tools"
    else:
        declared["tools"] = None
        evidence["tools"] = "/props has no chat template"
    if template:
        m = _THINKING_IN_TEMPLATE.search(template)
        declared["thinking"] = bool(m)
        evidence["thinking"] = f"chat template references {m.group()!r}" if m else "chat template has no thinking switch"
    else:
        declared["thinking"] = None
        evidence["thinking"] = "/props has no chat template"
    if isinstance(modalities, dict) and "vision" in modalities:
        declared["vision"] = bool(modalities["vision"])
        evidence["vision"] = f"/props modalities.vision={str(bool(modalities['vision'])).lower()}"
    else:
        declared["vision"] = None
        evidence["vision"] = "/props has no modalities"
    return {"declared": declared, "evidence": evidence, "source": "llama-server /props"}


def from_ollama_show(show: dict) -> dict:
    """The same shape from Ollama's /api/show (its ``capabilities`` list)."""
    listed = show.get("capabilities")
    if not isinstance(listed, list):
        return {"declared": {c: None for c in CAPABILITIES},
                "evidence": {c: "/api/show has no capabilities list" for c in CAPABILITIES},
                "source": "ollama /api/show"}
    return {
        "declared": {c: c in listed for c in CAPABILITIES},
        "evidence": {c: f"/api/show capabilities: {', '.join(map(str, listed))}" for c in CAPABILITIES},
        "source": "ollama /api/show",
    }


def read_declared(backend, model: str) -> dict:
    """Ask the backend; never raises (an unreadable source declares nothing either way)."""
    try:
        card = backend.model_card(model)
        if card is not None:  # Ollama's /api/show
            return from_ollama_show(card)
        props = backend.server_info(model)
        if "chat_template" in props or "modalities" in props:  # llama-server, also behind llama-swap
            return from_llama_props(props)
    except BackendError as exc:
        reason = f"could not be read: {exc}"
        return {"declared": {c: None for c in CAPABILITIES}, "evidence": {c: reason for c in CAPABILITIES},
                "source": backend.kind}
    return {"declared": {c: None for c in CAPABILITIES},
            "evidence": {c: "this backend reports no capabilities" for c in CAPABILITIES},
            "source": backend.kind}
