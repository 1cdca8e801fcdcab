"""Shared pytest configuration.

Hypothesis runs without per-example deadlines: CI machines have two cores and
loopback servers share them, so wall-clock deadlines would only add flakiness.
Set ``HYPOTHESIS_PROFILE=thorough`` for a longer local run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
