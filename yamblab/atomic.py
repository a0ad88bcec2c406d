"""Atomic file writes: a temporary file in the same folder, fsync, rename, fsync the folder.

The file is created with the mode of any file the user writes (0666 less the umask), so a
cache folder shared by a team can be read by all of it.

A reader sees either the old file or the whole new one, never a half-written file (YoloYamb
lost 40 GPU hours to a checkpoint interrupted mid-save). A writer killed mid-write (``kill -9``)
leaves its temporary file behind; the next write of the same file removes it (the temporary
file's name says the host and process that wrote it, so only a dead writer's is removed).
"""

from __future__ import annotations

import errno
import glob
import os
import socket
import tempfile
from pathlib import Path

from yamblab.errors import DiskFullError


def _umask() -> int:
    """The process's umask (read from /proc where it can be, else set and restored)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _prefix(path: Path) -> str:
    """The start of the name of this process's temporary files for ``path``."""
    return f".{path.name}.{socket.gethostname()}-{os.getpid()}."


def _remove_dead_writers_files(path: Path) -> None:
    """Remove the temporary files of ``path`` that a killed writer on this host left behind."""
    mine = f".{path.name}.{socket.gethostname()}-"
    for tmp in glob.glob(os.path.join(glob.escape(str(path.parent)), f".{glob.escape(path.name)}.*.tmp")):
        name = os.path.basename(tmp)
        pid = name[len(mine):].split(".", 1)[0] if name.startswith(mine) else ""
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue                  # its writer is still at work
        except ProcessLookupError:
            pass
        except OSError:               # another user's process: alive
            continue
        try:
            os.unlink(tmp)
        except OSError:
            pass


def atomic_write(path: str | Path, chunks) -> Path:
    """Write the bytes of ``chunks`` (one ``bytes`` or an iterable of them) to ``path`` atomically.

    The folder is created if needed. On any error the temporary file is removed and the old
    file, if any, is left as it was; temporary files of ``path`` left by killed writers on this
    host are removed first.

    Returns:
        the path written.

    Raises:
        DiskFullError: no space left on the folder's device (or the disk quota spent); the
            message names ``path`` and says the old file is kept.
        OSError: any other failure to write.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(chunks, (bytes, bytearray, memoryview)):
        chunks = [chunks]
    _remove_dead_writers_files(path)
    fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600; a cache or checkpoint is shared like any file the user
        # writes: 0666 less the umask (0644 under the usual 022).
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            kept = "the file there before is kept as it was" if path.exists() else "nothing was written"
            raise DiskFullError(f"disk full: no space left on the device to write {path} ({kept})") from None
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - some file systems cannot fsync a folder
        pass
    return path


def check_writable(path: str | Path, what: str) -> None:
    """Refuse, before any work, a folder ``path`` this process cannot write into (made later if
    missing): a file in its way, or a read-only or forbidden folder above it. Tried for real, by
    creating and removing a file in the nearest folder that exists (a read-only mount, or
    permissions, as the writes themselves will meet them).

    Raises:
        YamblabError: one line naming ``what``, the path and the reason.
    """
    from yamblab.errors import YamblabError

    path = Path(path)
    here = path
    while not here.exists() and here != here.parent:
        here = here.parent
    if not here.is_dir():
        raise YamblabError(f"cannot write {what} at {path}: {here} is a file, not a folder")
    try:
        fd, tmp = tempfile.mkstemp(dir=here, prefix=".yamblab-write-check-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(f"disk full: no space left to write {what} at {path}") from None
        reason = {errno.EROFS: "a read-only file system", errno.EACCES: "permission denied",
                  errno.EPERM: "permission denied"}.get(exc.errno, exc.strerror or str(exc))
        where = "" if here == path else f" (in {here.absolute()})"
        raise YamblabError(f"cannot write {what} at {path}{where}: {reason}") from None
