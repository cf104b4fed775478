"""The numbered version directories of an export base directory: the
next version claimed, staged and swapped in (`existing_versions` and
`resolve_version_dir`, which read them, are the runtime's: a client
resolves versions too)."""

import contextlib
import os
import shutil
import socket
import tempfile
import time

from keras_transformer_runtime.processes import is_running
from keras_transformer_runtime.runners.saved_model import existing_versions

# Claims and staging directories: hidden names (TF Serving ignores them)
# that carry the host and process of the export that made them.
_CLAIM = ".claim-{version}"
STAGING_PREFIX = ".tmp-export-"
_OWNER_FILE = "owner"
_STALE_SECONDS = 24 * 3600


def _owner():
    return f"{socket.gethostname()} {os.getpid()}"


def _is_alive(owner, age_seconds):
    """Whether the export that wrote `owner` ("host pid") may still run."""
    host, _, pid = owner.partition(" ")
    if host != socket.gethostname() or not pid.isdigit():
        return age_seconds < _STALE_SECONDS  # another host: trust only the age
    return is_running(int(pid))


def _read_owner(directory):
    try:
        with open(os.path.join(directory, _OWNER_FILE)) as f:
            return f.read().strip()
    except OSError:
        return ""


def remove_stale(export_dir):
    """Removes the claims and staging directories of exports that died
    (killed, or crashed without cleaning up). Returns their names."""
    removed = []
    for name in sorted(os.listdir(export_dir)) if os.path.isdir(export_dir) else []:
        path = os.path.join(export_dir, name)
        if not (name.startswith(".claim-") or name.startswith(STAGING_PREFIX)):
            continue
        age = time.time() - os.path.getmtime(path)
        if not _is_alive(_read_owner(path), age):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
    return removed


def new_staging_dir(export_dir, version):
    """A fresh hidden directory to write version `version` into."""
    return owned_staging_dir(export_dir, f"{STAGING_PREFIX}{version}-")


def owned_staging_dir(parent, prefix):
    """A fresh directory `prefix<random>` in `parent`, marked with the host
    and process that write it, so that `remove_stale_staging` can tell
    when that process died (killed, or out of memory: no `finally` runs).
    Call `unmark` before the directory itself becomes the export."""
    staging = tempfile.mkdtemp(prefix=prefix, dir=parent)
    # mkdtemp makes it 0700, a mode the export would keep once renamed into
    # place: TF Serving or a server running as another user could not read
    # it. It gets the mode any new directory gets (the umask's).
    os.chmod(staging, 0o777 & ~_umask())
    with open(os.path.join(staging, _OWNER_FILE), "w") as f:
        f.write(_owner())
    return staging


def _umask():
    """The process's umask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def unmark(staging):
    """Removes `owned_staging_dir`'s mark from `staging`."""
    os.remove(os.path.join(staging, _OWNER_FILE))


def remove_stale_staging(parent, prefix):
    """Removes the directories `prefix*` in `parent` that
    `owned_staging_dir` made for a process that is gone (on another host:
    a day old). Directories without its mark (a swap's copy of the old
    export, set aside) are left as they are. Returns their names."""
    removed = []
    for name in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        path = os.path.join(parent, name)
        if not name.startswith(prefix) or not os.path.isfile(os.path.join(path, _OWNER_FILE)):
            continue
        if not _is_alive(_read_owner(path), time.time() - os.path.getmtime(path)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
    return removed


@contextlib.contextmanager
def claimed_version(export_dir, version=None):
    """Reserves a version number of `export_dir` for one export, atomically
    (`mkdir` of `.claim-<version>`, which only one process can create):
    two exports at once never pick the same number. `version=None` claims
    the next free number.

    Yields:
        The claimed version.

    Raises:
        FileExistsError: `version` is claimed by a running export.
    """
    os.makedirs(export_dir, exist_ok=True)
    while True:
        if version is None:
            claimed = [
                int(n[len(".claim-") :])
                for n in os.listdir(export_dir)
                if n.startswith(".claim-") and n[len(".claim-") :].isdigit()
            ]
            number = max([0, *existing_versions(export_dir), *claimed]) + 1
        else:
            number = version
        claim = os.path.join(export_dir, _CLAIM.format(version=number))
        try:
            os.mkdir(claim)
            break
        except FileExistsError:
            if version is not None:
                raise FileExistsError(
                    f"Version {version} of {export_dir} is being exported by another process "
                    f"({_read_owner(claim) or 'owner unknown'}); if none runs, remove {claim}."
                ) from None
    try:
        with open(os.path.join(claim, _OWNER_FILE), "w") as f:
            f.write(_owner())
        yield number
    finally:
        shutil.rmtree(claim, ignore_errors=True)


def swap_in(staging, final, aside_prefix):
    """Renames the complete directory `staging` to `final`. An existing
    `final` (an overwrite) is first moved aside, into a temporary
    directory named `aside_prefix...` beside it, moved back if the swap
    fails and deleted once it succeeds: a failure never loses the old one."""
    if not os.path.exists(final):
        os.rename(staging, final)
        return
    old = tempfile.mkdtemp(prefix=aside_prefix, dir=os.path.dirname(os.path.abspath(final)))
    os.rename(final, os.path.join(old, "model"))
    try:
        os.rename(staging, final)
    except BaseException:
        os.rename(os.path.join(old, "model"), final)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
