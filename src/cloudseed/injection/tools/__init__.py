"""One module per external program, each returning typed results or raising
``ImageToolFailed``; ``commands.run`` is the only place a subprocess is started."""
