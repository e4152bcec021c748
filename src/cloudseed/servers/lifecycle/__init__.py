"""An existing server changed: operations queued for the compute agents, and edits that need
none."""
