"""NoCloud seeds (2.107): a server's bootstrap data at a capability URL, for guests that read
cloud-init's NoCloud datasource (bare metal, other hypervisors) with no metadata proxy to say
who they are: the token in the URL is all that identifies the server (docs/metadata.md)."""
