"""
The package ships its licence (BSD-3-Clause, as its metadata says) and the vendored files' notes.
"""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def packaged(relative):
    """True when a package-data pattern of `ai_assistant` takes the file `relative`."""
    patterns = PROJECT["tool"]["setuptools"]["package-data"]["ai_assistant"]
    target = ROOT / "ai_assistant" / relative
    return any(target in (ROOT / "ai_assistant").glob(pattern) for pattern in patterns)


def test_the_license_file_is_bsd_3_clause_and_named_in_the_metadata():
    assert PROJECT["project"]["license"] == "BSD-3-Clause"
    assert PROJECT["project"]["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License")
    assert "Neither the name of the copyright holder nor the names of its" in text


def test_the_vendored_files_and_their_notes_are_packaged():
    assert packaged("web/static/ai_assistant/vendor/README.md")
    assert packaged("web/static/ai_assistant/vendor/bootstrap-4.6.0/LICENSE")
    assert packaged("web/static/ai_assistant/vendor/bootstrap-4.6.0/bootstrap.inspector.min.css")
