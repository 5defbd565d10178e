"""The long-running capture service.

One foreground process: collectors that run whether or not a campaign does,
a campaign queue in the database, one campaign at a time in a worker thread,
a heartbeat and progress that ``cardproof status`` reads from another
process, and ``sd_notify`` when systemd started it.

Modules: ``config`` (the TOML file), ``queue`` (enqueue, claim, recover),
``progress`` (what the runner's echo lines say), ``collectors`` (the hook
points and the heartbeat), ``quiet`` (the exclusive-access window),
``worker`` (one queue entry), ``main`` (the loop, signals, lock),
``notify`` (sd_notify), ``retention``, ``metrics`` (Prometheus text),
``unit`` (the systemd unit), ``statusview`` (what ``cardproof status`` shows).

In short, ``service/``: the daemon: systemd unit, sd_notify, heartbeat, queue,
collectors, quiet window, retention; its own ``/metrics`` is a ``prometheus_client`` collector
"""
