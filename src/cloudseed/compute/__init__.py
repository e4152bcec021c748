"""Compute drivers: the ``Driver`` protocol and its fake and qemu implementations."""
