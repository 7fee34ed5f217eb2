"""The replay result's typed contract (tracefix.collector.contracts, what the report and the
type checker read) names every verdict and intervention kind the replay writes."""
from typing import get_args, get_type_hints

from tracefix.collector import contracts
from tracefix.replay import interventions, verdicts


def test_every_verdict_and_intervention_kind_the_replay_writes_is_in_the_contract():
    assert set(get_args(contracts.Verdict)) == set(verdicts.VERDICTS)
    assert set(get_args(get_type_hints(contracts.Intervention)["kind"])) == set(interventions.KINDS)

