"""The image registry: image records and files, Nova's image proxy and the Glance slice."""
