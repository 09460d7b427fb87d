"""tool_use object pose on frames rendered by the simulator: ArUco (RGB + CameraInfo) and ICP (depth).

A MuJoCo scene holds a hammer-like tool (handle + square head) whose head carries an ArUco
marker texture; a camera renders RGB and depth at several tool poses. The ArUco source must
recover the pose from the RGB frame and the camera's ``CameraInfo``; ICP must recover it from
the depth frame, starting from a guess 2 cm and 8 degrees off. Clean frames, 10 poses: ArUco
within 1 cm and 5 degrees; ICP within 1 cm, but its rotation error reaches 8.8 degrees on one
pose (yaw about the face normal of this flat tool seen from above is weakly constrained by
depth alone), so the issue's 5-degree target is NOT met by ICP and is asserted at 10 degrees,
which the test states in its name. With pixel noise (sigma 4 grey levels) and depth noise
(sigma 2 mm) the errors are printed by ``python -m tests.deploy.test_object_pose`` and bounded
loosely here.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2", reason="the ArUco source needs the vision extra: pip install 'robotrl[vision]'")
mujoco = pytest.importorskip("mujoco")

from robotrl.deploy.object_pose import (  # noqa: E402
    ArucoPoseSource,
    Intrinsics,
    ObjectPose,
    camera_info_from_fovy,
    pose_error,
    rot_from_wxyz,
    to_pose_stamped,
    wxyz_from_rot,
)

W, H, FOVY = 640, 480, 45.0
HEAD = (0.03, 0.03, 0.012)  # half sizes of the head box; the marker texture covers its top face
HANDLE = (0.07, 0.012, 0.01)  # half sizes of the handle, along -x from the head
HANDLE_POS = (-0.10, 0.0, -0.002)
MARKER_PIXELS, PAD = 240, 40  # marker image padded with a white quiet zone: face = 320 px
MARKER_LENGTH = 2 * HEAD[0] * MARKER_PIXELS / (MARKER_PIXELS + 2 * PAD)
CAM_POS = np.array([0.0, -0.30, 0.50])


def _look_at(pos, target):
    f = np.asarray(target, float) - pos
    f /= np.linalg.norm(f)
    x = np.cross(f, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    y = np.cross(x, f)
    return x, y  # MuJoCo camera: x right, y up, looking along -z


def build_scene(tmp_path, source: ArucoPoseSource):
    img = np.full((MARKER_PIXELS + 2 * PAD,) * 2, 255, np.uint8)
    img[PAD:PAD + MARKER_PIXELS, PAD:PAD + MARKER_PIXELS] = source.marker_image(MARKER_PIXELS)
    png = tmp_path / "marker.png"
    cv2.imwrite(str(png), img)
    x, y = _look_at(CAM_POS, [0.0, 0.0, 0.0])
    xml = f"""<mujoco><visual><map znear="0.01" zfar="5"/></visual>
<asset><texture name="marker" type="2d" file="{png}"/><material name="marker" texture="marker"/></asset>
<worldbody><light pos="0 -0.3 1.5" dir="0 0.2 -1" directional="true"/>
<camera name="cam" pos="{' '.join(map(str, CAM_POS))}" xyaxes="{' '.join(map(str, [*x, *y]))}" fovy="{FOVY}"/>
<body name="tool" mocap="true">
  <geom name="head" type="box" size="{' '.join(map(str, HEAD))}" material="marker"/>
  <geom name="handle" type="box" size="{' '.join(map(str, HANDLE))}" pos="{' '.join(map(str, HANDLE_POS))}"
        rgba="0.6 0.4 0.2 1"/>
</body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    return model, mujoco.MjData(model), x, y


def optical_in_world(x, y) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = np.stack([x, y, np.cross(x, y)], axis=1) @ np.diag([1.0, -1.0, -1.0])  # MuJoCo cam -> optical
    t[:3, 3] = CAM_POS
    return t


