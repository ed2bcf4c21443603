"""Registry of application types: one module per type, each declaring ``APP`` and its driver."""

from __future__ import annotations

import importlib

from benchmarks.apps.base import AppType, Driver
from benchmarks.apps.captions import APP as LIVE_CAPTIONS
from benchmarks.apps.chatbot import APP as CHATBOT
from benchmarks.apps.imagegen import APP as IMAGEGEN
from benchmarks.apps.research import APP as DEEP_RESEARCH
from benchmarks.apps.server import APP as LLM_SERVER
from benchmarks.apps.sleep import APP as SLEEP
from benchmarks.apps.synthetic import APP as SYNTHETIC
from benchmarks.spec.model import Application

APP_TYPES: dict[str, AppType] = {
    app.name: app for app in (CHATBOT, DEEP_RESEARCH, IMAGEGEN, LIVE_CAPTIONS, LLM_SERVER, SLEEP, SYNTHETIC)
}

ALIASES: dict[str, str] = {
    alias.lower(): app.name for app in APP_TYPES.values() for alias in (app.name, *app.aliases)
}


def resolve_type(name: str) -> AppType | None:
    """Return the application type for a canonical name or legacy alias (case-insensitive), or None."""
    canonical = ALIASES.get(name.strip().lower())
    return APP_TYPES[canonical] if canonical else None


def app_type(unit: Application) -> AppType:
    """Return the registered application type of a unit (its ``type`` is a canonical name)."""
    return APP_TYPES[unit.type]


def driver_class(app: AppType) -> type[Driver]:
    """Import and return the driver class of an application type (done in the application process)."""
    module_name, _, class_name = app.driver.partition(":")
    cls: type[Driver] = getattr(importlib.import_module(module_name), class_name)
    return cls
