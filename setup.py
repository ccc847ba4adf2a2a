"""Package discovery; the project's metadata is in pyproject.toml.

Like ExecuTorch, the top-level folders are the architecture and map into one import
namespace (``etspec.runtime`` -> ``runtime/``). setuptools' own ``packages.find`` cannot
prefix a folder's subpackages with the namespace it maps to, so they are found here: a new
subpackage (a folder with an ``__init__.py``) is packaged without editing a list.
"""

from setuptools import find_packages, setup

ROOTS = {
    "etspec": "etspec",
    "etspec.models": "models",
    "etspec.export": "export",
    "etspec.runtime": "runtime",
    "etspec.tools": "tools",
    "etspec.training": "training",
}


def packages() -> list[str]:
    found = []
    for name, folder in ROOTS.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_packages(folder)]
    return sorted(found)


setup(package_dir=ROOTS, packages=packages())
