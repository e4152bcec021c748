"""External programs cloudseed runs: ``run.py`` is the one place a short-lived subprocess is
started (argv list, ``LC_ALL=C``, the fixed PATH, a timeout, failures as ``ProgramFailed``);
``qemu_img.py`` is the one qemu-img wrapper, for the qemu driver and image injection alike.

Long-running children (QEMU itself, the guestfwd relay) are supervised processes, not calls,
and stay with the compute driver.
"""
