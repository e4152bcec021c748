"""An in-memory guest filesystem for the writer's tests: a fake at the ``GuestFilesystem`` seam.

It behaves like the tools behind the real handlers on the points that matter for safety:
intermediate symlinks are followed inside the guest root (as debugfs and libguestfs do), and
``write`` follows a final symlink (as libguestfs' ``write`` does), so a writer that forgot to
check would visibly write through a link.
"""

from __future__ import annotations

from dataclasses import dataclass

from cloudseed.injection.guest import GuestStat, Kind


@dataclass
class Node:
    kind: Kind
    mode: int
    uid: int = 0
    gid: int = 0
    data: bytes = b""
    target: str = ""


class MemoryFilesystem:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {"/": Node("dir", 0o755)}

    # -- building a guest --------------------------------------------------------------------

    def add_dir(self, path: str, mode: int = 0o755, uid: int = 0, gid: int = 0) -> None:
        self.nodes[path] = Node("dir", mode, uid, gid)

    def add_file(
        self, path: str, data: bytes | str, mode: int = 0o644, uid: int = 0, gid: int = 0
    ) -> None:
        raw = data.encode() if isinstance(data, str) else data
        self.nodes[path] = Node("file", mode, uid, gid, data=raw)

    def add_symlink(self, path: str, target: str) -> None:
        self.nodes[path] = Node("symlink", 0o777, target=target)

    def text(self, path: str) -> str:
        return self.nodes[path].data.decode()

    # -- resolution like a chroot: never above "/" -------------------------------------------

    def _resolve(self, path: str, *, follow_last: bool, hops: int = 0) -> str:
        parts = [p for p in path.split("/") if p]
        current = "/"
        for index, name in enumerate(parts):
            candidate = current.rstrip("/") + "/" + name
            node = self.nodes.get(candidate)
            last = index == len(parts) - 1
            if node is not None and node.kind == "symlink" and (follow_last or not last):
                if hops > 40:
                    raise OSError("ELOOP")
                base = "/" if node.target.startswith("/") else current
                rest = "/".join(parts[index + 1 :])
                joined = f"{base.rstrip('/')}/{node.target}/{rest}"
                return self._resolve(
                    self._normalise(joined), follow_last=follow_last, hops=hops + 1
                )
            current = candidate
        return current

    @staticmethod
    def _normalise(path: str) -> str:
        out: list[str] = []
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if out:
                    out.pop()
                continue
            out.append(part)
        return "/" + "/".join(out)

    def _node(self, path: str, *, follow_last: bool = False) -> Node:
        node = self.nodes.get(self._resolve(path, follow_last=follow_last))
        if node is None:
            raise FileNotFoundError(path)
        return node

    # -- GuestFilesystem ---------------------------------------------------------------------

    def lstat(self, path: str) -> GuestStat | None:
        node = self.nodes.get(self._resolve(path, follow_last=False))
        if node is None:
            return None
        return GuestStat(kind=node.kind, mode=node.mode, uid=node.uid, gid=node.gid)

    def readlink(self, path: str) -> str:
        return self._node(path).target

    def read(self, path: str) -> bytes:
        return self._node(path, follow_last=True).data

    def write(self, path: str, data: bytes) -> None:
        real = self._resolve(path, follow_last=True)
        parent = real.rsplit("/", 1)[0] or "/"
        if self.nodes.get(parent) is None:
            raise FileNotFoundError(parent)
        node = self.nodes.get(real)
        if node is None:
            self.nodes[real] = Node("file", 0o644, data=data)
        else:
            node.data = data

    def mkdir(self, path: str) -> None:
        real = self._resolve(path, follow_last=False)
        if real in self.nodes:
            raise FileExistsError(path)
        self.nodes[real] = Node("dir", 0o755)

    def chmod(self, path: str, mode: int) -> None:
        self._node(path, follow_last=True).mode = mode

    def chown(self, path: str, uid: int, gid: int) -> None:
        node = self._node(path)
        node.uid, node.gid = uid, gid
