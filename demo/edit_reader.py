"""What an edit asks the agent to do: the scripted models' reading of an edit's content.

An edit (a user turn the team's protocol did not send, :mod:`tracefix.demo.edits`) is read
clause by clause into the actions it asks for (:class:`Asks`):

- which tools to call (``call``) and which not to call, or that were already done (``forbid``);
- which argument values to pass (``values``: argument -> value; ``free``: values stated
  without naming their argument, placed by their shape and direction), which arguments to
  pass from what the agent already has (``include``) and which to leave out (``omit``);
- where to take values from (``source``: argument or ``*`` -> instruction | results | reports);
- whether to stop now (``stop`` True: answer or report now) or not yet (False);
- to whom the work goes (``handover``).

Negation and scope apply to every part: "do not call X" and "X was already done" forbid X;
"X has not been carried out yet" asks for it; "leave out the name" omits it; "ACC-1003 is
wrong" states a value not to use. Narrative about the recorded run ("in the recorded run it
used ACC-1003", "it left out the name") asks for nothing. What the reader cannot read is
simply absent from the reading, and the model plays the step as it would have.

The words the reader knows for tools, arguments and agents come from the model that reads
(:class:`Vocabulary`); the rest of the grammar (negation, modality, completion, sources) is
general English.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .edits import Stated, read as read_values

# --- general grammar --------------------------------------------------------------------------

_NEG = r"(?:\bnot\b|n't\b|\bnever\b|\bno longer\b|\bnor\b)"
_PROHIBIT = re.compile(r"\b(?:do not|don't|dont|never|must not|mustn't|should not|shouldn't|need not|needn't|"
                       r"no need to|not necessary to|there is no need|avoid|refrain from|skip|stop|cancel|"
                       r"do not try to|not allowed to|may not|cannot|can't)\b", re.I)
_DONE = re.compile(r"\b(?:already|been (?:done|made|carried out|completed|executed|performed|processed|handled|sent|"
                   r"booked|issued|paid|reserved|deposited|transferred|closed)|(?:is|was|were|are|got) (?:done|complete|"
                   r"completed|finished|carried out|made|performed|executed|processed|handled|taken care of|booked|"
                   r"issued|paid|sent|through)|went through|took place|has happened|succeeded|done earlier|"
                   r"taken care of)\b", re.I)
_NOT_DONE = re.compile(rf"(?:{_NEG}|\byet to\b|\bstill\b|\bpending\b|\boutstanding\b|\bremain|\bmissing\b|"
                       rf"\bunfinished\b|\bincomplete\b|\bleft to do\b|\bhas to be\b|\bneeds to be\b|\bmust be\b)", re.I)
# asking for an action: an imperative or modal verb of doing
_DO = re.compile(r"\b(?:call|use|run|do|make|perform|execute|invoke|carry (?:it )?out|retry|try again|redo|repeat|"
                 r"go ahead|proceed|complete|finish|need to|needs to|have to|has to|must|should|please|now|go on|"
                 r"continue|then|first|instead|pass|with|send|issue|book|place|get|fetch|look up|check|ask for|request|"
                 r"want|go for)\b", re.I)
_REPORTING = re.compile(r"\b(?:report|reporting|say|saying|claim|claiming|tell|telling|answer|answering|reply|"
                        r"replying|respond|write|writing|mark|declare)\w*\b", re.I)
_INSTEAD = re.compile(r"\b(?:instead of|rather than|in place of|not)\b", re.I)

_STOP_NOW = re.compile(
    r"\b(?:give|send|write|post|deliver|provide)\b[^.;]{0,20}\b(?:final answer|answer|reply)\b(?![^.;]{0,40}\b(?:after|"
    r"once|only when|when|before|until)\b)|\bfinal answer now\b|\banswer (?:the customer )?(?:now|right away|"
    r"immediately|straight away)\b|\breply (?:to the customer )?(?:now|right away|immediately)\b|\bwrap (?:it |this )?up\b|"
    r"\b(?:stop|finish|end|conclude) (?:here|now|the task|the ticket|working)\b|\bjust report\b|"
    r"\breport (?:it |this |that )?(?:as done|now|back now)\b|\bclose (?:the|this) ticket\b|"
    r"\bnothing (?:is |more |else )?(?:left|pending|remaining|outstanding|to do|more to do)\b|"
    r"\bno (?:more |further |other )?(?:work|steps?|actions?|tasks?|jobs?) (?:is |are )?(?:left|pending|remaining|"
    r"outstanding|needed)\b|\b(?:everything|all (?:of it|the work|the steps|steps|actions|jobs|tasks|requested actions)?|"
    r"the (?:task|work|request|ticket|job)) (?:is |are |has been |have been |was |were )?(?:already )?(?:done|complete|"
    r"completed|finished|carried out|handled|sorted|taken care of)\b|\byou(?:'re| are) (?:done|finished)\b", re.I)
_STOP_LATER = re.compile(
    r"\b(?:do not|don't|never|must not|should not|shouldn't|not)\b[^.;]{0,25}\b(?:give|send|write|post|answer|reply|"
    r"respond|report|finish|stop|wrap|say|claim|conclude|mark)\w*\b|\b(?:answer|reply|respond|report)\w* (?:only )?"
    r"(?:after|once|when)\b|\bbefore (?:you )?(?:give|giving|answer|answering|reply|replying|report|reporting|finish|"
    r"finishing|stop|stopping)\w*\b|\bonly then\b|\bnot (?:yet )?(?:finished|done|complete|completed|over)\b|"
    r"\b(?:isn't|is not|aren't|are not|wasn't|was not|hasn't been|has not been|have not been|haven't been) (?:yet )?"
    r"(?:finished|done|complete|completed|carried out|made|performed|over)\b|\bstill (?:to do|open|pending|missing|"
    r"needs?|has|have|to be)\b|\b(?:remaining|outstanding|unfinished|incomplete)\b|\bleft to do\b|"
    r"\bkeep going\b|\bgo on with\b|\bcarry on\b|\bnot (?:the )?(?:end|last)\b|\bhold off\b|\bnot so fast\b|"
    r"\b(?:too|so) (?:early|soon)\b|\bprematurely\b|\bwait (?:with|before|until|till)\b", re.I)

_SOURCES = {
    "instruction": re.compile(r"\b(?:instruction|instructions|instructed|the task|the request|the ticket|the note|"
                              r"your note|the checklist|your plan|the plan|what you were (?:told|given|asked)|"
                              r"you were (?:told|given|asked)|the customer (?:gave|said|asked|wants|named|wrote)|"
                              r"the orchestrator|the dispatcher|as (?:you were )?(?:told|asked))\b", re.I),
    "results": re.compile(r"\b(?:results?|returned|returns|response|output|the lookup|looked up|came back|"
                          r"what (?:the )?tools? (?:said|gave|showed)|the data|the record)\b", re.I),
    "reports": re.compile(r"\b(?:reports|(?:the|their|its|a) report|(?:workers?|crew|\w+Agent) (?:reported|said|found)|"
                          r"what (?:the )?(?:workers?|crew|\w+) (?:reported|said|found)|the workers?|the crew|replies|"
                          r"replied)\b", re.I),
}
_FROM = re.compile(r"\b(?:from|in|per|according to|as|against|match|matches|by|given by|stated (?:in|by)|named (?:in|by)|"
                   r"says|states|shows|gave|given|says so|exactly|re-?read|read (?:it |them )?again|look again|"
                   r"check|copy|take|the one|what|returns|returned|give|gives|gave|use|using|that|which|named|listed|found)\b",
                   re.I)
_REREAD = re.compile(r"\b(?:re-?read|read (?:\w+ )?(?:again|carefully|properly)|look (?:at )?(?:\w+ )?again|"
                     r"report (?:exactly|precisely|faithfully|correctly|again|what)|exactly (?:those|the|what)|"
                     r"(?:did not|didn't|does not|doesn't) match|as (?:it was |they were )?returned|field by field|"
                     r"misread|misreported|mis-?reported|(?:was|were) reported wrong(?:ly)?|wrong(?:ly)? reported|"
                     r"got (?:the|it) wrong)\b", re.I)

_HAND = re.compile(r"\b(?:hand|pass|give|send|leave|let|ask|delegate|assign|forward|route|route it|transfer (?:it|this) "
                   r"to|belongs to|is for|job for|work for|should be done by|done by|handled by|is (?:\w+ )?job)\b", re.I)

_OMIT = re.compile(r"\b(?:without|leave (?:out|off)|leaving (?:out|off)|omit|omitting|drop|dropping|skip|"
                   r"(?:must|should|can|may|needs to|has to) be (?:left out|omitted|dropped|skipped|removed)|"
                   r"(?:is|are) (?:optional|not needed|not required|unnecessary|not necessary)|no need for|"
                   r"(?:do not|don't|never|must not|should not) (?:pass|include|give|send|add|set|supply|provide|put))\b", re.I)
_INCLUDE = re.compile(r"\b(?:pass|passing|include|including|add|adding|give|giving|supply|provide|set|fill|put|with|"
                      r"(?:do not|don't|never) (?:forget|omit|drop|skip|leave out)|remember|is (?:missing|required|needed)|"
                      r"are (?:missing|required|needed)|needs?|requires?|must have|use|using|take|from)\b", re.I)

_QUOTE = re.compile(r"\"[^\"]{25,}\"|“[^”]{25,}”")  # a long quoted passage is material, not a directive
_NARRATIVE = re.compile(r"\b(?:in the recorded run|in the original run|last time|previously|earlier run|"
                        r"the recording)\b", re.I)


@dataclass
class Vocabulary:
    """The words a model knows: each tool's ways of being named, each argument's, the agents."""
    tools: dict[str, str]  # tool -> regex
    arguments: dict[str, str]  # argument -> regex
    agents: tuple[str, ...] = ()
    shapes: dict[str, str] = field(default_factory=dict)  # argument -> regex a value of it matches
    words: dict[str, str] = field(default_factory=dict)  # argument -> regex of its word values ("express")


@dataclass
class Asks:
    text: str
    call: list[str] = field(default_factory=list)
    forbid: set[str] = field(default_factory=set)
    values: dict[str, str] = field(default_factory=dict)
    free: list[Stated] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    include: set[str] = field(default_factory=set)
    omit: set[str] = field(default_factory=set)
    source: dict[str, str] = field(default_factory=dict)
    stop: bool | None = None
    handover: str | None = None
    reread: bool = False

    def empty(self) -> bool:
        return not (self.call or self.forbid or self.values or self.free or self.include or self.omit
                    or self.source or self.stop is not None or self.handover or self.reread)

    def decides(self, argument: str, shape: str | None = None) -> bool:
        """The edit says what this argument's value is: a value, or where to take it from."""
        if argument in self.values or argument in self.source or "*" in self.source:
            return True
        return shape is not None and any(re.fullmatch(shape, s.value, re.I) for s in self.free)

    def asks_for(self, tool: str) -> bool:
        return tool in self.call and tool not in self.forbid


