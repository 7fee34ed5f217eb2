"""The models the scripted server (:mod:`tracefix.demo.sim`) answers, by name (:data:`MODELS`):
`handler(request_body, context) -> assistant message dict`. `bank-agent` plays the banking
demo's agents (:mod:`tracefix.demo.policy`) and `warehouse-crew` the warehouse demo's
(:mod:`tracefix.demo.warehouse_model`), both with fault injection (:func:`scripted_team`,
:mod:`tracefix.demo.faults`); `plan-agent` plays any agent whose task spells out a tool plan
(:mod:`tracefix.demo.plan_agent`, faults from ``plan_faults``); `sim-analyst` stands in for
tracefix's own LLM (:mod:`tracefix.demo.analyst`). Tests add models with :func:`register_model`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from . import analyst
from .domains import domain_of_task
from .faults import FaultInjector, unit_draw
from .plan_agent import MODEL as PLAN_MODEL, plan_agent
from .policy import decide
from .warehouse_model import MODEL as WAREHOUSE_MODEL, decide as warehouse_decide


@dataclass
class RequestContext:
    """What a model handler knows besides the request body."""
    session: str
    task: str | None
    step: int | None
    replay: bool
    seed: int
    headers: dict[str, str]
    injector: FaultInjector
    plan_faults: tuple = ()  # plan_agent.PlanFault: the plan-agent model's flaws

    def draw(self, purpose: str) -> float:
        """A reproducible number in [0, 1) for this session, step and purpose."""
        return unit_draw(self.seed, self.session, self.step, purpose)


ModelHandler = Callable[[dict, RequestContext], dict]


def _text(content: Any) -> Any:
    """Message content as plain text: the parts of a content array joined (the policy reads text)."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content


def scripted_team(decide_next: Callable[..., Any]) -> ModelHandler:
    """A model handler for a scripted team: `decide_next(messages, tools, reads_edits)` gives
    the next message with the faults it could host; the injector picks one or none."""
    def handle(body: dict, ctx: RequestContext) -> dict:
        messages = [{**m, "content": _text(m.get("content"))} for m in body["messages"]]
        domain = domain_of_task(ctx.task) if ctx.task else None
        if domain is not None:
            domain.task(ctx.task)  # a variant's text is drawn from its id: the model knows it from then on
        reads_edits = ctx.injector.follow_draw(ctx.session, ctx.step)
        decision = decide_next(messages, body.get("tools"), reads_edits)
        faulty = ctx.injector.apply(decision, messages, task=ctx.task, session=ctx.session,
                                    step=ctx.step, replay=ctx.replay)
        return faulty or decision.message
    return handle


bank_agent = scripted_team(decide)

# the agents of the banking app and of the warehouse crew, a domain-free plan follower,
# and the scripted stand-in for tracefix's own LLM
MODELS: dict[str, ModelHandler] = {"bank-agent": bank_agent, WAREHOUSE_MODEL: scripted_team(warehouse_decide),
                                   analyst.MODEL: analyst.handle, PLAN_MODEL: plan_agent}


def register_model(name: str, handler: ModelHandler) -> None:
    """Serve `handler` under model `name` too (tests and benchmarks add their own)."""
    MODELS[name] = handler
