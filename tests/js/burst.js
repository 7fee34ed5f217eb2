// A burst of GenAI spans from the OpenTelemetry JS SDK (2.x) through one of its OTLP trace
// exporters, as a Node.js agent would send them at shutdown: every span is created first, then
// the BatchSpanProcessor's forceFlush exports all batches at once (up to `concurrencyLimit`).
//
//   NODE_PATH=<cache>/node_modules node burst.js --protocol grpc|http/protobuf|http/json \
//       --endpoint URL --spans 20000 --sessions 5 --run RUN_ID [--ca ca.pem] [--token TOKEN]
//
// Prints one JSON line: spans exported and failed (by the exporter's own results) and the
// errors it met. Used by tests/collector/test_js_exporters.py; the packages are pinned in
// package.json / package-lock.json beside this file.
'use strict';

const fs = require('fs');
const { context, trace } = require('@opentelemetry/api');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');

function args() {
  const out = { protocol: 'grpc', spans: 20000, sessions: 5, run: 'js', concurrency: 1000, timeoutMillis: 60000 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    out[argv[i].replace(/^--/, '')] = argv[i + 1];
  }
  for (const key of ['spans', 'sessions', 'concurrency', 'timeoutMillis']) out[key] = Number(out[key]);
  return out;
}

function exporterFor(opts) {
  const ca = opts.ca ? fs.readFileSync(opts.ca) : undefined;
  const common = { url: opts.endpoint, concurrencyLimit: opts.concurrency, timeoutMillis: opts.timeoutMillis };
  if (opts.protocol === 'grpc') {
    const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-grpc');
    const grpc = require('@grpc/grpc-js');
    const extra = {};
    if (ca) extra.credentials = grpc.credentials.createSsl(ca);
    if (opts.token) {
      extra.metadata = new grpc.Metadata();
      extra.metadata.set('authorization', `Bearer ${opts.token}`);
    }
    return new OTLPTraceExporter({ ...common, ...extra });
  }
  const extra = ca ? { httpAgentOptions: { ca } } : {};
  if (opts.token) extra.headers = { Authorization: `Bearer ${opts.token}` };
  if (opts.protocol === 'http/protobuf') {
    const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');
    return new OTLPTraceExporter({ ...common, ...extra });
  }
  if (opts.protocol === 'http/json') {
    const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
    return new OTLPTraceExporter({ ...common, ...extra });
  }
  throw new Error(`unknown protocol ${opts.protocol}`);
}

// Counts what the exporter reports for each batch: the SDK drops a failed batch silently.
class Counting {
  constructor(inner) {
    this.inner = inner;
    this.exported = 0;
    this.failed = 0;
    this.errors = {};
  }
  export(spans, done) {
    this.inner.export(spans, (result) => {
      if (result.code === 0) {
        this.exported += spans.length;
      } else {
        this.failed += spans.length;
        const message = String(result.error && result.error.message || result.error).slice(0, 200);
        this.errors[message] = (this.errors[message] || 0) + 1;
      }
      done(result);
    });
  }
  shutdown() { return this.inner.shutdown(); }
  forceFlush() { return this.inner.forceFlush ? this.inner.forceFlush() : Promise.resolve(); }
}

async function main() {
  const opts = args();
  const exporter = new Counting(exporterFor(opts));
  const processor = new BatchSpanProcessor(exporter, {
    maxQueueSize: opts.spans, // the queue holds the whole burst: the processor itself drops nothing
    maxExportBatchSize: 512,
    scheduledDelayMillis: 600000, // nothing leaves before forceFlush: one burst
    exportTimeoutMillis: 120000,
  });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': `js-burst-${opts.protocol}` }),
    spanProcessors: [processor],
    forceFlushTimeoutMillis: 300000,
  });
  const tracer = provider.getTracer('tracefix-js-burst');
  const perSession = Math.ceil(opts.spans / opts.sessions);
  let made = 0;
  for (let s = 0; s < opts.sessions && made < opts.spans; s++) {
    const sessionId = `${opts.run}-s${s}`;
    const root = tracer.startSpan(`invoke_agent js-agent`, {
      attributes: {
        'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'js-agent',
        'tracefix.session.id': sessionId, 'tracefix.session.root': true,
      },
    });
    made += 1;
    const inRoot = trace.setSpan(context.active(), root);
    for (let i = 1; i < perSession && made < opts.spans; i++, made++) {
      const span = tracer.startSpan('chat js-model-1', {
        attributes: {
          'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.system': 'openai',
          'gen_ai.request.model': 'js-model-1', 'gen_ai.response.model': 'js-model-1',
          'gen_ai.usage.input_tokens': 10 + (i % 7), 'gen_ai.usage.output_tokens': 3 + (i % 5),
          'gen_ai.response.finish_reasons': ['stop'],
          'tracefix.session.id': sessionId,
          'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: `question ${i}` }] }]),
          'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: `answer ${i}` }],
                                                      finish_reason: 'stop' }]),
        },
      }, inRoot);
      span.end();
    }
    root.end();
  }
  const started = Date.now();
  await provider.forceFlush();
  const seconds = (Date.now() - started) / 1000;
  await provider.shutdown();
  process.stdout.write(JSON.stringify({
    protocol: opts.protocol, created: made, exported: exporter.exported, failed: exporter.failed,
    errors: exporter.errors, seconds,
  }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack || err}\n`);
  process.exit(1);
});
