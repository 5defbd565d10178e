"""Capture side: campaigns, backends, the runner and the SQLite store."""
