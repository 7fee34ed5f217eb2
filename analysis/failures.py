"""Failures read from results and from the conversation: a tool's error or an answer off
its usual shape, a failure returned as text (`mark_error_shaped_results`), a failure the run
got past by making the same calls again (`mark_recovered_errors`), and a round of work
handed out again (`mark_failed_rounds`).
"""
from __future__ import annotations

import json
import re
from typing import Any

from tracefix.attributes import from_json_text

from .records import text_result
from .roles import hub_agents, in_words_only, is_coordinator, single_agent, speaker_of
from .transition_unit import TransitionUnit
from .values import WORD, compact_json, extract_artifacts, normalize_error, scalar_values, values_text


def result_error(result: Any) -> str | None:
    """A tool that reports failure in its return value rather than raising: in its own
    fields (an ok/success flag, an error, a failed status or an HTTP status of 400 or more),
    or by the flags of the one object an envelope wraps ({"status": 200, "data": {"ok":
    false, ...}}); a wrapped record's own status ("order": {"status": "rejected"}) is data."""
    outer = True
    while isinstance(result, dict):
        # Testbed-only wording, kept (issue 37): the warehouse's stock desk answers {"ok": false, ...};
        # without this reading (and "unable" in _ERROR_WORDS, its till's wording) the warehouse's
        # missing-argument faults go unseen, as mark_requests_without_effect reads only refusals
        # asked again.
        if result.get("ok") is False or result.get("success") is False:
            return str(result.get("error") or result.get("message") or result.get("reason") or "not ok")
        if result.get("error"):
            return str(result["error"])
        status = result.get("status", "") if outer else ""
        if isinstance(status, int) and not isinstance(status, bool) and 400 <= status <= 599:
            return str(result.get("message") or result.get("reason") or f"status {status}")
        if str(status).lower() in {"error", "failed", "failure", "denied", "rejected"}:
            return str(result.get("message") or result.get("reason") or status)
        inner = [v for v in result.values() if isinstance(v, (dict, list))]
        result, outer = (inner[0] if len(inner) == 1 and isinstance(inner[0], dict) else None), False
    if isinstance(result, str) and re.match(r"\s*(error|exception|traceback)\b", result, re.I):
        return result
    return None


def off_shape_result(result: Any, tool: str, structured_tools: set[str]) -> str | None:
    """A plain-text result from a tool that answers in structured values (a JSON object or
    list) elsewhere in the session: the tool's failure message returned instead of raised,
    whatever its wording."""
    if tool not in structured_tools or not isinstance(result, str) or not result.strip():
        return None
    try:
        json.loads(result)
        return None  # JSON text is still the tool's usual shape
    except ValueError:
        return result.strip()


def structured_result_tools(steps: list[dict]) -> set[str]:
    """Tools that answer in JSON: those that did in this session, and, in a session whose
    tools answer in JSON at least as often as in text, a tool whose one text answer (however
    often repeated) is all it said when another tool of the same agent answered in JSON (an
    agent's tools share one style: the text is the odd one out) and the text brings no value
    the call did not pass (a failure speaks of the request; an answer brings numbers and ids
    of its own: "X paid 59.30" is a till's answer, "a colour is needed" is a failure). A
    tool that answered two different texts (one that hands work on), or whose agent's tools
    all answer in text (a tool set that reports in prose), is a text tool."""
    structured: dict[str, int] = {}
    text: dict[str, int] = {}
    distinct: dict[str, set[str]] = {}
    answers: set[str] = set()  # tools whose text brought values of its own
    toolset: dict[str, set[str]] = {}  # agent -> the tools it called
    for s in steps:
        for tc in s.get("tool_calls") or []:
            name, result = tc.get("name") or "", tc.get("result")
            toolset.setdefault(s.get("agent") or "agent", set()).add(name)
            if isinstance(result, (dict, list)):
                structured[name] = structured.get(name, 0) + 1
            elif isinstance(result, str) and result.strip():
                text[name] = text.get(name, 0) + 1
                distinct.setdefault(name, set()).add(result.strip())
                if extract_artifacts(result) - extract_artifacts(values_text(from_json_text(tc.get("arguments")))):
                    answers.add(name)
    tools = set(structured)
    if sum(structured.values()) >= sum(text.values()):
        for names in toolset.values():
            if names & structured.keys():
                tools |= {name for name in names if len(distinct.get(name, ())) == 1 and name not in answers}
    return tools


