"""Package discovery (everything else is in pyproject.toml).

Every `localfa.*` folder with an `__init__.py` is found automatically; the design card's top-level
folders (grammars/, prompts/, serving/) ship inside the package as localfa.grammars, ...
"""

from setuptools import find_packages, setup

MAPPED = {
    "localfa.grammars": "grammars",
    "localfa.prompts": "prompts",
    "localfa.serving": "serving",
    "localfa.serving.profiles": "serving/profiles",
}

setup(packages=find_packages(include=["localfa", "localfa.*"]) + list(MAPPED), package_dir={"localfa": "localfa", **MAPPED})
