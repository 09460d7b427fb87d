"""Object pose on a real robot (tool_use): an ArUco marker detector and a point-cloud ICP, both -> PoseStamped.

Two sources of ``geometry_msgs/PoseStamped`` for the tool's pose in the camera's optical frame
(x right, y down, z forward, as ``sensor_msgs/CameraInfo`` and OpenCV define it):

* ``ArucoPoseSource``: an ArUco marker fixed on the tool; OpenCV detects its corners in an image
  and ``solvePnP`` (``SOLVEPNP_IPPE_SQUARE``) gives the marker pose from the camera intrinsics of a
  ``CameraInfo``; the known marker-in-object transform gives the object pose.
* ``IcpPoseSource``: the tool's geometry (points sampled from its generated mesh) registered by
  Open3D ICP (point-to-point, then point-to-plane, coarse to fine) against the cloud
  back-projected from a depth image, from an initial guess (the previous pose, or the ArUco one).

Poses are ``ObjectPose``: position ``(3,)`` metres and quaternion ``(4,)`` (w, x, y, z); the ROS
message order (x, y, z, w) appears only in ``to_pose_stamped`` and in the node's pose parameters.
Needs ``pip install 'robotrl[vision]'`` (opencv-python-headless, open3d-cpu; Open3D loads
``libusb-1.0-0``).

``robotrl-object-pose`` (``ObjectPoseNode``, ``main``) runs a source on camera topics::

    robotrl-object-pose method:=aruco marker_id:=7 marker_length:=0.05 \
        marker_in_object:="[0, 0, 0.012, 0, 0, 0, 1]" camera_pose:="[x, y, z, qx, qy, qz, qw]" \
        object_box:="[cx, cy, cz, hx, hy, hz, rest_height]"

It reads ``sensor_msgs/CameraInfo`` (``camera_info``) and ``sensor_msgs/Image`` (``image``: rgb8,
bgr8 or mono8; ``depth``: 32FC1 metres or 16UC1 millimetres, registered to the colour camera, same
intrinsics), estimates the pose of the newest frame and publishes ``geometry_msgs/PoseStamped`` on
``output`` (stamped with the image's stamp). ``method``: ``aruco``; ``icp`` (from ``initial_pose``,
then from its previous estimate); ``aruco_icp`` (ICP seeded with each ArUco pose: the most accurate,
see ``deploy/README.md``). With ``camera_pose`` (the camera's optical frame in the world frame, from a
hand-eye calibration) the pose is given in ``frame_id`` (default ``world``, the frame the policy node
expects); without it, in the camera's frame. ``object_box`` is published latched on
``object_box_topic`` for the policy node. Pose parameters are ``[x, y, z, qx, qy, qz, qw]`` (ROS
order, as ``tf2``). ``model_points``: a ``.npy`` of ``(M, 3)`` surface points of the object (ICP).
Also ``transport``, ``domain_id``, ``localhost_only``, ``duration_s``, ``log_level``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from robotrl.deploy import msgs
from robotrl.deploy.cli import StopSignals, console_front
from robotrl.deploy.transport import Qos, make_transport

log = logging.getLogger("robotrl.object_pose")


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as exc:
        raise ImportError("the ArUco object-pose source needs OpenCV: pip install 'robotrl[vision]'") from exc
    return cv2


def _o3d() -> Any:
    try:
        import open3d
    except ImportError as exc:
        raise ImportError("the ICP object-pose source needs Open3D: pip install 'robotrl[vision]' (and the system "
                          "library libusb-1.0-0: apt-get install libusb-1.0-0)") from exc
    return open3d


@dataclass
class Intrinsics:
    """Pinhole intrinsics (pixels) and distortion of a camera.

    Attributes:
        fx, fy, cx, cy: focal lengths and principal point.
        width, height: image size.
        dist: distortion coefficients (plumb_bob ``k1 k2 t1 t2 k3``), zeros for none.

    """

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int
    dist: np.ndarray

    @classmethod
    def from_camera_info(cls, info: Any) -> Intrinsics:
        """From a ``sensor_msgs/CameraInfo`` (``k`` row-major 3x3, ``d``)."""
        k = np.asarray(info.k, dtype=np.float64).reshape(3, 3)
        if k[0, 0] <= 0 or k[1, 1] <= 0:
            raise ValueError(f"CameraInfo has no intrinsics (K = {k.tolist()}); calibrate the camera first.")
        dist = np.asarray(info.d, dtype=np.float64) if len(info.d) else np.zeros(5)
        return cls(k[0, 0], k[1, 1], k[0, 2], k[1, 2], int(info.width), int(info.height), dist)

    def matrix(self) -> np.ndarray:
        """``(3, 3)`` camera matrix K."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])