def is_empty_result(result: Any) -> bool:
    return result is None or result == "" or result == [] or result == {}


# Words a failure message is made of in any app: an outcome that did not happen (not found,
# unable, denied, timed out) or a precondition unmet (missing, required, invalid, unknown).
_ERROR_WORDS = re.compile(
    r"\b(?:errors?|exception|traceback|fail(?:s|ed|ure)?|unable|cannot|can't|could ?n[o']t|"
    r"not (?:found|allowed|permitted|supported|available|valid|authori[sz]ed)|no such|does not exist|"
    r"missing|required|invalid|denied|forbidden|unauthori[sz]ed|insufficient|exceed(?:s|ed)?|"
    r"rejected|refused|timed? ?out|unavailable|unknown)\b", re.I)
# A statement that something is not so ("x is not packed", "isn't open", "no such box", "not
# yet booked", "not able to"), and a result's own verdict field written out ("ok: false", "success = no",
# "ok False" in a record laid out as prose, "data ok False" / "data.ok=false" under an envelope's
# field): generic English and generic field names, read only in a short text result (a tool's
# answer, not a listing).
_NEGATED = re.compile(
    r"\b(?:is|are|was|were|has|have|had|does|do|did|has been|have been)\s+not\b|"
    r"\b(?:is|are|was|were|has|have|had|does|do|did)n[\u2019']t\b|\bnot (?:yet|able)\b|\bno such\b|"
    r"(?:^|[;,\n{(])\s*(?:[\"']?\w+[\"']?\s*[.:]?\s*)?[\"']?(?:ok|success)[\"']?\s*[:=]?\s*(?:false|no)\b", re.I)
# A failure message is a line or two; a listing of records is longer.
_SHORT_RESULT_CHARS = 300


# How far after a failed call its retry is looked for (steps): a retry comes soon, in the
# agent's own retry loop or after its report and the same request handed to it (or to
# another agent) again, and the bound keeps the reading linear in a long session.
_RETRY_WINDOW = 10


def _worded_as_failure(text: str | None) -> bool:
    return bool(text) and bool(_ERROR_WORDS.search(text) or _NEGATED.search(text))


def mark_error_shaped_results(units: list[TransitionUnit]) -> None:
    """Tool results that are failures returned as text rather than raised, read from their
    shape and from what the agent did next, not from the tool's vocabulary alone:

    - a short text result worded as a failure (error words, a negated statement, a verdict
      field saying no; not a record listing);
    - a short text result whose call the agent makes again as its next call, with nothing
      done in between but words (a retry at once, or after it reported and was handed the
      request again: the result was of no use to it), when the call answers in JSON this
      time (the first answer was the odd one out), or at once the same text again (a
      failure that does not go away) or a failure, or after words when the agent's answer
      in between was that text, relayed word for word, and the retry answered otherwise
      while no later step used a value of the first text: the agent passed on what its tool
      said, was asked again, and the run went on with what the retry gave (a record relayed
      and then lost to a timeout on the retry keeps its values in use, and is not read so);
    and, once one result is known for an error, the same text from the same tool elsewhere.
    Each such step becomes an error step (outcome "error_result"), as if the tool had raised."""
    flagged: set[tuple[str, str]] = set()
    last_use = {v: w.index for w in units for v in w.artifacts_consumed}  # value -> the last step using it
    for k, u in enumerate(units):
        if u.kind != "llm":
            continue
        # What the same call gave when the agent made it again as the session's next call.
        nxt = next((w for w in units[k + 1:k + 1 + _RETRY_WINDOW] if w.action["calls"]), None)
        again = {sig: f for sig, f in zip(nxt.call_signatures, nxt.feedback)} \
            if nxt is not None and nxt.agent == u.agent else {}
        at_once = nxt is not None and nxt.index == u.index + 1
        for sig, f in zip(u.call_signatures, u.feedback):
            text = None if f.get("error") else text_result(f.get("result"))
            if text is None or len(text) > _SHORT_RESULT_CHARS:
                continue
            # JSON this time; or, at once, the same text again or a failure (other text at once
            # is a conversation, "noted", "noted twice", but a call that worked is not made
            # again at once only to fail). Other text after words is left alone: a timeout
            # then the record, and the record then a timeout, read alike once both are prose.
            retry = again.get(sig)
            answer = None if retry is None else (retry.get("error") or retry.get("result"))
            retried = retry is not None and (
                isinstance(answer, (dict, list))
                or (at_once and (answer == f.get("result") or bool(retry.get("error"))
                                 or _worded_as_failure(text_result(answer))))
                or (not at_once and answer != f.get("result") and _relayed_then_dropped(units, k, nxt, text, last_use)))
            if retried or _worded_as_failure(text):
                flagged.add((f["tool"], normalize_error(text) or ""))
    if flagged:
        for u in units:
            if u.kind != "llm" or u.status == "error":
                continue
            for f in u.feedback:
                text = None if f.get("error") else text_result(f.get("result"))
                if text is not None and (f["tool"], normalize_error(text) or "") in flagged:
                    _read_as_error(u, f"{f['tool']}: {text}")
                    break
    mark_requests_without_effect(units)


