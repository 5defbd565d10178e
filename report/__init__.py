"""Publish side: queries over the store, templates, the MkDocs site."""
