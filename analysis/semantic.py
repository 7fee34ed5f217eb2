"""Semantic per-step features from a small sentence-embedding model that ships inside a wheel.

The model is WordLlama's `l2_supercat` at 256 dimensions (MIT licence): a static token
embedding table (32,000 x 256, float16, 16 MB) with Llama-2's tokenizer, mean-pooled into a
sentence vector. The `wordllama` package (the `analysis` extra) carries both files in its
wheel; they are read from the installed package folder, so nothing is ever downloaded. The
package itself is never imported: its `__init__` configures the root logger, which an
analysis library must not do to its host process. Only `tokenizers` and `safetensors`
(its own dependencies) run.

Per step, with every vector L2-normalized (cosines in [-1, 1]; an empty text is the zero
vector, so its cosines are 0):

- `sem_task_similarity`      cosine to the task;
- `sem_final_similarity`     cosine to the final answer (the last non-human step; 1.0 for
                             that step itself): a wrong answer is usually carried from the
                             step that first said something like it;
- `sem_conclusion_similarity` cosine to the session's conclusion: the last non-human step
                             of at least `CONCLUSION_MIN_WORDS` words (a log often ends on a
                             one-word sign-off, which carries nothing of the answer);
- `sem_max_prior_similarity` highest cosine to any earlier step (low: the step says
                             something new; high: it repeats);
- `sem_prev_similarity`      cosine to the step before it (a topic shift when low);
- `sem_next_similarity`      cosine to the step after it (the next step takes it up);
- `sem_later_echo`           mean cosine of the later steps to it (how much of what follows
                             is about what this step said);
- `semantic_available`       1.0 when the model was loaded; without it (the package is not
                             installed) every column is 0.0 and this flag says so, so a ranker
                             trained with the model is not misled by the zeros.

`semantic_columns(doc, units)` gives `(SEMANTIC_NAMES, rows)`, one row per unit; the
embedder loads once per process (about 0.2 s) and a 1,000-step session of 1.7 M characters
takes about 0.4 s on a small shared CPU, nearly all of it tokenization (linear in text size;
each step's text is cut at `MAX_STEP_CHARS`). The private helpers shared with `step_signals`
(a step's text, its speaker) keep both modules reading a step the same way.
"""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any, Sequence

from tracefix.collector.document import session_task

from .roles import HUMAN_ROLES, speaker_of
from .step_signals import text_of
from .transition_unit import TransitionUnit

MODEL_PACKAGE = "wordllama"
WEIGHTS_FILE = "weights/l2_supercat_256.safetensors"
TOKENIZER_FILE = "tokenizers/l2_supercat_tokenizer_config.json"
WEIGHTS_KEY = "embedding.weight"
# A mean of token vectors settles long before 8,000 characters; the cut keeps a step that
# pastes a whole web page from costing more than its meaning is worth.
MAX_STEP_CHARS = 8000
CONCLUSION_MIN_WORDS = 20

SEMANTIC_NAMES = ("semantic_available", "sem_task_similarity", "sem_final_similarity", "sem_conclusion_similarity",
                  "sem_max_prior_similarity", "sem_prev_similarity", "sem_next_similarity", "sem_later_echo")
# Every column but the flag depends on the session (its topic, its length): worth giving the
# ranker as within-session z-scores too, as `ranker.RELATIVE_INPUTS` does for the lexical ones.
SEMANTIC_RELATIVE = SEMANTIC_NAMES[1:]
_BLOCK = 512  # rows of the step-by-step cosine matrix computed at once (memory O(block x steps))


