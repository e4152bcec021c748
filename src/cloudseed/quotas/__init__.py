"""Quotas: per-project and per-user limits and the os-quota-sets API."""