def _clauses(text: str) -> list[str]:
    text = _QUOTE.sub(" ", text or "")
    # sentence ends (not inside a number or an id), semicolons, colons, dashes and "but"
    parts = re.split(r"(?<=\S)[.!?](?=\s|$)|[;\n]|:(?=\s)|\s[-–—]\s|,?\s+\bbut\b\s+|,\s+(?=so\b|and then\b|then\b)",
                     text)
    return [p.strip() for p in parts if p and p.strip()]


def _spoken(text: str) -> str:
    return re.sub(r"[`*]", "", text)


def _mentions(pattern: str, clause: str) -> list[re.Match]:
    return list(re.finditer(pattern, clause, re.I))


def read(text: str, vocabulary: Vocabulary, *, own_action: str | None = None) -> Asks:
    """The actions `text` asks for, in the terms of `vocabulary`. `own_action` is what "it" or
    "the action" means when no tool was named before (the step's own action)."""
    asks = Asks(text or "")
    last_tool = own_action
    for raw in _clauses(text):
        clause = _spoken(raw)
        narrative = bool(_NARRATIVE.search(clause))
        tools = sorted({t for t, p in vocabulary.tools.items() if _mentions(p, clause)},
                       key=lambda t: _mentions(vocabulary.tools[t], clause)[0].start())
        refers = bool(re.search(r"\b(?:it|this|that|the (?:action|call|step|job|operation|one))\b", clause, re.I))
        _read_values(clause, vocabulary, asks, narrative)
        if not narrative:
            _read_word_values(clause, vocabulary, asks)
        if not narrative:
            _read_stop(clause, asks)
            _read_handover(clause, vocabulary, asks)
            _read_sources(clause, vocabulary, asks)
            _read_arguments(clause, vocabulary, asks)
            targets = tools or ([last_tool] if refers and last_tool else [])
            _read_calls(clause, targets, vocabulary, asks)
        if tools:
            last_tool = tools[-1]
    asks.call = [t for t in dict.fromkeys(asks.call) if t not in asks.forbid]
    return asks


