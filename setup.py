"""Package layout: four top-level folders ship inside the ``robotrl`` namespace.

``tasks/`` -> ``robotrl.tasks``, ``deploy/`` -> ``robotrl.deploy``, ``configs/`` ->
``robotrl.configs`` and ``assets/`` -> ``robotrl.assets``, so a wheel carries tasks,
Hydra configs and assets. Metadata lives in pyproject.toml.
"""

from setuptools import find_packages, setup

ROOTS = {
    "robotrl": "robotrl",
    "robotrl.tasks": "tasks",
    "robotrl.deploy": "deploy",
    "robotrl.configs": "configs",
    "robotrl.assets": "assets",
}

packages, package_dir = [], {}
for name, folder in ROOTS.items():
    package_dir[name] = folder
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={
        "robotrl.configs": ["**/*.yaml"],
        "robotrl.assets": ["**/*.xml", "**/*.png", "**/*.stl", "**/*.obj", "**/*.md", "**/LICENSE*"],
        "robotrl.deploy": ["**/*.yaml", "**/*.json"],
        "robotrl": ["py.typed"],
    },
)
