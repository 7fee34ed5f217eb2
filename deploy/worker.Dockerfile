# A replay worker is the agent's own image plus tracefix's replay extra: replays re-run the
# agent's code, so they need exactly the agent's modules and dependencies. Build it with
#   docker build -f deploy/worker.Dockerfile --build-arg APP_IMAGE=registry/my-agent:1.4 .
# and run it with the agent's packages allowed (nothing else is ever imported) and the app's
# replay key (from the secret your app reads it from; it replays only what the app signed):
#   docker run -e TRACEFIX_TOKEN=... -e TRACEFIX_REPLAY_KEY=... IMAGE --server http://tracefix:4318 --allow-module my_agent
ARG APP_IMAGE
FROM ${APP_IMAGE}
RUN pip install --no-cache-dir 'tracefix[replay]'
ENTRYPOINT ["tracefix", "worker"]
