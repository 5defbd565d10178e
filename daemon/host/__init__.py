"""The host a run happens on: its inventory (``info``), CPU time around a cell (``load``) and the setup
recorded when a run starts (``setup``)."""