def _read_calls(clause: str, tools: list[str], vocabulary: Vocabulary, asks: Asks) -> None:
    if not tools:
        return
    # "call X instead of Y" / "X rather than Y": what follows the contrast is not wanted
    m = re.search(r"\b(?:instead of|rather than|in place of)\b", clause, re.I)
    if m and len(tools) > 1:
        after = {t for t in tools if any(x.start() > m.start() for x in _mentions(vocabulary.tools[t], clause))}
        before = [t for t in tools if t not in after]
        asks.forbid |= after
        if before and not _PROHIBIT.search(clause[:m.start()]):
            asks.call += before
        return
    done = _DONE.search(clause)
    if done:
        near = clause[max(0, done.start() - 20):done.end() + 6]
        pending = re.search(_NEG, near, re.I) or re.search(r"\b(?:yet to|still)\b|\byet\b", near, re.I) or \
            re.search(r"\b(?:until|till|once|after|before|when|unless)\b[^.;]{0,30}$", clause[:done.start()], re.I)
        if pending:
            asks.call += tools  # "X was not carried out", "wait until X is done"
        else:
            asks.forbid |= set(tools)  # "X was already done"
        return
    if re.search(r"\b(?:never|not|n't)\s+(?:\w+ly\s+)?(?:\w+ed|done|made|sent|paid|run|happened|went)\b|"
                 r"\bdid(?: not|n't)\b|"
                 r"\b(?:never|not) (?:yet )?(?:been )?(?:called|done|made|carried out|run|executed|performed|happened)\b|"
                 r"\b(?:is|are|was|were) (?:still )?(?:pending|outstanding|missing|open|left)\b|\bstill (?:needs?|to)\b|"
                 r"\b(?:needs?|has|have) to be (?:called|done|made|carried out|run)\b", clause, re.I):
        asks.call += tools  # "X was never called", "X is still pending"
        return
    prohibit = _PROHIBIT.search(clause)
    if prohibit:
        following = clause[prohibit.end():prohibit.end() + 40]
        if _REPORTING.match(following.strip()) and not any(
                _mentions(vocabulary.tools[t], following[:12]) for t in tools):
            return  # "do not report it as done": about the report, read by _read_stop
        if re.match(r"\s*(?:forget|omit|leave out)\b", following, re.I):
            asks.call += tools  # "don't forget to call X"
            return
        asks.forbid |= set(tools)
        return
    for tool in tools:
        named = _mentions(vocabulary.tools[tool], clause)
        if not named:  # "it": the action in scope, asked for by a verb of doing
            if _DO.search(clause):
                asks.call.append(tool)
            continue
        before = clause[:named[0].start()]
        # the object of a verb of doing ("call X", "go ahead with X", "X needs to run"), or the
        # clause's own verb ("Transfer $5 ...", "Now deposit it")
        if re.fullmatch(r"\s*(?:\w+\s+){0,2}", before) or _DO.search(before[-30:]) or \
                re.match(r"\W*(?:\w+\W+){0,1}(?:now|again|first|next|too|as well|needs to|has to|must|should)\b",
                         clause[named[0].end():], re.I):
            asks.call.append(tool)