def _read_as_error(u: TransitionUnit, text: str) -> None:
    u.status, u.outcome = "error", "error_result"
    u.error_text = text
    u.error_signature = normalize_error(text)


def _answer(f: dict) -> Any:
    return f.get("error") or f.get("result")


def _brings_its_own(answer: Any, arguments: Any, seen: set[str]) -> bool:
    """Whether a call's answer holds something the call did not carry: a record (a JSON value
    with a field the arguments did not give, words included: a state, a place), or, in text,
    an id or number the session had not seen before (`seen`): a refusal names what it is about,
    a result brings what was made or found."""
    parsed = from_json_text(answer) if isinstance(answer, str) else answer
    given = {str(v).lower() for v in scalar_values(from_json_text(arguments))}
    if isinstance(parsed, (dict, list)):
        return any(str(v).lower() not in given for v in scalar_values(parsed) if not isinstance(v, bool))
    return bool(extract_artifacts(str(answer)) - extract_artifacts(values_text(from_json_text(arguments))) - seen)


def mark_requests_without_effect(units: list[TransitionUnit]) -> None:
    """A call that did not take effect, read from what it led to and not from its words: its
    answer brought nothing of its own (no id, number or other value its arguments did not
    carry: no record was made or found) and the same call, the same arguments, was made again
    within _RETRY_WINDOW steps (at once, or once the request was handed out again) and was
    answered the same way (the world had not moved: a call that had changed it would meet the
    change). However politely worded ("not in a position to ..."), that answer was a refusal:
    the step gets `asked_again_at` and reads as an error step, and so does each repeat. What
    failed already (a raise, an error object) gets `asked_again_at` too: the reading is the
    same whatever the wording (evidence/refused_requests.py reports them)."""
    seen: set[str] = set()  # the values the session named before the step read
    for k, u in enumerate(units):
        if k:
            seen |= units[k - 1].artifacts_produced | units[k - 1].artifacts_consumed
        if u.kind != "llm" or not u.action["calls"] or u.asked_again_at is not None:
            continue
        for sig, call, f in zip(u.call_signatures, u.action["calls"], u.feedback):
            answer = _answer(f)
            if answer is None or _brings_its_own(answer, call["arguments"], seen):
                continue
            again = [w for w in units[k + 1:k + 1 + _RETRY_WINDOW] if sig in w.call_signatures]
            same = [w for w in again if _answer(w.feedback[w.call_signatures.index(sig)]) == answer]
            if not again or same[:1] != again[:1]:
                continue  # not asked again, or answered otherwise the next time: it may have worked
            u.asked_again_at = same[0].index
            for w in [u, *same]:
                if w.status != "error":
                    _read_as_error(w, f"{f['tool']}: {text_result(answer) or compact_json(answer)}")
            break


