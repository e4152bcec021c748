"""Readiness (2.110): the guest reports its boot's progress and result, the API shows it.

cloud-init's own ``reporting`` webhook posts each step of the boot to the metadata service
(``POST /openstack/latest/boot_report``, the caller identified as for every metadata request:
a guest reports only its own boot); vendordata turns the webhook on for the servers that opt
in (``vendordata/boot_report.py``). cloud-init's ``phone_home`` counts too. The server view
shows ``bootstrap_status`` from 2.110, and ``GET /servers/{id}/boot-report`` the events.

    events.py    one webhook event: parsed and checked (IO-free)
    progress.py  the boot's status and how each report moves it (IO-free)
    models.py    the kept events (a cell database)
    store.py     take an event, a phone_home, a reboot; read the report (Session-taking)
    intake.py    the metadata app's POST
    errors.py    InvalidBootEvent (400), BootNotBegun (409)

docs/metadata.md#boot-reports says what a guest sends, docs/api-differences.md what the API
shows.
"""
