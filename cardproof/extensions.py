"""Every extension point of cardproof, in one list.

There is one way to add a plug-in: a module in the point's folder that declares one module-level
object (``GATE = Gate(...)``, ``PARSER = LineParsers(...)`` ...). ``cardproof.registry.declared``
finds it when the folder's package is imported, refuses a module that declares none, and orders the
entries by their ``order`` then name; nothing else lists the module. A few points are an ordered
list in one file instead, because their order is part of what they mean (a migration's place in a
file's history, a participant's place in a phase): there, adding one is adding an entry to that list.

``tests/test_extension_points.py`` checks this list against what is registered: a registry that is
not listed here, or a point listed here that registers something else, fails it. Strings, not
imports: this module is read by tests and docs and imports neither half.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Declared:
    """A folder whose every module (but ``skip``-ed plumbing) declares ``attribute``, a ``kind``."""

    what: str  # what a plug-in of this point is, in a sentence's words
    package: str  # the folder, as a package
    attribute: str  # the module-level name each plug-in module defines
    kind: str  # "module:Class" of that object
    registry: str  # "module:NAME" the entries are read from
    recipe: str  # where docs/ARCHITECTURE.md tells how to add one


@dataclass(frozen=True)
class Listed:
    """An ordered list in one file: adding one is adding an entry to it."""

    what: str
    where: str  # "module:NAME"
    recipe: str


DECLARED: tuple[Declared, ...] = (
    Declared("a gate: a check of every measured sample, with its canary",
             "cardproof.daemon.gates", "GATE", "cardproof.daemon.gates.base:Gate",
             "cardproof.daemon.gates:GATES", "A gate"),
    Declared("a capability probe", "cardproof.daemon.probes", "PROBE", "cardproof.daemon.probes.base:Probe",
             "cardproof.daemon.probes:PROBES", "A probe"),
    Declared("a backend: one kind of inference server", "cardproof.daemon.backends", "BACKEND",
             "cardproof.daemon.backends.interface:Backend", "cardproof.daemon.backends:BACKENDS", "A backend"),
    Declared("a server's log-line parsers", "cardproof.daemon.logs.parsers", "PARSER",
             "cardproof.daemon.logs.parsers.base:LineParsers", "cardproof.daemon.logs.parsers:PARSERS",
             "A log parser"),
    Declared("a campaign table ([load], [fit], ...)", "cardproof.daemon.campaign.tables", "TABLE",
             "cardproof.daemon.campaign.schema:Table", "cardproof.daemon.campaign.tables:TABLES",
             "A campaign table"),
    Declared("a caveat rule of the article", "cardproof.report.caveats", "RULE",
             "cardproof.report.caveats.base:CaveatRule", "cardproof.report.caveats:RULES", "A caveat rule"),
    Declared("a finding rule of the article", "cardproof.report.findings", "RULE",
             "cardproof.report.findings.base:FindingRule", "cardproof.report.findings:RULES", "A finding rule"),
    Declared("a contradiction detector", "cardproof.report.contradictions", "DETECTOR",
             "cardproof.report.contradictions.base:Detector", "cardproof.report.contradictions:DETECTORS",
             "A contradiction detector"),
)

LISTED: tuple[Listed, ...] = (
    Listed("a migration of the store's schema", "cardproof.daemon.store.migrations:migrations", "A migration"),
    Listed("a participant of a run's phases", "cardproof.daemon.run.participants:PARTICIPANTS", "A participant"),
    Listed("a kind of statement a publication records", "cardproof.report.statements:KINDS", "A statement kind"),
)
