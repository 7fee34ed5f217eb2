"""What a root-cause report says, independent of how it is rendered.

The report's sections (``tracefix.report.sections``) read from here, in both formats:

    values.py      reading a stored value tolerantly; writing one for display
    session.py     the session at a glance: task, outcome, facts, feedback, milestones
    diagnosis.py   the analysis and the replay read for the report: scores, frontier,
                   verdicts, tested steps, evidence, and the one order of the suspected
                   steps every section follows (ranked_causes)
    steps.py       a short line per step, its errors, the trials, which steps the trace shows
    comparison.py  each replay run beside the original session from the intervention step on
    summary.py     the one-paragraph summary and how the diagnosis was made (its stages)

Inputs are the contract shapes of docs/contracts.md: the session document (§1), the
analysis result (§3) and the replay result (§5). Any of the latter two may be missing (not
analyzed or not replayed yet), and any field of a shape may be absent in a partial result;
nothing here raises on that. The results are stored as their clients posted them (the API
checks their outline only), so what is inside is read through `values.objects`, `fields`
and `whole`: an entry that is no object is skipped, a step that is no number is no step,
and text stays text.
"""