def camera_info_from_fovy(width: int, height: int, fovy_deg: float, frame_id: str = "camera_optical") -> Any:
    """The ``CameraInfo`` of an ideal pinhole camera with vertical field of view ``fovy_deg`` (a MuJoCo camera)."""
    f = 0.5 * height / np.tan(np.radians(fovy_deg) / 2)
    cx, cy = (width - 1) / 2, (height - 1) / 2
    return msgs.CameraInfo(header=msgs.Header(frame_id=frame_id), height=height, width=width,
                           distortion_model="plumb_bob", d=[0.0] * 5,
                           k=[f, 0.0, cx, 0.0, f, cy, 0.0, 0.0, 1.0], r=[1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0],
                           p=[f, 0.0, cx, 0.0, 0.0, f, cy, 0.0, 0.0, 0.0, 1.0, 0.0])


@dataclass
class ObjectPose:
    """A rigid pose: ``position`` ``(3,)`` (m), ``quat`` ``(4,)`` (w, x, y, z), plus a quality score."""

    position: np.ndarray
    quat: np.ndarray
    score: float = 1.0

    def matrix(self) -> np.ndarray:
        """``(4, 4)`` homogeneous transform."""
        out = np.eye(4)
        out[:3, :3] = rot_from_wxyz(self.quat)
        out[:3, 3] = self.position
        return out

    @classmethod
    def from_matrix(cls, t: np.ndarray, score: float = 1.0) -> ObjectPose:
        """From a ``(4, 4)`` homogeneous transform."""
        return cls(np.asarray(t[:3, 3], dtype=np.float64).copy(), wxyz_from_rot(t[:3, :3]), score)