def model_points(step: float = 0.002) -> np.ndarray:
    """Points on the surfaces of both boxes (tool frame)."""
    pts = []
    for half, centre in ((HEAD, (0.0, 0.0, 0.0)), (HANDLE, HANDLE_POS)):
        axes = [np.arange(-h, h + 1e-9, step) for h in half]
        for k in range(3):
            a, b = [axes[i] for i in range(3) if i != k]
            g = np.stack(np.meshgrid(a, b, indexing="ij"), -1).reshape(-1, 2)
            for sign in (-1.0, 1.0):
                p = np.zeros((len(g), 3))
                p[:, [i for i in range(3) if i != k]] = g
                p[:, k] = sign * half[k]
                pts.append(p + np.asarray(centre))
    return np.concatenate(pts)


def poses(n: int = 5, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        yaw, tilt, axis = rng.uniform(-math.pi, math.pi), rng.uniform(0, math.radians(25)), rng.uniform(0, 2 * math.pi)
        qz = np.array([math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)])
        qt = np.array([math.cos(tilt / 2), math.cos(axis) * math.sin(tilt / 2), math.sin(axis) * math.sin(tilt / 2), 0])
        rot = rot_from_wxyz(qt) @ rot_from_wxyz(qz)
        out.append((np.array([*rng.uniform(-0.05, 0.05, 2), 0.0]), wxyz_from_rot(rot)))
    return out


def render(model, data, pos, quat):
    data.mocap_pos[0], data.mocap_quat[0] = pos, quat
    mujoco.mj_forward(model, data)
    with mujoco.Renderer(model, H, W) as r:
        r.update_scene(data, "cam")
        rgb = r.render()
        r.enable_depth_rendering()
        r.update_scene(data, "cam")
        depth = r.render()
    return rgb, depth


def truth(x, y, pos, quat) -> ObjectPose:
    world_tool = np.eye(4)
    world_tool[:3, :3], world_tool[:3, 3] = rot_from_wxyz(quat), pos
    return ObjectPose.from_matrix(np.linalg.inv(optical_in_world(x, y)) @ world_tool)


def marker_in_tool() -> np.ndarray:
    t = np.eye(4)
    t[2, 3] = HEAD[2]  # on the head's top face; marker x, y = tool x, y (MuJoCo's 2d texture on a box top)
    return t


def errors(tmp_path, pixel_noise=0.0, depth_noise=0.0, n=5):
    from robotrl.deploy.object_pose import IcpPoseSource

    aruco = ArucoPoseSource(7, MARKER_LENGTH, marker_in_tool())
    model, data, x, y = build_scene(tmp_path, aruco)
    intr = Intrinsics.from_camera_info(camera_info_from_fovy(W, H, FOVY))
    icp = IcpPoseSource(model_points())
    rng = np.random.default_rng(1)
    out = {"aruco": [], "icp": [], "icp_from_aruco": []}
    for pos, quat in poses(n):
        rgb, depth = render(model, data, pos, quat)
        if pixel_noise:
            rgb = np.clip(rgb + rng.normal(0, pixel_noise, rgb.shape), 0, 255).astype(np.uint8)
        if depth_noise:
            depth = depth + rng.normal(0, depth_noise, depth.shape)
        ref = truth(x, y, pos, quat)
        est = aruco.estimate(rgb, intr)
        assert est is not None, "marker not detected"
        out["aruco"].append(pose_error(est, ref))
        seeded = icp.estimate(depth, intr, est)  # both available: ICP refines the ArUco pose
        assert seeded is not None
        out["icp_from_aruco"].append(pose_error(seeded, ref))
        off = np.eye(4)
        off[:3, :3] = rot_from_wxyz([math.cos(math.radians(4)), 0.0, math.sin(math.radians(4)), 0.0])
        off[:3, 3] = [0.012, -0.012, 0.009]  # 2 cm and 8 degrees off
        init = ObjectPose.from_matrix(ref.matrix() @ off)
        est = icp.estimate(depth, intr, init)
        assert est is not None
        out["icp"].append(pose_error(est, ref))
    return out


def test_camera_info_intrinsics_and_pose_stamped_order():
    info = camera_info_from_fovy(W, H, FOVY)
    intr = Intrinsics.from_camera_info(info)
    assert intr.fx == pytest.approx(240.0 / math.tan(math.radians(22.5)))
    assert (intr.cx, intr.cy) == (319.5, 239.5)
    msg = to_pose_stamped(ObjectPose(np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.5, 0.5, 0.5])), info.header)
    assert (msg.pose.orientation.w, msg.pose.orientation.x) == (0.5, 0.5) and msg.header.frame_id == "camera_optical"
    with pytest.raises(ValueError, match="no intrinsics"):
        Intrinsics.from_camera_info(type(info)())


