"""tracefix.analysis: find where a session went wrong, without labels.

    tracefix train  [--db PATH | --server URL] [--criterion success|positive] [--epochs N] [--out DIR]
    tracefix analyze SESSION [--json] [--no-llm] [--model-dir DIR]
    tracefix import FILE [--json]                  # message logs (JSON, JSON list, JSONL)

    from tracefix.analysis.pipeline import analyze_document, analyze_session, train_model
    result = analyze_document(session_document, model=None)   # docs/contracts.md section 3

How (AgentTether section III, adapted to OTel traces):
  transition_unit.py  the unit type (observation, belief, action, feedback; status, error
                 signature, tool, phase, artifacts, unsupported / misattributed values)
  units.py       steps -> transition units (build_units), filled in by the readings:
    values.py      the values a text names, and whether a step's input showed them
    roles.py       who plans and who works; a step's phase
    records.py     tool results as records (JSON objects, text lines, prose fields)
    agent_reports.py  a report read against its own results (misattributed, omitted, restated)
    failures.py    errors, failures returned as text, retries got past, rounds handed out again
    conflicts.py   picks that conflict with the task or with the final answer
  graph.py       critical transition graph (temporal, artifact, same-error, loop edges) and its
                 heterogeneous view for the HGT (step + agent/tool/error/artifact nodes)
  features.py    the per-step feature vector both detectors read (FEATURE_NAMES)
  detectors.py   IsolationForestDetector (run-local) and HGTDetector (normal-behaviour model,
                 self-supervised on successful sessions; versioned model files)
  frontier.py    per-detector frontier: cut at the largest score drop, contiguous groups
  symptoms.py    a symptom (error / failure claim / wrong final answer) walked back to its origin
  evidence/      the evidence detectors, one module per rule (its docstring: what generic
                 failure it detects; `evidence(graph)`: per-step evidence), in one REGISTRY
  hypotheses.py  ranked hypotheses: the registered detectors' evidence added up, with
                 separate evidence per detector and dependency paths
  analyst.py     optional LLM analyst confirming the turning point (TRACEFIX_LLM_*)
  llm.py         the product's own LLM client (any OpenAI-compatible endpoint), also the replay's
  pipeline.py    analyze_document / analyze_session / train_model
  diagnosis.py   the diagnosis job `tracefix serve` runs on a thumbs-down (analysis, then a replay job)

Environment:
  TRACEFIX_MODEL_DIR      where models are written and read (default: <db folder>/models)
  TRACEFIX_TORCH_THREADS  torch intra-op threads for the HGT (default 1; 0 keeps torch's own)
  TRACEFIX_LLM_BASE_URL / _MODEL / _API_KEY   the optional analyst (unset: detectors only)
  TRACEFIX_SERVER / TRACEFIX_DB / TRACEFIX_TOKEN   where the CLI verbs find the store

This package is imported lazily by the CLI and by `tracefix serve`'s diagnosis job; torch,
torch_geometric and scikit-learn load only when a detector runs.
"""
