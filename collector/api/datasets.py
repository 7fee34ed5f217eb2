"""Datasets of sessions and regression results: `/api/v1/datasets` lists the datasets,
`/api/v1/datasets/items` lists (GET) and adds (POST) items, `/api/v1/datasets/import` puts
exported items in; `/api/v1/regress` lists regression runs or one run's results (GET) and
stores one item's result (POST, what a `tracefix worker --jobs regress` sends);
`/api/v1/regress/queue` queues a run's items as `regress` jobs for such workers.
What an item says is `collector.datasets`."""
from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tracefix.collector import datasets
from tracefix.collector.api.bodies import read_model
from tracefix.collector.api.context import ApiContext
from tracefix.collector.api.paging import listed, page_params, query_params, streamed_page
from tracefix.collector.responses import JSONResponse
from tracefix.collector.schemas.datasets import (DatasetAddRequest, DatasetImportRequest, RegressQueueRequest,
                                                RegressResultRequest)
from tracefix.collector.store import datasets as store_datasets
from tracefix.collector.store.datasets import DEFAULT_DATASET, ITEM_KINDS

MAX_IMPORT_BYTES = 256 << 20


def routes(api: ApiContext) -> list[Route]:
    store, write = api.store, api.write

    async def list_datasets(request: Request) -> Response:
        return JSONResponse({"datasets": await run_in_threadpool(store_datasets.list_datasets, store)})

    async def items(request: Request) -> Response:
        if request.method == "POST":
            data = await read_model(request, DatasetAddRequest, 1 << 20)
            done = await write(lambda s: store_datasets.add_to_dataset(s, data.dataset or DEFAULT_DATASET,
                                                                       data.session_ids))
            return JSONResponse(done, status_code=201)
        q = query_params(request)
        offset, limit = page_params(q, default_limit=100)
        filters = {"service": q.text("service"), "since": q.time("since"), "kind": q.choice("kind", ITEM_KINDS),
                   "session_ids": q.texts("session_id", most=1000)}
        full = q.choice("full", ("true", "false"), default="false") == "true"
        dataset = q.text("dataset")

        def read() -> list[dict]:
            read_all = datasets.export_items if full else datasets.list_items
            return read_all(store, dataset, **filters)

        rows = await run_in_threadpool(read)
        return streamed_page("items", len(rows), offset, listed(rows[offset:offset + limit], offset))

    async def import_items(request: Request) -> Response:
        data = await read_model(request, DatasetImportRequest, MAX_IMPORT_BYTES)
        by_dataset: dict[str, list[dict]] = {}
        for item in data.items:
            by_dataset.setdefault(data.dataset or item.dataset or DEFAULT_DATASET, []).append(item.model_dump())

        def put(s) -> dict:
            done = [store_datasets.import_items(s, name, group) for name, group in by_dataset.items()]
            return {"dataset": ", ".join(d["dataset"] for d in done), "added": [i for d in done for i in d["added"]],
                    "present": [i for d in done for i in d["present"]]}

        return JSONResponse(await write(put), status_code=201)

    async def regress(request: Request) -> Response:
        if request.method == "POST":
            data = await read_model(request, RegressResultRequest, 16 << 20)
            await write(lambda s: store_datasets.save_regress_result(s, data.run_id, data.session_id, data.result))
            return JSONResponse({"run_id": data.run_id, "session_id": data.session_id, "saved": True}, status_code=201)
        q = query_params(request)
        offset, limit = page_params(q, default_limit=100)
        run_id = q.text("run_id")
        if run_id is None:
            runs = await run_in_threadpool(store_datasets.list_regress_runs, store, offset + limit)
            return JSONResponse({"runs": runs[offset:]})
        results = await run_in_threadpool(store_datasets.regress_results, store, run_id)
        return JSONResponse({"results": results[offset:offset + limit]})

    async def queue(request: Request) -> Response:
        data = await read_model(request, RegressQueueRequest, 4 << 20)
        job_ids = await write(lambda s: store_datasets.queue_regress(s, data.run_id, data.items,
                                                                     {"runs": data.runs, "tools": data.tools}))
        return JSONResponse({"run_id": data.run_id, "job_ids": job_ids}, status_code=201)

    return [
        Route("/api/v1/datasets", api.guarded(list_datasets)),
        Route("/api/v1/datasets/items", api.guarded(items), methods=["GET", "POST"]),
        Route("/api/v1/datasets/import", api.guarded(import_items), methods=["POST"]),
        Route("/api/v1/regress", api.guarded(regress), methods=["GET", "POST"]),
        Route("/api/v1/regress/queue", api.guarded(queue), methods=["POST"]),
    ]
