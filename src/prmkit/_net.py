"""Network helpers shared by the servers (``prmkit serve``, ``prmkit annotate serve``)."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1, bracketed or not).

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("[::1]"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
