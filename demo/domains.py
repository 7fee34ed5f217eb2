"""The demo's app domains: the banking team (the default) and the warehouse crew. What the
fault injector, `tracefix demo-run --domain` and the benchmarks need to know of each: its
tasks, the fault kinds its model can host, its fault-free step picture, its app module
(`run_task`, `evaluate`, `last_database`) and the model name the sim serves it under.

The apps themselves load only when asked for (:meth:`Domain.app`): they bring tracefix's
instrumentation, which the sim and the fault injector do not need.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Mapping

from . import policy, tasks, warehouse_model, warehouse_tasks
from .scripted import KINDS
from .variants import split_id


@dataclass(frozen=True)
class Domain:
    name: str
    model: str  # the sim model that plays its agents
    app_module: str  # run_task, evaluate, last_database
    service: str  # service.name of its traces
    tasks: Mapping[str, Any]  # the hand-written ones; TASK@SEED is one on a seed's world (demo/variants.py)
    kinds: tuple[str, ...]
    fault_free_steps: Callable[[str], tuple]
    task: Callable[[str], Any]  # the task of an id, a variant's text drawn (what its model then recognizes)

    def app(self) -> ModuleType:
        return importlib.import_module(self.app_module)


DOMAINS = {
    "bank": Domain("bank", "bank-agent", "tracefix.demo.bank", "bank-demo", tasks.TASKS, KINDS,
                   policy.fault_free_steps, tasks.get_task),
    "warehouse": Domain("warehouse", warehouse_model.MODEL, "tracefix.demo.warehouse", "warehouse-demo",
                        warehouse_tasks.TICKETS, KINDS, warehouse_model.fault_free_steps, warehouse_tasks.get_ticket),
}


def get_domain(name: str) -> Domain:
    try:
        return DOMAINS[name]
    except KeyError:
        raise KeyError(f"unknown demo domain {name!r}; known: {', '.join(DOMAINS)}") from None


def domain_of_task(task_id: str) -> Domain | None:
    """The domain of a task id (t03, or a variant t03@5); None for an id no domain knows."""
    try:
        base, _ = split_id(task_id)
    except KeyError:
        return None
    return next((d for d in DOMAINS.values() if base in d.tasks), None)