def _relayed_then_dropped(units: list[TransitionUnit], k: int, retry: TransitionUnit, text: str,
                          last_use: dict[str, int]) -> bool:
    """Whether step k's agent answered with `text` (its tool's short text result) before
    `retry` made the call again, every word of it (`WORD`, the module's words of three
    letters or more: its numbers and stamps aside, as an agent relays a message with its
    own), and no step from the retry on used a value of `text` that the call itself did not
    carry (`last_use`: value -> the last step using it, read once per session, so that the
    reading stays linear in the session's length)."""
    words = set(WORD.findall(text.lower()))
    relayed = len(words) >= 2 and any(w.agent == units[k].agent and words <= set(WORD.findall(w.action["text"].lower()))
                                      for w in units[k + 1:retry.index])  # a unit's index is its place in `units`
    if not relayed:
        return False
    return all(last_use.get(v, -1) < retry.index for v in extract_artifacts(text) - units[k].artifacts_consumed)


def mark_recovered_errors(units: list[TransitionUnit]) -> None:
    """Set `recovered_by` on an error step whose failed calls were made again with the same
    arguments within _RETRY_WINDOW steps, by its agent or another (a team may hand a failed
    request to another of its agents), and the retry did not fail the same way: each call
    returned a result this time, or the retry failed otherwise. Read from the calls
    alone, not from the error's words: whatever failed and then worked when asked again was
    transient (a retry, in the same turn or after the request was handed out again) or
    cleared by what happened in between, and a failure that the same calls did not meet
    again did not stop them (a timeout, then "only 3 on the shelf": the run lived with the
    second). Either way the step that made the calls first is no more where the run went
    wrong than the retry; a retry that fails the same way keeps the failure, and so does one
    that fails otherwise only on its way to failing the same way again (a refusal, a timeout
    on the retry, the refusal again). Read from the last step back, so that what became of
    each retry is known when the step before it is read."""
    for k in range(len(units) - 1, -1, -1):
        u = units[k]
        if u.status != "error" or not u.action["calls"]:
            continue
        failed = {sig for sig, f in zip(u.call_signatures, u.feedback) if f.get("error")} \
            or (set(u.call_signatures) if u.outcome == "error_result" else set())
        if not failed:
            continue
        later = next((w for w in units[k + 1:k + 1 + _RETRY_WINDOW] if failed & set(w.call_signatures)), None)
        if later is None or not failed <= set(later.call_signatures):
            continue  # not made again, or only some of the calls: nothing to read
        if later.status != "error":
            worked = {sig for sig, f in zip(later.call_signatures, later.feedback)
                      if f.get("result") is not None and not f.get("error")}
            if failed <= worked:
                u.recovered_by = later.index
            continue
        last = later  # where the retries of the same calls ended
        while last.recovered_by is not None:
            last = units[last.recovered_by]
        if not (last.status == "error" and last.error_signature == u.error_signature):
            u.recovered_by = later.index


def _request(u: TransitionUnit) -> tuple[set[str], set[str]]:
    """A hand-over's words (lower-cased) and its values: the artifacts and capitalized words
    it names (who and what the request is about)."""
    text = u.action["text"] + " " + " ".join(u.call_signatures if u.action["calls"] else [])
    words = {t.lower() for t in re.findall(r"[A-Za-z0-9][\w.-]*", text)}
    values = set(extract_artifacts(text)) | set(re.findall(r"\b[A-Z][a-z]+\b", text))
    return words, values


def _same_request(a: tuple[set[str], set[str]], b: tuple[set[str], set[str]]) -> bool:
    """The same values, and words that overlap at least _SAME_REQUEST (Jaccard)."""
    (wa, va), (wb, vb) = a, b
    return va == vb and len(wa & wb) >= _SAME_REQUEST * len(wa | wb)


# Two hand-overs naming the same values with words that overlap this much ask for the same work.
_SAME_REQUEST = 0.7
_MIN_REQUEST_TOKENS = 4


