"""Constants of the driving task: a 1/10-scale Ackermann RC car (F1TENTH-like) and its tracks.

Figures follow the F1TENTH platform (Traxxas Slash 4x4 chassis): about 3.5 kg, wheelbase
0.33 m, maximum steering angle 0.42 rad. The motor is modelled as a DC motor: full throttle
gives ``MOTOR_TORQUE`` at standstill, falling linearly to zero at ``TOP_SPEED``.
"""

from __future__ import annotations

# --- vehicle (SI units) ---------------------------------------------------------------
CHASSIS_MASS = 3.1
"""Chassis mass, kg (the four wheels add ``4 * WHEEL_MASS``)."""
CHASSIS_HALF = (0.24, 0.1, 0.03)
"""Chassis box half sizes (length, width, height), m."""
WHEEL_MASS = 0.1
WHEEL_RADIUS = 0.05
WHEELBASE = 0.33
"""Distance between front and rear axles, m."""
TRACK_WIDTH = 0.26
"""Distance between left and right wheels, m."""
MAX_STEER = 0.42
"""Steering limit of the virtual centre wheel, rad (about 24 degrees)."""
STEER_KP = 20.0
"""Steering servo stiffness, N m / rad."""
TOP_SPEED = 5.0
"""No-load top speed at full throttle, m/s."""
MOTOR_TORQUE = 0.45
"""Stall torque per rear wheel at full throttle, N m (about 4.5 m/s^2 on 4 kg)."""
TIRE_FRICTION = 1.0
"""Sliding friction coefficient of the tyres on the floor."""
CAR_LENGTH = 2 * CHASSIS_HALF[0]
CAR_WIDTH = 2 * CHASSIS_HALF[1] + 0.04
COLLISION_RADIUS = 0.5 * CAR_WIDTH
"""The car's collision shape is a capsule of this radius along its long axis."""

# --- names and geom groups ----------------------------------------------------------------
CHASSIS_BODY = "chassis"
STEER_JOINTS = ("steer_left", "steer_right")
DRIVE_JOINTS = ("rear_left_spin", "rear_right_spin")
RAY_GROUP = 2
"""Geom group of everything the range sensor sees (obstacles and traffic vehicles)."""
CURB_GROUP = 0
"""Geom group of the visual-only kerbs (group 0 is drawn by default; rays only see ``RAY_GROUP``)."""

# --- tracks ----------------------------------------------------------------------------------
TRACK_POINTS = 512
"""Centreline samples per track (uniform in arc length)."""
HELDOUT_SEED_OFFSET = 1_000_000
"""Held-out track seeds start here, so no held-out track can equal a training track."""
SCENARIO_SEED_OFFSET = 2_000_000
"""Seeds of the tracks added for mined scenarios (``DrivingConfig.scenario_tracks``) start here."""
