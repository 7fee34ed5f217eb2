"""The replay result's typed contract (declared in tracefix.collector.contracts, where the
collector's API validates posted results against it) names every value the replay writes:
a verdict or an intervention kind missing there would make the collector refuse the result."""
from typing import get_args, get_type_hints

from tracefix.collector import contracts, schemas
from tracefix.replay import interventions, verdicts


def test_every_verdict_and_intervention_kind_the_replay_writes_is_in_the_contract():
    assert set(get_args(contracts.Verdict)) == set(verdicts.VERDICTS)
    assert set(get_args(get_type_hints(contracts.Intervention)["kind"])) == set(interventions.KINDS)


def test_the_api_accepts_a_result_with_each_verdict_and_refuses_an_unknown_one():
    for verdict in verdicts.VERDICTS:
        schemas.parse_body(schemas.ReplayResult, {"hypotheses": [{"id": "h-1", "verdict": verdict}]})
    try:
        schemas.parse_body(schemas.ReplayResult, {"hypotheses": [{"id": "h-1", "verdict": "maybe"}]})
    except schemas.InvalidBody as exc:
        assert exc.problems[0]["field"] == "hypotheses.0.verdict"
    else:
        raise AssertionError("an unknown verdict was accepted")
