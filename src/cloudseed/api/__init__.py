"""The compute API app: the factory mounting every domain's routes, its edge, auth."""
