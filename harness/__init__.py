"""CAIS co-simulator: Python orchestration of the native GPU and network engines."""
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = REPO_ROOT / "conf"
