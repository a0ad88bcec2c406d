"""Starting or joining the Ray cluster.

By default a local cluster is started for the run, sized to the machine, without the
dashboard; ``address`` joins an existing cluster instead (``ray start --head`` on a machine,
the KubeRay RayJob in ``infra/``).
"""

from __future__ import annotations

import logging
import os

from yamblab.errors import YamblabError

#: seconds a join may take to reach the head's port, and Ray's own tries at its GCS (about a
#: second each): a cluster that cannot be joined is named within 15 s, not after Ray's minutes
REACH_SECONDS = 5.0
GCS_TRIES = 5


class ClusterError(YamblabError, ConnectionError):
    """A Ray cluster that cannot be joined: no such host, nothing answering, a refused token,
    another Ray version. The message names the address and what to do."""


def init_ray(address: str | None = None, num_cpus: int | None = None, num_gpus: int | None = None) -> bool:
    """Start a local Ray cluster, or connect to ``address`` (e.g. ``"auto"``, ``"ray://host:10001"``).

    Returns whether it did: False (and nothing done) where Ray is already initialised in this
    process, whose owner then shuts it down.
    """
    import signal
    import threading

    import ray

    if ray.is_initialized():
        return False
    # Ray's driver sets a SIGTERM handler that exits at once; one that makes SIGTERM take
    # Ctrl-C's path (yamblab.cli.common.interrupt_on_sigterm) is kept
    main = threading.current_thread() is threading.main_thread()
    keep = main and signal.getsignal(signal.SIGTERM) is signal.default_int_handler
    try:
        _init(address, num_cpus, num_gpus)
    finally:
        if keep:
            signal.signal(signal.SIGTERM, signal.default_int_handler)
    return True


def _init(address: str | None, num_cpus: int | None, num_gpus: int | None) -> None:
    import ray

    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        _join(address)
        return
    # A new local cluster takes Ray's default, token authentication; Ray says so in a warning at
    # every start (with RAY_AUTH_MODE unset) that asks nothing of the user: keep it quiet (the
    # warning that authentication is *disabled*, with RAY_AUTH_MODE=disabled, is kept)
    if os.environ.get("RAY_AUTH_MODE") is None:
        logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    if num_cpus is None:
        num_cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    ray.init(num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False,
             logging_level=logging.WARNING, log_to_driver=False)


def cluster_has_gpu() -> bool:
    """Whether the connected Ray cluster offers at least one GPU."""
    import ray

    return ray.cluster_resources().get("GPU", 0) >= 1


def _join(address: str) -> None:
    """``ray.init`` on an existing cluster, refusing one that cannot be joined in one line
    (:class:`ClusterError`) within about 15 s: the head's port is tried first (a name that does
    not resolve, or nothing answering, takes Ray minutes of warnings); then Ray gets a few tries
    at its GCS. A token found on this machine (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
    ``~/.ray/auth_token``) is sent when ``RAY_AUTH_MODE`` is unset, as Ray itself does for
    ``auto``: a cluster started by ``ray start`` wants one by default, and one without
    authentication ignores it."""
    import ray

    if address != "auto":
        _reach(address)
    sent_token = _token_mode()
    before = os.environ.get("RAY_gcs_server_port_wait_time_s")
    os.environ["RAY_gcs_server_port_wait_time_s"] = before or str(GCS_TRIES)
    from ray.exceptions import AuthenticationError

    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except AuthenticationError:      # RAY_AUTH_MODE=token, and no token on this machine
        raise ClusterError(f"cannot join the Ray cluster at {address}: RAY_AUTH_MODE is token but this machine "
                           "has no token; give the head's (`ray get-auth-token` there) in RAY_AUTH_TOKEN") from None
    except (ConnectionError, RuntimeError) as exc:
        raise ClusterError(_join_failure(address, exc, sent_token)) from None
    finally:
        if before is None:
            os.environ.pop("RAY_gcs_server_port_wait_time_s", None)


def _reach(address: str) -> None:
    """Refuse an address whose host does not resolve or whose port does not answer within
    :data:`REACH_SECONDS` (``HOST:PORT`` or ``ray://HOST:PORT``)."""
    import concurrent.futures
    import socket

    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rstrip("/").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClusterError(f"--address {address!r}: expected HOST:PORT (the head's GCS port, 6379 by default), "
                           "ray://HOST:10001 or auto")
    host = host.strip("[]")
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:   # the name lookup has no timeout of its own
        infos = pool.submit(socket.getaddrinfo, host, int(port), type=socket.SOCK_STREAM).result(REACH_SECONDS)
    except concurrent.futures.TimeoutError:
        raise ClusterError(f"cannot join the Ray cluster at {address}: looking up {host!r} took over "
                           f"{REACH_SECONDS:g} s") from None
    except (socket.gaierror, UnicodeError, OverflowError) as exc:
        raise ClusterError(f"cannot join the Ray cluster at {address}: no host {host!r} ({exc}); "
                           "check the head's name or IP") from None
    finally:
        pool.shutdown(wait=False)
    last = None
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.settimeout(REACH_SECONDS)
                s.connect(sockaddr)
            return
        except OSError as exc:
            last = exc
    why = "no answer" if isinstance(last, (TimeoutError, socket.timeout)) else (last.strerror or str(last))
    raise ClusterError(f"cannot join the Ray cluster at {address}: {why} on port {port} of {host}; start its head "
                       f"there (ray start --head --port {port}) or check the address")


def _token_mode() -> bool:
    """Whether this driver sends a token: ``RAY_AUTH_MODE=token``, or the mode unset and a token
    on this machine (the mode is then set to ``token`` for this process and its children)."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None:
        return mode.lower() == "token"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    if os.environ.get("RAY_AUTH_TOKEN") or os.path.isfile(path):
        os.environ["RAY_AUTH_MODE"] = "token"
        return True
    return False


def _join_failure(address: str, exc: BaseException, sent_token: bool) -> str:
    """The line that names why ``ray.init(address)`` failed, from the exception and its causes."""
    text, seen = "", exc
    while seen is not None:
        text += f" {seen}"
        seen = seen.__cause__ or seen.__context__
    if "Version mismatch" in text:
        import ray

        first = " ".join(text.split("Version mismatch", 1)[1].split())[:200]
        return (f"cannot join the Ray cluster at {address}: another Ray or Python version ({first}); this "
                f"driver has Ray {ray.__version__}: run it with the cluster's versions")
    if "InvalidAuthToken" in text or "Unauthenticated" in text:
        if sent_token:
            return (f"cannot join the Ray cluster at {address}: it refused this machine's token; give the "
                    "head's (`ray get-auth-token` there) in RAY_AUTH_TOKEN")
        return (f"cannot join the Ray cluster at {address}: it wants a token (Ray's default); give the head's "
                "(`ray get-auth-token` there) in RAY_AUTH_TOKEN")
    if "Could not find any running Ray instance" in text:
        return ("--address auto: no Ray cluster runs on this machine; start one (ray start --head) or give "
                "the head's HOST:PORT")
    return (f"cannot join the Ray cluster at {address}: no Ray head answered there; check the address (the "
            "head's GCS port, 6379 by default)")
