"""Span vocabulary shared by the instrumentation (writer) and the collector (reader).

GenAI names follow the OpenTelemetry GenAI semantic conventions; everything of our own
lives under ``tracefix.*``. This module is the contract between the process that
records a session and every process that later reads, analyzes or replays it, so a name
changes here or nowhere.
"""

# --- OpenTelemetry GenAI semantic conventions -------------------------------------------
# The version followed (the last semantic-conventions release that holds the GenAI documents;
# they moved to open-telemetry/semantic-conventions-genai after it). Names equal
# opentelemetry-semantic-conventions' own (tests/instrumentation/test_message_parts.py checks).
GENAI_SEMCONV_VERSION = "1.41.0"
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"  # "chat" | "execute_tool" | "invoke_agent"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"  # "openai" | "anthropic"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
# JSON strings in the conventions' parts shape (tracefix.message_parts); a reader also takes
# the OpenAI chat shape older tracefix versions and other producers write
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"  # [{"role", "parts": [...], "name"?}]
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"  # the same, each with its "finish_reason"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"  # [parts]: a system prompt given apart from the messages
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"  # JSON string, the request's `tools`
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"  # JSON string
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"  # JSON string
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"  # = tracefix.session.id
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"  # the SDK client's base URL host, on every LLM span
SERVER_PORT = "server.port"

OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"
OP_INVOKE_AGENT = "invoke_agent"

# --- tracefix -----------------------------------------------------------------------------
SESSION_ID = "tracefix.session.id"
SESSION_SPAN = "tracefix.session.root"  # bool, true on the span `session {name}`
ENTRYPOINT = "tracefix.entrypoint"  # "pkg.mod:function"
INPUTS = "tracefix.inputs"  # JSON object of the entrypoint's keyword arguments
USER_ID = "tracefix.user.id"
METADATA = "tracefix.session.metadata"  # JSON object
OUTCOME = "tracefix.session.outcome"  # "success" | "failure" (from a registered evaluator)
OUTCOME_SCORE = "tracefix.session.score"  # float
EVALUATION = "tracefix.session.evaluation"  # JSON of the evaluator's full result
FINAL_OUTPUT = "tracefix.session.output"  # JSON of the entrypoint's return value
REPLAYABLE = "tracefix.session.replayable"  # bool: false once anything was truncated
# on the session root span, from an app holding a replay key (tracefix.replay_signing):
REPLAY_SIGNATURE = "tracefix.replay.signature"  # hex HMAC-SHA256 of session id, entrypoint, inputs
REPLAY_KEY_ID = "tracefix.replay.key_id"  # which key signed it (derived from the key, reveals nothing of it)
STEP = "tracefix.step"  # int, 0-based decision index: increments at each LLM call
CALL_SEQ = "tracefix.call.seq"  # int, order of every intercepted call (LLM and tool)
REQUEST_PARAMS = "tracefix.request.params"  # JSON of the remaining request kwargs
RESPONSE_RAW = "tracefix.response.raw"  # JSON of the full provider response (for replay)
# JSON list of a streamed response's events (chunks) as they came, in order: a replay streams these
RESPONSE_STREAM = "tracefix.response.stream"
TRUNCATED = "tracefix.truncated"  # bool on a span whose payload was cut
PARENT_SESSION_ID = "tracefix.parent_session.id"  # on a replayed session
INTERVENTION_ID = "tracefix.intervention.id"
INTERVENTION = "tracefix.intervention"  # JSON of the applied intervention
REPLAY_SOURCE = "tracefix.replay.source"  # on a call: "cassette" | "intervention" | "live"
DIVERGENCE = "tracefix.replay.divergence"  # JSON, on the call where replay went live early
SNAPSHOT_EVENT = "tracefix.snapshot"  # span event; attributes below
SNAPSHOT_KEY = "tracefix.snapshot.key"
SNAPSHOT_STATE = "tracefix.snapshot.state"  # JSON
SNAPSHOT_HASH = "tracefix.snapshot.hash"

# Feedback can also arrive as a span event (GenAI evaluation event).
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_SCORE = "gen_ai.evaluation.score.value"
EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"

# --- added by the instrumentation (issue 3) -----------------------------------------------
REQUEST_FINGERPRINT = "tracefix.request.fingerprint"  # sha256 of model+messages+tools (tracefix.fingerprints)
TOOL_FINGERPRINT = "tracefix.tool.fingerprint"  # sha256 of tool name+arguments (tracefix.fingerprints)
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_REQUEST_SEED = "gen_ai.request.seed"
SNAPSHOT_FINAL_EVENT = "tracefix.snapshot.final"  # span event on the session root at its end; attrs as
# SNAPSHOT_EVENT, tracefix.step = number of steps: the state after the last step (a replay
# without intervention restores it before the evaluator runs)
STREAM = "tracefix.request.stream"  # bool: the call asked for a stream
STREAM_ABANDONED = "tracefix.stream.abandoned"  # bool: the stream was dropped unfinished

# --- framework capture (issue 14): spans made from a framework's own structure ------------
FRAMEWORK = "tracefix.framework"  # "openai-agents" | "langgraph" | "langchain" | "autogen"
FRAMEWORK_NODE = "tracefix.framework.node"  # a graph's node name (LangGraph)
FRAMEWORK_SENDER = "tracefix.framework.sender"  # the agent whose message an AG2 agent answers
HANDOFF_FROM = "tracefix.handoff.from"  # on the execute_tool span of a handoff
HANDOFF_TO = "tracefix.handoff.to"
