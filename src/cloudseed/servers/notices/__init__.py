"""Acknowledged lifecycle notices (2.111): a reboot, stop, rebuild or delete announced to the
guest ahead of time, which the guest may acknowledge to let it start at once. ``rules`` is the
IO-free core; ``store`` keeps the events and a project's defaults."""
