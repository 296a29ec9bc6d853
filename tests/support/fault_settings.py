"""Settings of a chaos-test worker: the console's own, plus the app that makes some downstream
calls time out (tests/support/faults.py). Only the durability tests start a process with it."""

from console.settings import *  # noqa: F403
from console.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.faults.FaultsConfig"]
