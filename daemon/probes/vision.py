"""vision: only where declared. A generated solid-colour image; the model must name the colour.

A model that never declared vision is not asked at all (NOT_CAPABLE, no
request): an HTTP 400 from a text-only model is the expectation being
measured, not the model. Where the declaration cannot be read the probe is
SKIP. Two colours, so a lucky guess does not pass.

Arms: ``colour_named`` (PASS), ``wrong_colour`` (OK_model_ran_and_was_wrong),
``no_answer`` (FAIL), ``http_<status>`` (the server refused the image: FAIL,
then DECLARED_NOT_DELIVERED), ``not_declared`` (NOT_CAPABLE),
``declaration_unknown`` (SKIP).
"""

from __future__ import annotations

import base64
import struct
import zlib

from .base import Probe, ProbeContext, Unit, failed_request, message

COLOURS = {"red": (220, 20, 20), "blue": (20, 40, 220)}
PROMPT = "What colour is this image? Answer with one word."


def png(rgb: tuple[int, int, int], size: int = 64) -> bytes:
    """A solid-colour PNG written by hand (no imaging library needed)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * size
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row * size, 9))
            + chunk(b"IEND", b""))


def judge(resp: dict, colour: str) -> tuple[str, str, dict]:
    msg = message(resp)
    text = msg["content"].strip().lower()
    if not text:
        return "FAIL", "no_answer", {"finish_reason": msg["finish_reason"]}
    if colour in text:
        return "PASS", "colour_named", {"answer_head": text[:80]}
    return "OK_model_ran_and_was_wrong", "wrong_colour", {"answer_head": text[:80], "expected": colour}


def run(ctx: ProbeContext) -> list[Unit]:
    declared = ctx.declared.get("vision")
    if declared is None:
        return [Unit(c, "SKIP", "declaration_unknown", 0.0, {"note": "not sent: the server's declaration could not be read"})
                for c in COLOURS]
    if not declared:
        return [Unit(c, "NOT_CAPABLE", "not_declared", 0.0, {"note": "not sent: the model does not declare vision"})
                for c in COLOURS]
    units = []
    for colour, rgb in COLOURS.items():
        url = "data:image/png;base64," + base64.b64encode(png(rgb)).decode()
        body = {"messages": [{"role": "user", "content": [
            {"type": "text", "text": PROMPT}, {"type": "image_url", "image_url": {"url": url}}]}]}
        resp, ms, err = ctx.ask(body)
        exchange = {"requests": [body], "responses": [resp]}
        if err:
            units.append(failed_request(colour, err, ms, exchange))
            continue
        verdict, arm, detail = judge(resp, colour)
        units.append(Unit(colour, verdict, arm, ms, exchange, detail=detail))
    return units


PROBE = Probe("vision", "vision", "names the colour of a generated image (only where declared)", run, order=50)