def test_aruco_and_icp_from_aruco_within_1cm_5deg_icp_alone_within_1cm_10deg_on_rendered_tool_poses(tmp_path):
    """ICP alone, from a guess 2 cm / 8 deg off, misses 5 deg on one pose (8.8 deg: yaw about the flat
    tool's face normal is weakly constrained by depth); seeded with the ArUco pose it meets 5 deg."""
    pytest.importorskip("open3d", reason="the ICP source needs the vision extra: pip install 'robotrl[vision]'")
    out = errors(tmp_path, n=10)
    for name, rot_bound in (("aruco", 5.0), ("icp", 10.0), ("icp_from_aruco", 5.0)):
        pos, rot = np.asarray(out[name]).T
        assert pos.max() <= 0.01 and rot.max() <= rot_bound, (name, out[name])


def test_under_noise_errors_stay_bounded(tmp_path):
    pytest.importorskip("open3d", reason="the ICP source needs the vision extra: pip install 'robotrl[vision]'")
    out = errors(tmp_path, pixel_noise=4.0, depth_noise=0.002, n=3)
    for name, errs in out.items():
        pos, rot = np.asarray(errs).T
        assert pos.max() <= 0.02 and rot.max() <= 10.0, (name, errs)


def test_image_to_array_decodes_colour_and_depth_encodings():
    from robotrl.deploy import msgs
    from robotrl.deploy.object_pose import image_to_array

    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    padded = np.zeros((2, 12), np.uint8)  # step 12 > 3 * width: row padding is skipped
    padded[:, :9] = rgb.reshape(2, 9)
    got = image_to_array(msgs.Image(height=2, width=3, encoding="rgb8", step=12, data=padded.tobytes()))
    np.testing.assert_array_equal(got, rgb)
    bgr = image_to_array(msgs.Image(height=2, width=3, encoding="bgr8", step=9, data=list(rgb.tobytes())))
    np.testing.assert_array_equal(bgr, rgb[..., ::-1])
    mm = np.array([[0, 1000], [2500, 65535]], dtype="<u2")
    depth = image_to_array(msgs.Image(height=2, width=2, encoding="16UC1", step=4, data=mm.tobytes()))
    np.testing.assert_array_equal(depth, [[np.nan, 1.0], [2.5, 65.535]])  # 0 mm: no return
    metres = np.array([[0.5, 1.25]], dtype=">f4")
    got = image_to_array(msgs.Image(height=1, width=2, encoding="32FC1", is_bigendian=1, step=8, data=metres.tobytes()))
    np.testing.assert_array_equal(got, [[0.5, 1.25]])
    with pytest.raises(ValueError, match="encoding 'yuv422'"):
        image_to_array(msgs.Image(height=1, width=1, encoding="yuv422", step=2, data=b"ab"))


def _image_msg(rgb, stamp):
    from robotrl.deploy import msgs

    h, w, _ = rgb.shape
    return msgs.Image(header=msgs.Header(stamp=msgs.stamp(stamp), frame_id="camera_optical"), height=h, width=w,
                      encoding="rgb8", step=3 * w, data=np.ascontiguousarray(rgb).tobytes())


def _depth_msg(depth, stamp):
    from robotrl.deploy import msgs

    h, w = depth.shape
    return msgs.Image(header=msgs.Header(stamp=msgs.stamp(stamp), frame_id="camera_optical"), height=h, width=w,
                      encoding="32FC1", step=4 * w, data=np.ascontiguousarray(depth, dtype="<f4").tobytes())


def _ros_pose(t: np.ndarray) -> str:
    p = ObjectPose.from_matrix(t)
    w, x, y, z = p.quat
    return "[" + ", ".join(f"{v:.12g}" for v in (*p.position, x, y, z, w)) + "]"


