"""The pip install (pyproject.toml) and the conda environment (environment.yml) list the same packages."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {"pytorch": "torch"}  # the few packages whose conda name differs


def _name_and_spec(requirement: str) -> tuple[str, str]:
    m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)", requirement)
    name = m.group(1).lower().replace("_", "-")
    spec = m.group(2).replace(" ", "")
    return CONDA_TO_PIP.get(name, name), spec


def _extra(extras: dict[str, list[str]], name: str) -> list[str]:
    """An extra's requirements, with the extras it names of this package itself ("bertedu[book]") spelt out."""
    out = []
    for requirement in extras[name]:
        m = re.fullmatch(r"\s*bertedu\[([a-z]+)\]\s*", requirement)
        out += _extra(extras, m.group(1)) if m else [requirement]
    return out


def pip_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + _extra(project["optional-dependencies"], "course")
    return dict(_name_and_spec(r) for r in reqs)


def test_the_course_extra_includes_the_book_extra():
    """CI installs README's `pip install -e ".[course]"`; the book's build and its browser test need the book extra."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "bertedu[book]" in extras["course"]
    assert set(extras["book"]) <= set(_extra(extras, "course"))


def conda_requirements() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    out = {}
    for dep in env["dependencies"]:
        items = dep["pip"] if isinstance(dep, dict) else [dep]
        for item in items:
            if item.startswith("-e") or item.split("=")[0] in ("python", "pip"):
                continue
            name, spec = _name_and_spec(item)
            out[name] = spec
    return out


def test_environment_yml_lists_the_same_packages_and_bounds_as_pyproject():
    pip, conda = pip_requirements(), conda_requirements()
    assert set(pip) == set(conda), f"only in pyproject: {set(pip) - set(conda)}; only in environment.yml: {set(conda) - set(pip)}"
    for name in pip:
        assert pip[name] == conda[name], f"{name}: pyproject says {pip[name]!r}, environment.yml says {conda[name]!r}"


def test_torch_requirement_admits_the_versions_we_run_on():
    from packaging.specifiers import SpecifierSet

    spec = SpecifierSet(pip_requirements()["torch"])
    # 2.13 on the CPU machines and CI, 2.11 on the GPU machine; never an unbounded future major
    assert "2.13.0" in spec and "2.11.0" in spec and "3.0.0" not in spec