def mark_failed_rounds(units: list[TransitionUnit]) -> None:
    """Set `round_failed` on the report of every round of work that was handed out again.

    A hand-over is a coordinator's step after which another agent speaks; its round runs
    until the hand-over's agent speaks again, and its report is the round's last text step.
    When the same agent later hands the same agent the same request again (nearly the same
    words) and no call of the round returned a usable result, the first round did not get
    the work done, whatever its report says: that report is a failure report. (A round whose
    calls succeeded and that is handed out again is repeated work, not a retry: no verdict.)
    Read from the conversation's structure alone: no wording, no names."""
    n = len(units)
    if single_agent(units):
        _mark_failed_own_rounds(units)
        return
    # Who hands work out: the hub of the conversation's shape (or an agent named as a
    # coordinator); a worker's report handed back is the end of a round, not a request.
    givers = hub_agents([u.agent for u in units]) | {u.agent for u in units if is_coordinator(u.agent)}
    speakers = [speaker_of(u.agent) for u in units]  # an agent talking to itself hands nothing over
    handovers = [k for k in range(n - 1) if units[k].agent in givers and speakers[k + 1] != speakers[k]
                 and (units[k].action["text"].strip() or units[k].action["calls"])]
    requests = {k: _request(units[k]) for k in handovers}
    # Only hand-overs between the same two agents about the same values can be the same request.
    alike: dict[tuple, list[int]] = {}
    for k in handovers:
        alike.setdefault((units[k].agent, units[k + 1].agent, frozenset(requests[k][1])), []).append(k)
    for h in handovers:
        if len(requests[h][0]) < _MIN_REQUEST_TOKENS:
            continue
        peers = alike[(units[h].agent, units[h + 1].agent, frozenset(requests[h][1]))]
        if not any(g > h and _same_request(requests[h], requests[g]) for g in peers):
            continue
        end = next((j for j in range(h + 1, n) if units[j].agent == units[h].agent), None)
        if end is None or end == h + 1:
            continue
        if _got_a_result(units[h + 1:end]):
            continue  # the round got something done: handing it out again repeats work, it does not retry it
        report = next((j for j in range(end - 1, h, -1) if in_words_only(units[j])), end - 1)
        units[report].round_failed = True


def _got_a_result(round_: list[TransitionUnit]) -> bool:
    """Whether a call of the round returned a usable result (one that is no error, empty or not)."""
    return any(u.status != "error" and u.outcome in ("result", "empty_result") for u in round_)


def _mark_failed_own_rounds(units: list[TransitionUnit]) -> None:
    """mark_failed_rounds for a single agent, whose hand-overs are its own words-only steps:
    when it says the same request to itself again and no call in between returned a usable
    result, the first words after the first saying (its report on that round) are a
    failure report, whatever they say."""
    said = [k for k in range(len(units)) if in_words_only(units[k])]
    requests = {k: _request(units[k]) for k in said}
    alike: dict[frozenset, list[int]] = {}  # only requests about the same values can be the same
    for i, k in enumerate(said):
        alike.setdefault(frozenset(requests[k][1]), []).append(i)
    for i, h in enumerate(said[:-2]):
        if len(requests[h][0]) < _MIN_REQUEST_TOKENS:
            continue
        again = next((said[j] for j in alike[frozenset(requests[h][1])]
                      if j > i + 1 and _same_request(requests[h], requests[said[j]])), None)
        if again is None or _got_a_result(units[h + 1:again]):
            continue
        units[said[i + 1]].round_failed = True


_MESSAGE_ERROR = re.compile(
    r"^(?:.*\b)?((?:[A-Z][a-zA-Z]+(?:Error|Exception))\b[^\n]*|Traceback \(most recent call last\)[^\n]*"
    r"|(?i:error|failed|failure)\s*:[^\n]*)", re.M)


def message_error(text: str) -> str | None:
    lowered = (text or "").lower()  # every branch of the pattern needs one of these words: skip the slow scan
    if not any(word in lowered for word in ("error", "exception", "traceback", "fail")):
        return None
    m = _MESSAGE_ERROR.search(text or "")
    return m.group(1).strip()[:300] if m else None
