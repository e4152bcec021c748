"""How ``make test`` hands tests to its pytest-xdist workers (tests/conftest.py's
``pytest_xdist_make_scheduler``).

Each test is a work unit of its own, given to whichever worker is free (at most two waiting per
worker): the slow tests do not end the run with one worker alone. Except in the modules of
``ONE_WORKER_PER_PARAMETER``, whose tests share a module-scoped deployment per parameter that
takes half a minute or more to make (Nova 34 with its databases, cells and services, per
backend; a Keystone): there every test with the same parameters is one unit, so each
deployment is made once, by the worker that runs its tests, instead of once per worker that
happens to draw one of them.

pytest-xdist's own grouping (``xdist_group`` marks with ``--dist loadgroup``) cannot be used:
version 3.8 renames grouped tests through an attribute pytest 9 no longer reads.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

# Paths as pytest names them, from the repository root, and what each module deploys (the
# setup pytest --durations showed when two workers each made it).
ONE_WORKER_PER_PARAMETER = frozenset(
    {
        "tests/compat/test_nova_dropin.py",  # Nova 34 per backend: 56-63 s
        "tests/compat/test_keystone_auth.py",  # Keystone with its users: 31-32 s
        "tests/compat/test_vendordata_keystone.py",  # Keystone: 24-25 s
    }
)


class SharedDeployments(LoadScopeScheduling):  # type: ignore[misc]  # xdist is untyped
    """One work unit per test, but one per (module, parameters) in the modules above."""

    def _split_scope(self, nodeid: str) -> str:
        path, _, name = nodeid.partition("::")
        if path not in ONE_WORKER_PER_PARAMETER:
            return nodeid
        _, bracket, parameters = name.partition("[")
        return f"{path}[{parameters}" if bracket else path