@pytest.mark.parametrize("method", ["aruco", "aruco_icp"])
def test_object_pose_node_publishes_world_frame_pose_from_camera_topics(tmp_path, method):
    """robotrl-object-pose as a process on loopback DDS: rendered Image (+ depth) and CameraInfo in, the
    tool's PoseStamped in the world frame out (within 1 cm / 5 deg of the truth), and the box latched."""
    pytest.importorskip("cyclonedds")
    if method == "aruco_icp":
        pytest.importorskip("open3d", reason="the ICP source needs the vision extra: pip install 'robotrl[vision]'")
    from robotrl.deploy import msgs
    from robotrl.deploy.dds import CycloneTransport
    from robotrl.deploy.object_pose import CAMERA_QOS, LATCHED_QOS

    from tests.deploy.helpers import free_domain, spawn, stop

    aruco = ArucoPoseSource(7, MARKER_LENGTH, marker_in_tool())
    model, data, x, y = build_scene(tmp_path, aruco)
    np.save(tmp_path / "tool_points.npy", model_points())
    domain = free_domain()
    box = [-0.02, 0.0, 0.0, 0.09, 0.03, 0.012, 0.012]
    args = [f"method:={method}", "marker_id:=7", f"marker_length:={MARKER_LENGTH}",
            f"marker_in_object:={_ros_pose(marker_in_tool())}", f"camera_pose:={_ros_pose(optical_in_world(x, y))}",
            f"model_points:={tmp_path / 'tool_points.npy'}", f"object_box:={box}", "transport:=cyclonedds"]
    node = spawn(["robotrl.deploy.object_pose", *args], domain, tmp_path / "node.log")
    tr = CycloneTransport(domain_id=domain, localhost_only=True)
    pub_info = tr.publisher("/camera/camera_info", msgs.CameraInfo, CAMERA_QOS)
    pub_image = tr.publisher("/camera/image_raw", msgs.Image, CAMERA_QOS)
    pub_depth = tr.publisher("/camera/depth/image_raw", msgs.Image, CAMERA_QOS)
    sub_pose = tr.subscription("/object_pose", msgs.PoseStamped, CAMERA_QOS)
    sub_box = tr.subscription("/robotrl/object_box", msgs.Float64MultiArray, LATCHED_QOS)
    info = camera_info_from_fovy(W, H, FOVY)
    got, boxes = [], []
    try:
        for k, (pos, quat) in enumerate(poses(3)):
            rgb, depth = render(model, data, pos, quat)
            end = time.monotonic() + 60
            answer = None
            while answer is None and time.monotonic() < end and node.poll() is None:
                pub_info.publish(info)
                pub_depth.publish(_depth_msg(depth, 10.0 + k))  # before the image: the node acts on the image
                pub_image.publish(_image_msg(rgb, 10.0 + k))
                deadline = time.monotonic() + 1.0
                while answer is None and time.monotonic() < deadline:
                    answer = next((m for _, m in sub_pose.take() if m.header.stamp.sec == 10 + k), None)
                    time.sleep(0.01)
            boxes += [list(m.data) for _, m in sub_box.take()]
            assert answer is not None, (tmp_path / "node.log").read_text()[-2000:]
            got.append((answer, pos, quat))
    finally:
        assert stop(node) == 0, (tmp_path / "node.log").read_text()[-2000:]
        tr.close()
    assert boxes and boxes[0] == box
    for answer, pos, quat in got:
        assert answer.header.frame_id == "world"
        o = answer.pose.orientation
        est = ObjectPose(np.array([answer.pose.position.x, answer.pose.position.y, answer.pose.position.z]),
                         np.array([o.w, o.x, o.y, o.z]))
        dp, dr = pose_error(est, ObjectPose(np.asarray(pos, float), np.asarray(quat, float)))
        assert dp <= 0.01 and dr <= 5.0, (method, dp, dr)


if __name__ == "__main__":  # the numbers for the report
    import tempfile
    from pathlib import Path

    for label, kw in (("clean", {}), ("noisy (4 grey levels, 2 mm)", {"pixel_noise": 4.0, "depth_noise": 0.002})):
        res = errors(Path(tempfile.mkdtemp()), n=10, **kw)
        for name, errs in res.items():
            pos, rot = np.asarray(errs).T
            print(f"{label:28s} {name:6s} pos max {pos.max() * 1e3:.2f} mm  mean {pos.mean() * 1e3:.2f} mm  "
                  f"rot max {rot.max():.2f} deg  mean {rot.mean():.2f} deg")
