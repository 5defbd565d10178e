"""Message catalogues, one module per feature: ``MESSAGES = {english: german}``."""
