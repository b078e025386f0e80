"""Settings the reconcilers and webhooks read at each use."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ControllerOptions:
    # gangSchedulingManagement.schedulerProvider: volcano
    gang_scheduling: bool = False