class StaticEmbedder:
    """Token-embedding table + tokenizer -> L2-normalized mean-pooled sentence vectors."""

    def __init__(self, weights_path: str | Path, tokenizer_path: str | Path, name: str = ""):
        import numpy as np
        from safetensors import safe_open
        from tokenizers import Tokenizer

        with safe_open(str(weights_path), framework="np", device="cpu") as f:
            self.table = np.ascontiguousarray(f.get_tensor(WEIGHTS_KEY), dtype=np.float32)
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.name = name or Path(weights_path).stem

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def embed(self, texts: Sequence[str]) -> Any:
        """(len(texts) x dim) float32 array of unit vectors (zero rows for texts with no token)."""
        import numpy as np
        from scipy.sparse import csr_matrix

        texts = [t[:MAX_STEP_CHARS] if t else "" for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        ids = [e.ids for e in encodings]
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([len(i) for i in ids])
        flat = np.fromiter((t for row in ids for t in row), dtype=np.int64, count=int(indptr[-1]))
        np.clip(flat, 0, self.table.shape[0] - 1, out=flat)
        # Bag of token ids per text as a sparse (texts x vocabulary) matrix: the pooled sums are
        # one sparse product, without materializing a (tokens x dim) array.
        bags = csr_matrix((np.ones(flat.size, dtype=np.float32), flat, indptr),
                          shape=(len(ids), self.table.shape[0]))
        sums = np.asarray(bags @ self.table, dtype=np.float32)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        return sums / np.where(norms > 0, norms, 1.0)


def model_files(package: str = MODEL_PACKAGE) -> tuple[Path, Path] | None:
    """The shipped weights and tokenizer in the installed package's folder (None if absent).
    `find_spec` locates the package without running its `__init__`."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    weights, tokenizer = root / WEIGHTS_FILE, root / TOKENIZER_FILE
    return (weights, tokenizer) if weights.is_file() and tokenizer.is_file() else None


@functools.lru_cache(maxsize=4)
def load_embedder(package: str = MODEL_PACKAGE) -> StaticEmbedder | None:
    """The shipped embedder, loaded once per process; None when the package (or `tokenizers`,
    `safetensors`, `scipy`) is not installed."""
    files = model_files(package)
    if files is None:
        return None
    try:
        return StaticEmbedder(*files, name=f"{package}:{files[0].stem}")
    except ImportError:
        return None


def semantic_available() -> bool:
    return load_embedder() is not None


_SHIPPED: Any = object()  # default of `embedder`: the shipped model if installed


def semantic_columns(doc: dict, units: list[TransitionUnit],
                     embedder: StaticEmbedder | None = _SHIPPED) -> tuple[tuple[str, ...], list[list[float]]]:
    """(`SEMANTIC_NAMES`, one row per unit in step order). `embedder=None` (or the package
    missing) gives all-zero rows, `semantic_available` included."""
    if embedder is _SHIPPED:
        embedder = load_embedder()
    n = len(units)
    if embedder is None or n == 0:
        return SEMANTIC_NAMES, [[0.0] * len(SEMANTIC_NAMES) for _ in range(n)]
    import numpy as np

    texts = [text_of(u) for u in units]
    vectors = embedder.embed(texts + [session_task(doc) or ""])
    steps, task = vectors[:n], vectors[n]
    agent_steps = [k for k in range(n) if speaker_of(units[k].agent) not in HUMAN_ROLES]
    final_k = agent_steps[-1] if agent_steps else n - 1
    conclusion_k = next((k for k in reversed(agent_steps) if len(texts[k].split()) >= CONCLUSION_MIN_WORDS), final_k)

    task_similarity = steps @ task
    final_similarity = steps @ steps[final_k]
    final_similarity[final_k] = 1.0
    conclusion_similarity = steps @ steps[conclusion_k]
    conclusion_similarity[conclusion_k] = 1.0
    adjacent = np.einsum("ij,ij->i", steps[1:], steps[:-1])  # cosine of step k+1 to step k
    prev_similarity = np.concatenate([[0.0], adjacent])
    next_similarity = np.concatenate([adjacent, [0.0]])
    max_prior = np.zeros(n)
    later_sum = np.zeros(n)
    for start in range(0, n, _BLOCK):
        stop = min(start + _BLOCK, n)
        block = steps[start:stop] @ steps.T  # rows: steps start..stop-1, columns: every step
        rows = np.arange(start, stop)[:, None]
        columns = np.arange(n)[None, :]
        earlier = np.where(columns < rows, block, -np.inf).max(axis=1)
        max_prior[start:stop] = np.where(np.isfinite(earlier), earlier, 0.0)
        # Column sums over later rows: how much each step is echoed by the steps after it.
        later_sum += np.where(columns < rows, block, 0.0).sum(axis=0)
    later_count = np.arange(n - 1, -1, -1)
    later_echo = np.where(later_count > 0, later_sum / np.maximum(later_count, 1), 0.0)

    columns_by_name = {"semantic_available": np.ones(n), "sem_task_similarity": task_similarity,
                       "sem_final_similarity": final_similarity,
                       "sem_conclusion_similarity": conclusion_similarity, "sem_max_prior_similarity": max_prior,
                       "sem_prev_similarity": prev_similarity, "sem_next_similarity": next_similarity,
                       "sem_later_echo": later_echo}
    table = np.column_stack([columns_by_name[name] for name in SEMANTIC_NAMES]).astype(float)
    return SEMANTIC_NAMES, table.round(6).tolist()