def _read_stop(clause: str, asks: Asks) -> None:
    later, now = _STOP_LATER.search(clause), _STOP_NOW.search(clause)
    if later and (not now or later.start() <= now.start()):
        asks.stop = False
    elif now and not re.search(r"\bnot\b|\bbefore\b|n't\b", clause[max(0, now.start() - 25):now.start()], re.I):
        asks.stop = True


def _read_handover(clause: str, vocabulary: Vocabulary, asks: Asks) -> None:
    named = [a for a in vocabulary.agents if re.search(rf"\b{re.escape(a)}\b", clause, re.I)]
    if len(named) != 1 or not _HAND.search(clause):
        return
    agent = named[0]
    before = clause[:re.search(rf"\b{re.escape(agent)}\b", clause, re.I).start()]
    if re.search(rf"{_NEG}|\bnot\b", before[-30:], re.I):
        return  # "do not hand it to X"
    asks.handover = agent


def _read_sources(clause: str, vocabulary: Vocabulary, asks: Asks) -> None:
    if _REREAD.search(clause):
        asks.reread = True
    if not _FROM.search(clause):
        return
    found = [s for s, p in _SOURCES.items() if p.search(clause)]
    if not found:
        return
    m = _SOURCES[found[0]].search(clause)
    if re.search(r"\b(?:ignore|disregard|not|never|don't|do not|instead of|rather than)\b[^.;]{0,25}$",
                 clause[:m.start()], re.I):
        return  # "ignore your instruction", "not from the results"
    arguments = [a for a, p in vocabulary.arguments.items() if re.search(p, clause, re.I)]
    for argument in arguments or ["*"]:
        asks.source.setdefault(argument, found[0])
    if found[0] == "results" and not arguments:
        asks.reread = True


