"""A scripted HTTP server speaking the Anthropic Messages and OpenAI Responses wire formats,
and streamed OpenAI chat completions as compatible servers send them (the demo's scripted
server answers chat completions for its agents), streams event for event as the APIs send them. Deterministic: with `tools` in the request and no tool result yet it asks
for the first tool, else it answers text; with thinking (Anthropic) or reasoning (OpenAI)
on, the turn opens with signed/encrypted reasoning and a text answer cites a source."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "The balance is 120.50."


def _has_tool_result(body: dict) -> bool:
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, list) and any(isinstance(c, dict) and c.get("type") == "tool_result" for c in content):
            return True
    items = body.get("input")
    return isinstance(items, list) and any(isinstance(i, dict) and i.get("type") == "function_call_output"
                                           for i in items)


THINKING = "The user asks for a balance; the get_balance tool answers that."
SIGNATURE = "EqQBCkYIARgCKkCsig" + "x" * 40  # opaque to the client: it must come back byte for byte
CITATION = {"type": "char_location", "cited_text": "Balance: 120.50", "document_index": 0,
            "document_title": "statement", "start_char_index": 0, "end_char_index": 15, "file_id": None}


def anthropic_message(body: dict) -> dict:
    """With `thinking` enabled the turn opens with a signed thinking block and a redacted one,
    and a text answer cites its source, as extended thinking and citations answer."""
    thinking = (body.get("thinking") or {}).get("type") == "enabled"
    content: list[dict] = []
    if thinking:
        content += [{"type": "thinking", "thinking": THINKING, "signature": SIGNATURE},
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}]
    if body.get("tools") and not _has_tool_result(body):
        tool = body["tools"][0]
        content.append({"type": "tool_use", "id": "toolu_01", "name": tool["name"], "input": {"account_id": "ACC-1"}})
        stop = "tool_use"
    else:
        text = {"type": "text", "text": ANSWER}
        content.append({**text, "citations": [CITATION]} if thinking else text)
        stop = "end_turn"
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": body["model"], "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 21, "output_tokens": 9}}


def _halves(text: str) -> list[str]:
    return [text[:len(text) // 2], text[len(text) // 2:]]


def anthropic_events(message: dict) -> list[tuple[str, dict]]:
    """The SSE the Messages API sends: streamed fields arrive in pieces (text, thinking, tool
    input JSON), a signature and each citation in one delta, other blocks whole; a ping."""
    start = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": 21, "output_tokens": 1}}
    events = [("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"})]

    def delta(i: int, payload: dict) -> tuple[str, dict]:
        return "content_block_delta", {"type": "content_block_delta", "index": i, "delta": payload}

    for i, block in enumerate(message["content"]):
        kind, deltas = block["type"], []
        if kind == "text":
            first = {"type": "text", "text": ""}
            deltas += [delta(i, {"type": "citations_delta", "citation": c}) for c in block.get("citations") or ()]
            deltas += [delta(i, {"type": "text_delta", "text": piece}) for piece in _halves(block["text"])]
        elif kind == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas += [delta(i, {"type": "thinking_delta", "thinking": piece}) for piece in _halves(block["thinking"])]
            deltas.append(delta(i, {"type": "signature_delta", "signature": block["signature"]}))
        elif kind == "tool_use":
            first = {**block, "input": {}}
            deltas += [delta(i, {"type": "input_json_delta", "partial_json": piece})
                       for piece in _halves(json.dumps(block["input"]))]
        else:
            first = block
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": first}))
        events += deltas
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"],
                                                                        "stop_sequence": None},
                                     "usage": {"output_tokens": 9}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def openai_response(body: dict) -> dict:
    """With `reasoning` in the request the output opens with a reasoning item (a summary and
    encrypted content, which must go back unchanged); a text answer cites a URL."""
    output: list[dict] = []
    if body.get("reasoning"):
        output.append({"type": "reasoning", "id": "rs_01", "encrypted_content": "gAAAAB" + "e" * 40,
                       "summary": [{"type": "summary_text", "text": THINKING}]})
    if body.get("tools") and not _has_tool_result(body):
        output.append({"type": "function_call", "id": "fc_01", "call_id": "call_r1", "name": body["tools"][0]["name"],
                       "arguments": json.dumps({"account_id": "ACC-1"}), "status": "completed"})
    else:
        annotations = [{"type": "url_citation", "start_index": 0, "end_index": 11, "title": "statement",
                        "url": "https://bank.invalid/statement"}] if body.get("reasoning") else []
        output.append({"type": "message", "id": "msg_r1", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": ANSWER, "annotations": annotations}]})
    return {"id": "resp_01", "object": "response", "created_at": 1700000000, "model": body["model"],
            "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "usage": {"input_tokens": 30, "output_tokens": 7, "total_tokens": 37,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


def openai_response_events(response: dict) -> list[tuple[str, dict]]:
    """The SSE the Responses API sends: lifecycle events around each output item's added
    event, its parts and deltas in pieces (summary text, output text, arguments), its done."""
    events: list[dict] = [{"type": "response.created", "response": {**response, "status": "in_progress",
                                                                    "output": []}},
                          {"type": "response.in_progress", "response": {**response, "status": "in_progress",
                                                                        "output": []}}]
    for i, item in enumerate(response["output"]):
        at = {"item_id": item["id"], "output_index": i}
        if item["type"] == "reasoning":
            events.append({"type": "response.output_item.added", "output_index": i, "item": {**item, "summary": []}})
            for s, part in enumerate(item["summary"]):
                events.append({"type": "response.reasoning_summary_part.added", **at, "summary_index": s,
                               "part": {"type": "summary_text", "text": ""}})
                events += [{"type": "response.reasoning_summary_text.delta", **at, "summary_index": s, "delta": piece}
                           for piece in _halves(part["text"])]
                events.append({"type": "response.reasoning_summary_text.done", **at, "summary_index": s,
                               "text": part["text"]})
                events.append({"type": "response.reasoning_summary_part.done", **at, "summary_index": s,
                               "part": part})
        elif item["type"] == "message":
            events.append({"type": "response.output_item.added", "output_index": i,
                           "item": {**item, "status": "in_progress", "content": []}})
            for c, part in enumerate(item["content"]):
                events.append({"type": "response.content_part.added", **at, "content_index": c,
                               "part": {"type": "output_text", "text": "", "annotations": []}})
                events += [{"type": "response.output_text.delta", **at, "content_index": c, "delta": piece,
                            "logprobs": []} for piece in _halves(part["text"])]
                events += [{"type": "response.output_text.annotation.added", **at, "content_index": c,
                            "annotation_index": a, "annotation": annotation}
                           for a, annotation in enumerate(part["annotations"])]
                events.append({"type": "response.output_text.done", **at, "content_index": c, "text": part["text"],
                               "logprobs": []})
                events.append({"type": "response.content_part.done", **at, "content_index": c, "part": part})
        else:
            events.append({"type": "response.output_item.added", "output_index": i,
                           "item": {**item, "arguments": "", "status": "in_progress"}})
            events += [{"type": "response.function_call_arguments.delta", **at, "delta": piece}
                       for piece in _halves(item["arguments"])]
            events.append({"type": "response.function_call_arguments.done", **at, "arguments": item["arguments"]})
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [(event["type"], {**event, "sequence_number": n}) for n, event in enumerate(events)]


def openai_chat_chunks(body: dict) -> list[tuple[str, dict]]:
    """The SSE of a streamed chat completion as some OpenAI-compatible servers send it: the
    role alone, the answer in pieces, the finish reason, then a usage chunk whether or not
    the request asked for it (`stream_options.include_usage`), with a provider field."""
    head = {"id": "chatcmpl-01", "object": "chat.completion.chunk", "created": 1700000000, "model": body["model"],
            "system_fingerprint": "fp_01"}

    def chunk(delta: dict, finish: str | None = None, **more: Any) -> tuple[str, dict]:
        return "", {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                    **more}

    words = ANSWER.split(" ")
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": word if i == 0 else f" {word}"}) for i, word in enumerate(words)]
    chunks.append(chunk({}, "stop"))
    chunks.append(("", {**head, "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": len(words),
                                                         "total_tokens": 12 + len(words)},
                        "provider": "scripted"}))
    return chunks


class ProviderServer:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                server.requests.append((self.path, body))
                if self.path.endswith("/messages"):
                    message = anthropic_message(body)
                    if body.get("stream"):
                        return self._sse(anthropic_events(message))
                    return self._json(message)
                if self.path.endswith("/chat/completions") and body.get("stream"):
                    return self._sse(openai_chat_chunks(body))
                if self.path.endswith("/responses"):
                    response = openai_response(body)
                    if body.get("stream"):
                        return self._sse(openai_response_events(response))
                    return self._json(response)
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _json(self, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list[tuple[str, dict]]) -> None:
                data = "".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n" if name else
                               f"data: {json.dumps(payload)}\n\n" for name, payload in events)
                if not self.path.endswith("/messages"):
                    data += "data: [DONE]\n\n"
                encoded = data.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(encoded)))
                self.end_headers()
                self.wfile.write(encoded)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
