"""Name the current OS thread (Linux), so `top -H` / `ps -L` tell the collector's threads apart."""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

_PR_SET_NAME = 15
_libc = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:  # no libc to call: names are a convenience only
        _libc = None


def name_os_thread(name: str) -> None:
    if _libc is not None:
        _libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
