"""tracefix's bundled testbed (a test and demo component, not part of the product).

- :mod:`tracefix.demo.sim` — the scripted OpenAI-compatible LLM server (`tracefix sim`);
- :mod:`tracefix.demo.policy` — its `bank-agent` model's turn logic, beside what it reads and
  writes (`bank_instructions`, `bank_reports`), what it does with an edit (`bank_edits`) and
  the slips it can make (`bank_faults`); :mod:`tracefix.demo.edits` — how it reads an edit's
  content; :mod:`tracefix.demo.scripted` — what the scripted models share with
  :mod:`tracefix.demo.faults`, fault injection and ground truth;
- :mod:`tracefix.demo.bank` — the multi-agent banking app (`run_task`, the reward), built on
  :mod:`tracefix.demo.team` (the orchestrator/worker loop), :mod:`tracefix.demo.tools`,
  :mod:`tracefix.demo.db` and :mod:`tracefix.demo.tasks`;
- :mod:`tracefix.demo.warehouse` — the second app, a warehouse crew (`warehouse_world`,
  `warehouse_team`, `warehouse_tasks`, its `warehouse-crew` model in `warehouse_model`, with
  `warehouse_notes`, `warehouse_replies` and `warehouse_faults`), so nothing is tuned to one
  app; :mod:`tracefix.demo.domains` — which app a task belongs to;
- :mod:`tracefix.demo.cli` — `tracefix sim` and `tracefix demo-run`.

See demo/README.md for the commands and the fault and edit rules.
"""
