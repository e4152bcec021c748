"""Instance states and the status the API shows for them (Nova's vm/task/power states).

IO-free. ``status_of`` is Nova's state map; ``ALLOWED`` says which vm_states each operation
accepts. An operation also needs ``task_state`` to be empty: that is what makes a second
concurrent operation on the same instance a 409.
"""

from __future__ import annotations

from typing import NamedTuple

ACTIVE, BUILDING, STOPPED, ERROR, DELETED = "active", "building", "stopped", "error", "deleted"

SCHEDULING, SPAWNING = "scheduling", "spawning"
REBOOTING, REBOOTING_HARD = "rebooting", "rebooting_hard"
REBUILDING, POWERING_OFF, POWERING_ON, DELETING = (
    "rebuilding",
    "powering-off",
    "powering-on",
    "deleting",
)

NOSTATE, RUNNING, SHUTDOWN = 0, 1, 4

_STATUS: dict[str, dict[str | None, str]] = {
    ACTIVE: {
        None: "ACTIVE",
        REBOOTING: "REBOOT",
        REBOOTING_HARD: "HARD_REBOOT",
        REBUILDING: "REBUILD",
    },
    BUILDING: {None: "BUILD"},
    STOPPED: {None: "SHUTOFF", REBUILDING: "REBUILD"},
    ERROR: {None: "ERROR", REBUILDING: "REBUILD"},
    DELETED: {None: "DELETED"},
}

# vm_states each operation may start from (Nova's check_instance_state defaults).
ALLOWED: dict[str, tuple[str, ...]] = {
    "reboot_soft": (ACTIVE,),
    "reboot_hard": (ACTIVE, STOPPED, ERROR),
    "rebuild": (ACTIVE, STOPPED, ERROR),
    "stop": (ACTIVE, ERROR),
    "start": (STOPPED,),
    "update_user_data": (ACTIVE, STOPPED, ERROR, BUILDING),
}


class StatusFilter(NamedTuple):
    """The instances of one vm_state that a list filter ``status=X`` selects: those whose
    task_state is one of ``tasks``, and with ``untasked`` also those whose task_state is none
    or one the map does not name for this vm_state (they show the vm_state's own status)."""

    vm_state: str
    tasks: tuple[str, ...]
    untasked: bool
    named_tasks: tuple[str, ...]  # every task_state the map names for this vm_state


def _status_filters() -> dict[str, list[StatusFilter]]:
    filters: dict[str, list[StatusFilter]] = {}
    for vm, by_task in _STATUS.items():
        named = tuple(task for task in by_task if task is not None)
        for status in dict.fromkeys(by_task.values()):
            tasks = tuple(task for task in named if by_task[task] == status)
            filters.setdefault(status, []).append(
                StatusFilter(vm, tasks, untasked=by_task.get(None) == status, named_tasks=named)
            )
    return filters


# What a list filter ``status=X`` selects: exactly the instances ``status_of`` shows as X. Nova
# drops the task_state condition whenever the vm_state's default status matches, so its
# ``status=ACTIVE`` also lists servers that show REBOOT or REBUILD (docs/api-differences.md).
STATUS_FILTERS: dict[str, list[StatusFilter]] = _status_filters()


def status_of(vm_state: str, task_state: str | None) -> str:
    by_task = _STATUS.get(vm_state, {})
    return by_task.get(task_state) or by_task.get(None) or "UNKNOWN"