def _read_arguments(clause: str, vocabulary: Vocabulary, asks: Asks) -> None:
    for argument, pattern in vocabulary.arguments.items():
        for m in _mentions(pattern, clause):
            window = clause[max(0, m.start() - 40):m.end() + 40]
            omit, include = _OMIT.search(window), _INCLUDE.search(window)
            if omit and not re.search(r"\b(?:do not|don't|never)\s+(?:forget|omit|drop|skip|leave)", window, re.I):
                if not re.search(r"\bleft out\b", window) or re.search(r"\b(?:must|should|can|may|to) be left out\b",
                                                                        window):
                    asks.omit.add(argument)
                    asks.include.discard(argument)
                    asks.values.pop(argument, None)
                break
            if include or argument in asks.values:
                asks.include.add(argument)
                break


def _read_values(clause: str, vocabulary: Vocabulary, asks: Asks, narrative: bool) -> None:
    """Values stated in a clause: bound to the argument named next to them (and fitting its
    shape), else free; a value stated as wrong is remembered as not to be used."""
    reading = read_values(clause)
    stated = sorted(reading.ids + reading.amounts, key=lambda s: clause.find(s.value))
    for s in stated:
        if s.negated or (narrative and not _is_right_value(clause, s.value)):
            asks.wrong.append(s.value)
            continue
        position = _position(clause, s.value)
        bound = None
        best = 10 ** 6
        for argument, pattern in vocabulary.arguments.items():
            shape = vocabulary.shapes.get(argument)
            named_as = any(re.fullmatch(r"\S*\s+(?:as|for)\s+(?:the\s+|your\s+|its\s+|their\s+)?(?:\w+'s\s+)?",
                                        clause[position:m.start()], re.I) for m in _mentions(pattern, clause)
                           if m.start() > position)
            if shape and not re.fullmatch(shape, s.value, re.I) and not named_as:
                continue
            for m in _mentions(pattern, clause):
                distance = position - m.end() if m.end() <= position else (m.start() - position) * 3
                if m.start() > position and re.fullmatch(
                        r"\S*\s+(?:as|for|in|into)\s+(?:the\s+|your\s+|its\s+|their\s+)?(?:\w+'s\s+)?",
                        clause[position:m.start()], re.I):
                    distance = 0  # "use X as the customer's name": X is the name, whatever it looks like
                if 0 <= distance < 45 and distance < best:
                    best, bound = distance, argument
        if bound is not None and bound not in asks.omit:
            asks.values.setdefault(bound, s.value)
        else:
            asks.free.append(s)


def _read_word_values(clause: str, vocabulary: Vocabulary, asks: Asks) -> None:
    for argument, pattern in vocabulary.words.items():
        for m in re.finditer(rf"\b(?:{pattern})\b", clause, re.I):
            if re.search(r"\b(?:not|never|instead of|rather than|no)\b\W*(?:\w+\W+){0,2}$", clause[:m.start()], re.I) or \
                    re.match(r"\W*(?:is|was) (?:wrong|incorrect)", clause[m.end():], re.I):
                asks.wrong.append(m.group(0).lower())
            elif argument not in asks.omit:
                asks.values.setdefault(argument, m.group(0).lower())


def _position(clause: str, value: str) -> int:
    i = clause.find(value)
    if i < 0:
        m = re.search(re.escape(value.split(".")[0]), clause.replace(",", ""))
        i = m.start() if m else 0
    return i


def _is_right_value(clause: str, value: str) -> bool:
    """In a clause about the recorded run, a value it names as the right one ("the right value is X")."""
    i = _position(clause, value)
    return bool(re.search(r"\b(?:right|correct|should have been|should be|must be|is actually|actually)\b[^.;]{0,20}$",
                          clause[:i], re.I))


def read_all(texts: list[str], vocabulary: Vocabulary, *, own_action: str | None = None) -> Asks | None:
    """The reading of every edit in front of the agent (None: there is none)."""
    texts = [t for t in texts if t and t.strip()]
    return read("\n".join(texts), vocabulary, own_action=own_action) if texts else None
