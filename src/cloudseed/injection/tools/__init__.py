"""One module per external program (or per check made with one), each returning typed
results or raising ``ImageToolFailed`` / ``ProgramFailed``; processes are started only through
``cloudseed.programs.run``."""
