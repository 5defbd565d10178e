"""cardproof: evidence-first benchmarks of local LLM inference servers."""

__version__ = "0.1.0"
