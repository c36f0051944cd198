"""
The `make demo` banner names the ports the game's settings configure (issue 34.5), not 4000/4001.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IGNORED = shutil.ignore_patterns("secret_settings.py", "logs", "*.db3", "__pycache__",
                                 "ai_assistant_data")


def banner_ports(game_dir):
    result = subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", str(ROOT / "Makefile"), "ports",
         f"VENV={Path(sys.executable).parent.parent}"],
        cwd=game_dir, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_banner_reads_the_configured_ports(tmp_path):
    shutil.copytree(ROOT / "server", tmp_path / "server", ignore=IGNORED)
    assert banner_ports(tmp_path) == "telnet 127.0.0.1 4000 (web: http://127.0.0.1:4001)"
    (tmp_path / "server" / "conf" / "secret_settings.py").write_text(
        "TELNET_PORTS = [4567]\nWEBSERVER_PORTS = [(4568, 4569)]\n")
    assert banner_ports(tmp_path) == "telnet 127.0.0.1 4567 (web: http://127.0.0.1:4568)"
    (tmp_path / "server" / "conf" / "secret_settings.py").write_text(
        "TELNET_PORTS = [4567]\nWEBSERVER_ENABLED = False\n")
    assert banner_ports(tmp_path) == "telnet 127.0.0.1 4567"
