"""MkDocs hooks of a cardproof site (copied by ``cardproof report build``; named in mkdocs.yml).

mkdocs-static-i18n builds each further language by running the whole build
again with the same plugin objects. mkdocs-rss-plugin turns its
``date_from_meta.default_time`` setting from text into a time in ``on_config``
and, on the second run, warns that a time is no text -- a warning that fails
``mkdocs build --strict``. Before the next language's build starts (the i18n
plugin starts it last in ``on_post_build``), the setting is text again.
"""

from datetime import datetime


def on_post_build(config, **kwargs):
    rss = config.plugins.get("rss")
    if rss is None:
        return
    meta = rss.config.date_from_meta
    if isinstance(meta.default_time, datetime):
        meta.default_time = meta.default_time.strftime("%H:%M")
