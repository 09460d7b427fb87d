"""Command-line parameters the way ROS 2 launch passes them.

A launch ``<node>`` or ``<executable>`` runs ``exe [args] --ros-args -r __node:=name
-r __ns:=/ns --params-file file.yaml -p key:=value -r /from:=/to``. ``parse_args``
accepts that tail, plain ``key:=value`` (or ``key=value``) arguments before it, and
reads parameter files in the ROS 2 layout::

    /**:                      # or /<ns>/<node>, or <node>
      ros__parameters:
        policy: /path/policy.json

Later sources win: params files in order, then ``-p`` values, then plain arguments.
Values are parsed as YAML scalars (``true``, ``3``, ``0.5``, ``[1, 2]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass
class RosArgs:
    """Parsed command line.

    Attributes:
        params: parameter name -> value.
        remaps: topic remappings ``from -> to``.
        node_name: from ``-r __node:=``, else the default given to ``parse_args``.
        namespace: from ``-r __ns:=``, else ``/``.
        params_files: the ``--params-file`` paths read.

    """

    params: dict[str, Any] = field(default_factory=dict)
    remaps: dict[str, str] = field(default_factory=dict)
    node_name: str = ""
    namespace: str = "/"
    params_files: list[str] = field(default_factory=list)

    def remap(self, topic: str) -> str:
        """Apply the remapping rules to a fully qualified topic name."""
        return self.remaps.get(topic, topic)


def _scalar(text: str) -> Any:
    return yaml.safe_load(text) if text != "" else ""


def _split(item: str, flag: str) -> tuple[str, str]:
    key, sep, value = item.partition(":=")
    if not sep:
        raise ValueError(f"{flag} {item!r} is not of the form name:=value.")
    return key, value


def read_params_file(path: str, node_name: str, namespace: str = "/") -> dict[str, Any]:
    """Parameters for ``node_name`` from a ROS 2 params YAML (``/**`` entries first, then the node's).

    Raises:
        ValueError: when the file has no ``ros__parameters`` section that applies.

    """
    with open(path) as f:
        doc = yaml.safe_load(f) or {}
    fq = (namespace.rstrip("/") + "/" + node_name) if node_name else ""
    keys = ["/**", node_name, "/" + node_name, fq]
    params: dict[str, Any] = {}
    found = False
    for key in keys:
        section = doc.get(key) if key else None
        if isinstance(section, dict) and "ros__parameters" in section:
            params.update(section["ros__parameters"] or {})
            found = True
    if not found:
        raise ValueError(
            f"{path} has no ros__parameters for node {node_name!r}: expected a top-level '/**:' "
            f"or '{node_name}:' key holding 'ros__parameters:'."
        )
    return params


def parse_args(argv: list[str], default_node: str) -> RosArgs:
    """Parse ``argv`` (without the program name); see the module docstring.

    Raises:
        ValueError: naming an argument it cannot parse.

    """
    out = RosArgs(node_name=default_node)
    plain: dict[str, Any] = {}
    cli_params: dict[str, Any] = {}
    files: list[str] = []
    i, in_ros = 0, False
    while i < len(argv):
        arg = argv[i]
        if arg == "--ros-args":
            in_ros = True
        elif arg == "--":
            in_ros = False
        elif in_ros and arg in ("-r", "--remap", "-p", "--param", "--params-file"):
            if i + 1 >= len(argv):
                raise ValueError(f"{arg} needs a value.")
            value = argv[i + 1]
            i += 1
            if arg == "--params-file":
                files.append(value)
            elif arg in ("-p", "--param"):
                key, text = _split(value, arg)
                cli_params[key] = _scalar(text)
            else:
                key, target = _split(value, arg)
                if key == "__node" or key.endswith(":__node"):
                    out.node_name = target
                elif key == "__ns" or key.endswith(":__ns"):
                    out.namespace = target
                else:
                    out.remaps[key] = target
        elif in_ros and arg in ("--log-level", "--enclave"):
            i += 1
        elif in_ros and arg.startswith("--"):
            pass  # other ROS flags (e.g. --disable-stdout-logs) do not concern this node
        elif ":=" in arg or "=" in arg:
            key, _, text = arg.partition(":=") if ":=" in arg else arg.partition("=")
            plain[key] = _scalar(text)
        else:
            raise ValueError(f"Cannot parse argument {arg!r}; use name:=value or the --ros-args tail.")
        i += 1
    for path in files:
        out.params.update(read_params_file(path, out.node_name, out.namespace))
    out.params_files = files
    out.params.update(cli_params)
    out.params.update(plain)
    return out


def check_known(params: dict[str, Any], known: dict[str, Any], program: str) -> dict[str, Any]:
    """Defaults ``known`` updated by ``params``; an unknown name is an error listing the valid ones."""
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"{program}: unknown parameter(s) {unknown}; valid: {sorted(known)}.")
    return {**known, **params}


def scenario_param(value: Any, program: str) -> dict[str, float]:
    """``scenario:=`` of ``program``: the episode's scenario parameters as ``{name: float}``.

    ``value`` is a mapping (``scenario:="{friction: 0.6, tool_family: 2}"`` or a params-file entry),
    the path of a YAML file holding one, or empty (no scenario). These are the task's scenario
    parameters (``robotrl twin mine`` names them); bags record them as ``scenario.<name>`` metadata,
    which the twin uses to rebuild the scene and ``robotrl twin triage`` to write scenario files.

    Raises:
        ValueError: the value is not a mapping or a file holding one, or a value is not a number.

    """
    if value in ("", None):
        return {}
    if isinstance(value, str):
        try:
            with open(value) as f:
                value = yaml.safe_load(f)
        except OSError as exc:
            hint = 'write scenario:="{friction: 0.6}" or a YAML file of name: value'
            raise ValueError(f"{program}: scenario:={value!r} is neither a mapping nor a readable YAML file "
                             f"({exc.strerror}); {hint}.") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{program}: scenario must map scenario parameter names to numbers, got {value!r}.")
    out = {}
    for name, v in value.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"{program}: scenario.{name}={v!r} is not a number.")
        out[str(name)] = float(v)
    return out
