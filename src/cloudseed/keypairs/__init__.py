"""Key pairs: SSH keys in the API database, and the os-keypairs API."""
