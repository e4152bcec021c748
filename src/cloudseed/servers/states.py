"""Instance states and the status the API shows for them (Nova's vm/task/power states).

IO-free. ``status_of`` is Nova's state map; ``ALLOWED`` says which vm_states each operation
accepts. An operation also needs ``task_state`` to be empty: that is what makes a second
concurrent operation on the same instance a 409.
"""

from __future__ import annotations

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

# What a list filter ``status=X`` selects (vm_state, task_state or None for "any").
STATUS_FILTERS: dict[str, list[tuple[str, str | None]]] = {}
for _vm, _by_task in _STATUS.items():
    for _task, _status in _by_task.items():
        STATUS_FILTERS.setdefault(_status, []).append((_vm, _task))


def status_of(vm_state: str, task_state: str | None) -> str:
    by_task = _STATUS.get(vm_state, {})
    return by_task.get(task_state) or by_task.get(None) or "UNKNOWN"
