"""tracefix.replay: DoVer do-then-verify on recorded sessions (``pip install 'tracefix[replay]'``).

    tracefix replay SESSION --server http://127.0.0.1:4318        # or --db PATH
    from tracefix.replay.pipeline import diagnose                  # what `tracefix serve` runs

For each plan-execution trial of a failed session: a failure hypothesis (step, agent,
reason), one minimal edit at the message-passing layer (an intervention), N replays of the
session from that step in child processes (recorded prefix from the cassette, live after),
a judgement of every replay (success, fulfilled, progress) and a DoVer 4.2 verdict:
validated / partially_validated / refuted / inconclusive.

What a session needs to be replayable: it ran inside a ``@tracefix.session`` function (or
``tracefix.session(entrypoint=..., inputs=...)`` naming a function the app registered with
``tracefix.replayable``) with content capture on, in an app holding the replay key
(``TRACEFIX_REPLAY_KEY``) that the worker holds too (the app signs what it records; the
worker refuses anything else unless ``--allow-unsigned``); tracked state
(``tracefix.track``) so tools can run live after the intervention (else
``--allow-live-tools``); ideally an evaluator (``@tracefix.evaluator``) to judge success.

Settings: ``TRACEFIX_LLM_BASE_URL`` / ``TRACEFIX_LLM_MODEL`` / ``TRACEFIX_LLM_API_KEY`` for
the LLM stages (unset: deterministic fallbacks, labelled as such in the result's
``stages``); ``TRACEFIX_OTLP_ENDPOINT`` where replay children export when the access object
does not name its collector. Modules: trials, attribution, interventions (the edit) and
intervention_evidence (what the session shows about its step), cassette, runner,
child, judge, verdicts, memory, guard, prompts, llm, pipeline, cli.
"""
