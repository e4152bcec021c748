"""What happened to a server: the versioned bootstrap history and Nova's instance actions."""
