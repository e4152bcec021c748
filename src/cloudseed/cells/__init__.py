"""Cells: which cell database holds an instance (cell and instance mappings in the API database)."""