def rot_from_wxyz(q: np.ndarray) -> np.ndarray:
    """``(3, 3)`` rotation of unit quaternion ``q`` (w, x, y, z)."""
    w, x, y, z = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def wxyz_from_rot(r: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z), ``w >= 0``, of rotation matrix ``r`` ``(3, 3)``."""
    m = np.asarray(r, dtype=np.float64)
    tr = np.trace(m)
    if tr > 0:
        s = 2.0 * np.sqrt(tr + 1.0)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        q = [0.0, 0.0, 0.0, 0.0]
        q[0] = (m[k, j] - m[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j, i] + m[i, j]) / s
        q[1 + k] = (m[k, i] + m[i, k]) / s
    quat = np.asarray(q)
    quat /= np.linalg.norm(quat)
    return quat if quat[0] >= 0 else -quat


def pose_error(a: ObjectPose, b: ObjectPose) -> tuple[float, float]:
    """``(position error m, rotation error deg)`` between two poses."""
    dr = rot_from_wxyz(a.quat).T @ rot_from_wxyz(b.quat)
    angle = np.degrees(np.arccos(np.clip((np.trace(dr) - 1.0) / 2.0, -1.0, 1.0)))
    return float(np.linalg.norm(a.position - b.position)), float(angle)


def to_pose_stamped(pose: ObjectPose, header: Any) -> Any:
    """A ``geometry_msgs/PoseStamped`` (quaternion in ROS order x, y, z, w)."""
    w, x, y, z = (float(v) for v in pose.quat)
    p = pose.position
    return msgs.PoseStamped(header=header, pose=msgs.Pose(msgs.Point(float(p[0]), float(p[1]), float(p[2])),
                                                          msgs.Quaternion(x=x, y=y, z=z, w=w)))


class ArucoPoseSource:
    """Object pose from one ArUco marker on it (module docstring).

    Args:
        marker_id: the marker's id in ``dictionary``.
        marker_length: side of the marker's black square (m).
        marker_in_object: ``(4, 4)`` pose of the marker frame in the object frame (marker frame:
            origin at the square's centre, x right and y up in the printed image, z out of it).
        dictionary: OpenCV predefined dictionary name.

    """

    def __init__(self, marker_id: int, marker_length: float, marker_in_object: np.ndarray | None = None,
                 dictionary: str = "DICT_4X4_50") -> None:
        cv2 = _cv2()
        self.cv2 = cv2
        self.marker_id, self.length = int(marker_id), float(marker_length)
        self.marker_in_object = np.eye(4) if marker_in_object is None else np.asarray(marker_in_object, np.float64)
        self.object_in_marker = np.linalg.inv(self.marker_in_object)
        self.dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, dictionary))
        params = cv2.aruco.DetectorParameters()
        params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
        self.detector = cv2.aruco.ArucoDetector(self.dictionary, params)
        h = self.length / 2
        # OpenCV's corner order: top-left, top-right, bottom-right, bottom-left of the printed marker
        self.corners3d = np.array([[-h, h, 0.0], [h, h, 0.0], [h, -h, 0.0], [-h, -h, 0.0]])

    def marker_image(self, pixels: int) -> np.ndarray:
        """The printable marker ``(pixels, pixels)`` uint8 (for the sim's texture, or to print)."""
        return self.cv2.aruco.generateImageMarker(self.dictionary, self.marker_id, pixels)

    def estimate(self, image: np.ndarray, intrinsics: Intrinsics) -> ObjectPose | None:
        """The object pose in the camera's optical frame, or None when the marker is not seen.

        Args:
            image: ``(H, W)`` grey or ``(H, W, 3)`` RGB uint8.
            intrinsics: the camera's (``Intrinsics.from_camera_info``).

        """
        cv2 = self.cv2
        grey = image if image.ndim == 2 else cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
        corners, ids, _ = self.detector.detectMarkers(grey)
        if ids is None:
            return None
        hits = [c for c, i in zip(corners, ids.reshape(-1), strict=True) if int(i) == self.marker_id]
        if not hits:
            return None
        ok, rvec, tvec = cv2.solvePnP(self.corners3d, hits[0].reshape(4, 2).astype(np.float64), intrinsics.matrix(),
                                      intrinsics.dist, flags=cv2.SOLVEPNP_IPPE_SQUARE)
        if not ok:
            return None
        cam_marker = np.eye(4)
        cam_marker[:3, :3] = cv2.Rodrigues(rvec)[0]
        cam_marker[:3, 3] = tvec.reshape(3)
        return ObjectPose.from_matrix(cam_marker @ self.object_in_marker)


def depth_to_points(depth: np.ndarray, intrinsics: Intrinsics, max_depth: float = 5.0) -> np.ndarray:
    """``(K, 3)`` optical-frame points of the valid pixels of ``depth`` ``(H, W)`` (metres)."""
    h, w = depth.shape
    v, u = np.mgrid[0:h, 0:w]
    z = depth.astype(np.float64)
    ok = np.isfinite(z) & (z > 0) & (z < max_depth)
    x = (u[ok] - intrinsics.cx) * z[ok] / intrinsics.fx
    y = (v[ok] - intrinsics.cy) * z[ok] / intrinsics.fy
    return np.stack([x, y, z[ok]], axis=1)


class IcpPoseSource:
    """Object pose by ICP of its model points against a depth camera's cloud (module docstring).

    Args:
        model_points: ``(M, 3)`` points on the object's surface, object frame (e.g. sampled from
            the tool's generated mesh).
        voxel: down-sampling voxel size (m) of both clouds.
        max_correspondence: ICP correspondence distance (m); the initial guess must be closer.
        crop_radius: scene points farther than this from the initial guess are dropped (m).

    """

    def __init__(self, model_points: np.ndarray, voxel: float = 0.002, max_correspondence: float = 0.02,
                 crop_radius: float = 0.15) -> None:
        self.o3d = _o3d()
        self.model = self._cloud(np.asarray(model_points, dtype=np.float64), voxel)
        self.model.estimate_normals(self.o3d.geometry.KDTreeSearchParamHybrid(radius=4 * max(voxel, 1e-3), max_nn=30))
        self.voxel, self.max_corr, self.crop = voxel, max_correspondence, crop_radius

    def _cloud(self, points: np.ndarray, voxel: float) -> Any:
        pc = self.o3d.geometry.PointCloud(self.o3d.utility.Vector3dVector(points))
        return pc.voxel_down_sample(voxel) if voxel > 0 else pc

    def estimate(self, depth: np.ndarray, intrinsics: Intrinsics, initial: ObjectPose) -> ObjectPose | None:
        """The object pose in the optical frame from ``depth`` ``(H, W)`` metres, starting at ``initial``.

        Returns None when too few scene points lie near the initial guess. ``score`` is ICP's
        fitness (share of scene points with a model point within the correspondence distance).
        """
        points = depth_to_points(depth, intrinsics)
        near = np.linalg.norm(points - initial.position, axis=1) < self.crop
        if near.sum() < 30:
            return None
        scene = self._cloud(points[near], self.voxel)
        reg = self.o3d.pipelines.registration
        # scene -> model: every seen point lies on the model, while the model's hidden faces have no
        # counterpart in the scene (registering model -> scene would be pulled toward them)
        # coarse to fine: point-to-point within max_correspondence, then point-to-plane (the model's
        # face normals) with a shrinking correspondence distance
        criteria = reg.ICPConvergenceCriteria(max_iteration=100, relative_rmse=1e-9, relative_fitness=1e-9)
        t = np.linalg.inv(initial.matrix())
        result = reg.registration_icp(scene, self.model, self.max_corr, t,
                                      reg.TransformationEstimationPointToPoint(), criteria)
        for dist in (self.max_corr / 2, self.max_corr / 4):
            result = reg.registration_icp(scene, self.model, dist, result.transformation,
                                          reg.TransformationEstimationPointToPlane(), criteria)
        return ObjectPose.from_matrix(np.linalg.inv(np.asarray(result.transformation)), float(result.fitness))


# --- the node: camera topics -> PoseStamped ----------------------------------------------------------
DEFAULTS: dict[str, Any] = {
    "method": "aruco", "image": "/camera/image_raw", "camera_info": "/camera/camera_info",
    "depth": "/camera/depth/image_raw", "output": "/object_pose", "object_box_topic": "/robotrl/object_box",
    "marker_id": 0, "marker_length": 0.05, "marker_in_object": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    "dictionary": "DICT_4X4_50", "model_points": "", "initial_pose": [], "camera_pose": [], "frame_id": "world",
    "object_box": [], "transport": "auto", "domain_id": None, "localhost_only": False, "duration_s": 0.0,
    "log_level": "INFO",
}
METHODS = ("aruco", "icp", "aruco_icp")
# camera drivers publish RELIABLE or BEST_EFFORT: a BEST_EFFORT reader matches both; keep the newest frame
CAMERA_QOS = Qos(reliable=False, depth=2)
POSE_QOS = Qos(reliable=True, depth=1)  # default-QoS (RELIABLE) ROS subscribers receive it
LATCHED_QOS = Qos(reliable=True, depth=1, transient_local=True)


def pose_from_ros(values: list[float], what: str) -> ObjectPose:
    """An ``ObjectPose`` from ``[x, y, z, qx, qy, qz, qw]`` (a node parameter, ROS order).

    Raises:
        ValueError: naming the parameter when it has not 7 finite values or a zero quaternion.

    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.shape != (7,) or not np.all(np.isfinite(v)) or np.linalg.norm(v[3:]) < 1e-9:
        raise ValueError(f"{what}:={list(values)} must be [x, y, z, qx, qy, qz, qw] (7 finite numbers, a unit "
                         "quaternion in ROS order).")
    q = np.array([v[6], v[3], v[4], v[5]])
    return ObjectPose(v[:3].copy(), q / np.linalg.norm(q))


def image_to_array(msg: Any) -> np.ndarray:
    """``(H, W, 3)`` RGB uint8, ``(H, W)`` uint8 (mono8) or ``(H, W)`` float64 metres (32FC1, 16UC1 in mm).

    Raises:
        ValueError: for another encoding or a size that does not match ``height``/``step``.

    """
    raw = msg.data
    buf = np.frombuffer(bytes(raw) if isinstance(raw, list) else raw, dtype=np.uint8)
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    if buf.size != h * step:
        raise ValueError(f"Image {w}x{h} ({msg.encoding}) has {buf.size} bytes; height * step = {h * step}.")
    rows = buf.reshape(h, step)
    big = ">" if msg.is_bigendian else "<"
    if msg.encoding in ("rgb8", "bgr8"):
        rgb = rows[:, : 3 * w].reshape(h, w, 3)
        return rgb[..., ::-1].copy() if msg.encoding == "bgr8" else rgb.copy()
    if msg.encoding == "mono8":
        return rows[:, :w].copy()
    if msg.encoding == "32FC1":
        return rows[:, : 4 * w].copy().view(f"{big}f4").reshape(h, w).astype(np.float64)
    if msg.encoding == "16UC1":
        depth = rows[:, : 2 * w].copy().view(f"{big}u2").reshape(h, w).astype(np.float64) * 1e-3
        depth[depth == 0] = np.nan  # 0 = no return
        return depth
    raise ValueError(f"Image encoding {msg.encoding!r} is not handled; use rgb8, bgr8, mono8 (colour) or 32FC1, "
                     "16UC1 (depth).")


class ObjectPoseNode:
    """Camera topics in, the object's ``PoseStamped`` out (module docstring).

    Args:
        params: ``DEFAULTS`` keys.
        transport: the ROS 2 transport (default: one built from ``params``).

    Attributes:
        published: poses published so far. missed: frames in which the object was not found.

    """

    def __init__(self, params: dict[str, Any], transport: Any = None) -> None:
        self.params = p = params
        if p["method"] not in METHODS:
            raise ValueError(f"method:={p['method']!r}; valid: {', '.join(METHODS)}.")
        self.aruco = self.icp = None
        if p["method"] in ("aruco", "aruco_icp"):
            marker = pose_from_ros(p["marker_in_object"], "marker_in_object").matrix()
            self.aruco = ArucoPoseSource(int(p["marker_id"]), float(p["marker_length"]), marker, str(p["dictionary"]))
        if p["method"] in ("icp", "aruco_icp"):
            if not p["model_points"]:
                raise ValueError(f"method:={p['method']} needs model_points:=<.npy of (M, 3) surface points of the "
                                 "object, object frame>.")
            self.icp = IcpPoseSource(np.load(p["model_points"]))
        self.previous = pose_from_ros(p["initial_pose"], "initial_pose") if p["initial_pose"] else None
        if p["method"] == "icp" and self.previous is None:
            raise ValueError("method:=icp needs initial_pose:=[x, y, z, qx, qy, qz, qw] (camera frame) to start from.")
        self.world_camera = pose_from_ros(p["camera_pose"], "camera_pose").matrix() if p["camera_pose"] else None
        if self.world_camera is None:
            log.warning("no camera_pose: poses are published in the camera's frame; the policy node expects "
                        "the task's world frame (profile topics.object_frame) and drops them")
        if transport is None:
            domain = p["domain_id"] if p["domain_id"] is not None else int(os.environ.get("ROS_DOMAIN_ID", 0))
            declared = {k: ([float(x) for x in v] if isinstance(v, list) else v) for k, v in p.items() if k in DEFAULTS}
            transport = make_transport(p["transport"], int(domain), bool(p["localhost_only"]),
                                       p.get("node_name", "robotrl_object_pose"), p.get("namespace", "/"), declared)
        self.transport = transport
        remap = p.get("remap", lambda t: t)
        self.sub_info = transport.subscription(remap(p["camera_info"]), msgs.CameraInfo, CAMERA_QOS)
        self.sub_image = (transport.subscription(remap(p["image"]), msgs.Image, CAMERA_QOS)
                          if self.aruco is not None else None)
        self.sub_depth = (transport.subscription(remap(p["depth"]), msgs.Image, CAMERA_QOS)
                          if self.icp is not None else None)
        self.pub = transport.publisher(remap(p["output"]), msgs.PoseStamped, POSE_QOS)
        if p["object_box"]:
            box = [float(v) for v in p["object_box"]]
            if len(box) != 7:
                raise ValueError(f"object_box:={p['object_box']} must be [cx, cy, cz, hx, hy, hz, rest_height].")
            self.pub_box = transport.publisher(remap(p["object_box_topic"]), msgs.Float64MultiArray, LATCHED_QOS)
            self.pub_box.publish(msgs.Float64MultiArray(data=box))
        self.intrinsics: Intrinsics | None = None
        self.camera_frame = ""
        self.published = self.missed = 0
        self._stop = False

    def estimate(self, image: np.ndarray | None, depth: np.ndarray | None) -> ObjectPose | None:
        """The object pose in the camera's optical frame from the newest frames (None: not found)."""
        assert self.intrinsics is not None
        pose = self.aruco.estimate(image, self.intrinsics) if self.aruco is not None and image is not None else None
        if self.icp is not None and depth is not None:
            start = pose if pose is not None else (self.previous if self.aruco is None else None)
            if start is not None:
                pose = self.icp.estimate(depth, self.intrinsics, start)
        if pose is not None:
            self.previous = pose
        return pose

    def spin_once(self) -> ObjectPose | None:
        """Process the newest frame, if any; publish and return its pose (in the output frame)."""
        self.transport.spin_once()
        infos = self.sub_info.take()
        if infos:
            info = infos[-1][1]
            self.intrinsics, self.camera_frame = Intrinsics.from_camera_info(info), info.header.frame_id
        main = self.sub_image if self.sub_image is not None else self.sub_depth
        assert main is not None  # every method (METHODS, checked in __init__) subscribes to image or depth
        frames = main.take()
        if not frames or self.intrinsics is None:
            return None
        msg = frames[-1][1]
        image = image_to_array(msg) if self.sub_image is not None else None
        depth = None
        if self.sub_depth is not None:
            depths = frames if self.sub_image is None else self.sub_depth.take()
            depth = image_to_array(depths[-1][1]) if depths else None
        pose = self.estimate(image, depth)
        if pose is None:
            self.missed += 1
            log.debug("object not found in frame %d", self.published + self.missed)
            return None
        frame = self.camera_frame
        if self.world_camera is not None:
            pose = ObjectPose.from_matrix(self.world_camera @ pose.matrix(), pose.score)
            frame = str(self.params["frame_id"])
        self.pub.publish(to_pose_stamped(pose, msgs.Header(stamp=msg.header.stamp, frame_id=frame)))
        self.published += 1
        return pose

    def request_stop(self, signum: int = 0, _frame: Any = None) -> None:
        """Signal handler: stop at the next iteration."""
        self._stop = True

    def run(self, duration_s: float = 0.0) -> int:
        """Process frames until stopped (or ``duration_s``)."""
        start = time.monotonic()
        while not self._stop and (duration_s <= 0 or time.monotonic() - start < duration_s):
            if self.spin_once() is None:
                time.sleep(0.001)
        log.info("object pose: %d poses published, %d frames without the object", self.published, self.missed)
        self.transport.close()
        return 0


def main(argv: list[str] | None = None) -> int:
    """Console script ``robotrl-object-pose``; see the module docstring."""
    front = console_front(sys.argv[1:] if argv is None else argv, __doc__ or "", "robotrl_object_pose", DEFAULTS,
                          "robotrl-object-pose")
    if isinstance(front, int):
        return front
    args, params = front
    params.update(remap=args.remap, node_name=args.node_name, namespace=args.namespace)
    signals = StopSignals()  # a Ctrl-C during set-up stops the node cleanly once it exists
    node = ObjectPoseNode(params)
    signals.attach(node.request_stop)
    return node.run(float(params["duration_s"]))


if __name__ == "__main__":
    sys.exit(main())
