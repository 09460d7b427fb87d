"""Middleware settings that let robotrl's Cyclone DDS side talk to a stock ROS 2 (Fast DDS or Cyclone).

Two facts drive this module (checked against ROS 2 Kilted from PyPI, ``rmw_fastrtps_cpp``):

* Fast DDS 3 sends XTypes type information that Cyclone rejects (``invalid type object``) for
  every type with a sequence or an array: discovery matches, but no data flows. Cyclone's
  ``<Compatibility><IgnoreTypeInformation>1.15</IgnoreTypeInformation></Compatibility>`` makes
  it match on type names alone, as ROS 2 itself does. ``cyclone_settings`` always carries it.
* Kilted has no ``ROS_LOCALHOST_ONLY``, and ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` alone
  still opens Fast DDS sockets on every interface. ``fastdds_loopback_profile`` is the XML
  profile (UDPv4 on 127.0.0.1 only, builtin transports off, unicast peer 127.0.0.1) that keeps
  Fast DDS on loopback, passed through ``FASTDDS_DEFAULT_PROFILES_FILE``.

``merge_cyclone_uri`` never replaces a user's ``CYCLONEDDS_URI``: Cyclone reads a
comma-separated list of files and XML fragments in order, so robotrl's fragment is appended
after the user's configuration, which stays in force for everything robotrl does not set.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

_COMPAT = "<Compatibility><IgnoreTypeInformation>1.15</IgnoreTypeInformation></Compatibility>"
_INTERFACE = "<Interfaces><NetworkInterface address=\"127.0.0.1\"/></Interfaces>"
_PEER = "<Peers><Peer address=\"127.0.0.1\"/></Peers>"


def cyclone_settings(localhost_only: bool, interface: bool = True, peer: bool = True) -> str:
    """The Cyclone XML fragment of robotrl: type-information compatibility, plus loopback-only when asked.

    Args:
        localhost_only: add 127.0.0.1 as the interface and unicast peer, multicast off.
        interface: include the 127.0.0.1 interface (left out when the user's URI names interfaces:
            Cyclone refuses the same interface twice).
        peer: include the 127.0.0.1 peer (left out when the user's URI already has it).

    """
    loop = ""
    if localhost_only:
        loop = (f"<General>{_INTERFACE if interface else ''}<AllowMulticast>false</AllowMulticast></General>"
                f"<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>120"
                f"</MaxAutoParticipantIndex>{_PEER if peer else ''}</Discovery>")
    return f"<CycloneDDS><Domain id=\"any\">{_COMPAT}{loop}</Domain></CycloneDDS>"


_OURS = {cyclone_settings(lo, i, p) for lo in (False, True) for i in (False, True) for p in (False, True)}


def _source_text(source: str) -> str:
    """The XML of one CYCLONEDDS_URI source: inline XML as is, a readable file's contents, else ""."""
    source = source.strip()
    if source.startswith("<"):
        return source
    path = source[len("file://"):] if source.startswith("file://") else source
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        log.warning("CYCLONEDDS_URI source %r is not readable here; merging without looking inside it", source)
        return ""


def merge_cyclone_uri(user_uri: str | None, localhost_only: bool) -> str:
    """The ``CYCLONEDDS_URI`` to run with: the user's sources first, robotrl's fragment appended.

    Args:
        user_uri: the current ``CYCLONEDDS_URI`` (files, ``file://`` URIs or inline XML,
            comma-separated), or None/"" when unset.
        localhost_only: also confine Cyclone to 127.0.0.1 with unicast discovery.

    Returns:
        The merged URI. robotrl fragments already present (from a parent process, or with the
        other ``localhost_only`` value) are replaced by the one for ``localhost_only``, so the
        value is stable across processes. With ``localhost_only`` and a user configuration that
        names network interfaces of its own, robotrl adds no interface (Cyclone rejects a
        duplicate, and the user's choice stands); a warning says so unless it is 127.0.0.1.

    """
    parts = [p for p in _split_sources((user_uri or "").strip()) if p.strip() not in _OURS]
    user = ",".join(parts)
    text = "".join(_source_text(p) for p in parts)
    has_interface = "NetworkInterface" in text
    if localhost_only and has_interface and "127.0.0.1" not in text:
        log.warning("localhost_only: your CYCLONEDDS_URI names network interfaces; robotrl keeps them and does "
                    "not add 127.0.0.1, so Cyclone is NOT confined to loopback. Name 127.0.0.1 there for that.")
    ours = cyclone_settings(localhost_only, interface=not has_interface,
                            peer="<Peer address=\"127.0.0.1\"" not in text)
    if not user:
        return ours
    log.info("CYCLONEDDS_URI: keeping your configuration, appending robotrl's %s",
             "loopback + type-compatibility settings" if localhost_only else "type-compatibility setting")
    return f"{user},{ours}"


def _split_sources(uri: str) -> list[str]:
    """Split a CYCLONEDDS_URI at top-level commas (commas inside XML fragments are kept)."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in uri:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def apply_cyclone_settings(localhost_only: bool) -> str:
    """Set ``CYCLONEDDS_URI`` to ``merge_cyclone_uri(current, localhost_only)``; return it.

    Cyclone reads the variable when a process creates its first participant on a domain, so
    call this before that (``CycloneTransport`` does).
    """
    merged = merge_cyclone_uri(os.environ.get("CYCLONEDDS_URI"), localhost_only)
    os.environ["CYCLONEDDS_URI"] = merged
    return merged


def fastdds_loopback_profile() -> str:
    """A Fast DDS XML profile keeping every participant of the process on 127.0.0.1.

    UDPv4 with an interface allowlist of 127.0.0.1, builtin transports (shared memory and
    the all-interfaces UDP) off, and 127.0.0.1 as the initial (unicast) discovery peer,
    since multicast does not run on loopback.
    """
    return """<?xml version="1.0" encoding="UTF-8" ?>
<dds xmlns="http://www.eprosima.com">
  <profiles>
    <transport_descriptors>
      <transport_descriptor>
        <transport_id>robotrl_udp_loopback</transport_id>
        <type>UDPv4</type>
        <interfaces>
          <allowlist>
            <interface name="127.0.0.1" netmask_filter="OFF"/>
          </allowlist>
        </interfaces>
      </transport_descriptor>
    </transport_descriptors>
    <participant profile_name="robotrl_loopback" is_default_profile="true">
      <rtps>
        <builtin>
          <initialPeersList>
            <locator><udpv4><address>127.0.0.1</address></udpv4></locator>
          </initialPeersList>
        </builtin>
        <userTransports>
          <transport_id>robotrl_udp_loopback</transport_id>
        </userTransports>
        <useBuiltinTransports>false</useBuiltinTransports>
      </rtps>
    </participant>
  </profiles>
</dds>
"""


def default_fastdds_profile_path() -> Path:
    """The per-user profile file every robotrl process shares: ``$XDG_CACHE_HOME/robotrl/fastdds_loopback.xml``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "robotrl" / "fastdds_loopback.xml"


def _write_temp(text: str, directory: Path | None, prefix: str) -> str:
    """``text`` in a new temporary ``.xml`` file in ``directory`` (the system's temp dir if None); its path."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".xml")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except OSError:
        Path(name).unlink(missing_ok=True)
        raise
    return name


def write_fastdds_loopback_profile(path: str | os.PathLike | None = None) -> Path:
    """Write ``fastdds_loopback_profile()`` to ``path`` and return the path.

    By default the file is ``default_fastdds_profile_path()``, one per user, which every process
    reuses: it is rewritten (atomically) only when it is missing or holds something else, so
    starting nodes leaves no files behind. Where that directory cannot be written, a temporary
    file is used instead.
    """
    text = fastdds_loopback_profile()
    out = Path(path) if path is not None else default_fastdds_profile_path()
    try:
        if out.read_text() == text:
            return out
    except OSError:
        pass
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = _write_temp(text, out.parent, ".fastdds_loopback_")
        try:
            os.replace(tmp, out)
        except OSError:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as err:
        if path is not None:
            raise
        name = _write_temp(text, None, "robotrl_fastdds_loopback_")
        log.warning("cannot write the Fast DDS loopback profile to %s (%s); using %s", out, err, name)
        out = Path(name)
    return out


def loopback_environment(domain_id: int, profile_path: str | os.PathLike) -> dict[str, str]:
    """Environment variables that keep both RMW sides on loopback on a private domain.

    ``ROS_DOMAIN_ID``, ``FASTDDS_DEFAULT_PROFILES_FILE`` (the loopback profile),
    ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and the merged Cyclone URI with loopback.
    """
    return {
        "ROS_DOMAIN_ID": str(int(domain_id)),
        "FASTDDS_DEFAULT_PROFILES_FILE": str(profile_path),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "CYCLONEDDS_URI": merge_cyclone_uri(os.environ.get("CYCLONEDDS_URI"), True),
    }
