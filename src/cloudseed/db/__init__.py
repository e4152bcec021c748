"""Engines and sessions, portable column types, change notification; no domain imports."""
