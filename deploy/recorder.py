"""Episode recorder: one rosbag2 bag per episode, MCAP storage, written with ``rosbags``.

Messages are stored as the CDR bytes the DDS transport puts on the wire (byte-identical
to ROS 2's serializer, see ``tests/deploy/test_msgs_cdr.py``), each connection with its
message definition and RIHS01 type hash embedded, so ``ros2 bag play``, the ``mcap``
library and ``rosbags`` all read the bag. Writes happen on a background thread fed by a
queue, so the control loop never waits on the disk.

Custom metadata (``metadata.yaml`` ``custom_data``): ``policy_sha256``, ``config_hash``,
``config_yaml``, ``code_version``, ``robot_profile``, ``task`` and ``episode``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path
from typing import Any, Literal, cast

log = logging.getLogger(__name__)

_STOP = object()


def _typestore(version: int) -> Any:
    try:
        from rosbags.typesys import Stores, get_typestore
    except ImportError as exc:
        raise ImportError("Recording bags needs rosbags: pip install robotrl[deploy]") from exc
    return get_typestore(Stores.ROS2_JAZZY if version >= 9 else Stores.ROS2_HUMBLE)


class EpisodeBag:
    """One open bag; ``write`` queues, a thread serializes to disk; ``close`` flushes."""

    def __init__(self, path: Path, metadata: dict[str, str], version: int = 9) -> None:
        self.path = path
        self._metadata, self._version = metadata, version
        self._writer: Any = None
        self._connections: dict[str, Any] = {}
        self._queue: queue.Queue = queue.Queue(maxsize=100_000)
        self.count = 0
        self.dropped = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"bag:{path.name}", daemon=True)
        self._thread.start()

    def write(self, topic: str, msg: Any, wall_ns: int | None = None) -> None:
        """Queue ``msg`` (a ``robotrl.deploy.msgs`` struct) on ``topic`` at ``wall_ns`` (default: now)."""
        try:
            self._queue.put_nowait((topic, msg, wall_ns if wall_ns is not None else time.time_ns()))
        except queue.Full:
            self.dropped += 1

    def _open(self) -> None:
        """Create the bag (on the writer thread: opening takes ~100 ms, too long for a control period)."""
        from rosbags.rosbag2 import StoragePlugin, Writer

        self._store = _typestore(self._version)
        # Writer itself rejects any version but 8 and 9 (WriterError, re-raised by close())
        version = cast("Literal[8, 9]", self._version)
        self._writer = Writer(self.path, version=version, storage_plugin=StoragePlugin.MCAP)
        for key, value in self._metadata.items():
            self._writer.set_custom_data(key, str(value))
        self._writer.open()

    def _run(self) -> None:
        try:
            self._open()
            while (item := self._queue.get()) is not _STOP:
                topic, msg, stamp_ns = item
                conn = self._connections.get(topic)
                if conn is None:
                    conn = self._writer.add_connection(topic, msg.ros_type, typestore=self._store)
                    self._connections[topic] = conn
                self._writer.write(conn, stamp_ns, msg.serialize())
                self.count += 1
        except BaseException as exc:  # surfaced by close(); the control loop must keep running
            self._error = exc
            log.error("bag writer %s failed: %s", self.path, exc)

    def close(self) -> Path:
        """Flush the queue and close the bag; re-raises a write error from the thread."""
        self._queue.put(_STOP)
        self._thread.join()
        if self._writer is not None:
            self._writer.close()
        if self._error is not None:
            raise RuntimeError(f"writing {self.path} failed") from self._error
        if self.dropped:
            log.warning("bag %s: %d messages dropped (queue full)", self.path, self.dropped)
        log.info("closed bag %s (%d messages)", self.path, self.count)
        return self.path


class Recorder:
    """Opens a new ``EpisodeBag`` under ``root`` per episode (``episode_0001``, ...)."""

    def __init__(self, root: str | Path, metadata: dict[str, str], version: int = 9) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.metadata, self.version = metadata, version
        self.episode = 0
        self.bag: EpisodeBag | None = None
        self.closed: list[Path] = []

    def start_episode(self) -> EpisodeBag:
        """Close the current bag (if any) and open the next episode's."""
        self.stop_episode()
        self.episode += 1
        stamp = time.strftime("%Y%m%d_%H%M%S")
        path = self.root / f"episode_{self.episode:04d}_{stamp}"
        self.bag = EpisodeBag(path, {**self.metadata, "episode": str(self.episode)}, self.version)
        return self.bag

    def write(self, topic: str, msg: Any, wall_ns: int | None = None) -> None:
        """Record into the open episode; a no-op between episodes."""
        if self.bag is not None:
            self.bag.write(topic, msg, wall_ns)

    def stop_episode(self) -> None:
        """Close the open bag, if any."""
        if self.bag is not None:
            self.closed.append(self.bag.close())
            self.bag = None
