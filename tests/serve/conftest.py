"""A tiny seeded PRM (a Llama token classifier over prmkit's character tokenizer, built from a config,
nothing downloaded), candidate traces, and an in-process ``prmkit serve`` on a free loopback port."""

from __future__ import annotations

import threading
import time

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from prmkit.models import RewardModel, build_char_tokenizer  # noqa: E402
from prmkit.trace import Problem, Step, Trace  # noqa: E402

SEED = 0
PROBLEM = "Tom has 3 apples and buys 5 more. How many apples does he have?"
CANDIDATES = [
    ["3 + 5 = 8.", "The answer is 8."],
    ["3 + 5 = 9.", "The answer is 9."],
    ["Tom starts with 3.", "3 + 5 = 8.", "The answer is 8."],
    ["5 - 3 = 2.", "The answer is 2."],
]


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def tiny_rm() -> RewardModel:
    """A PRM whose step scores spread over (0, 1) (wide init), so a 1e-5 comparison means something."""
    torch.manual_seed(SEED)
    tok = build_char_tokenizer()
    cfg = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=512, initializer_range=0.3,
                                   pad_token_id=tok.pad_token_id, num_labels=2)
    model = transformers.LlamaForTokenClassification(cfg)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 0.2)
    return RewardModel(model.eval(), tok, convention="prmkit", name="tiny-prm")


def _make_traces(problem: str = PROBLEM, candidates=CANDIDATES, prefix: str = "c") -> list[Trace]:
    return [Trace(id=f"{prefix}{i}", problem=Problem(problem), steps=[Step(s) for s in steps])
            for i, steps in enumerate(candidates)]


@pytest.fixture()
def make_traces():
    """``make_traces(problem=PROBLEM, candidates=CANDIDATES, prefix="c")`` -> one trace per candidate."""
    return _make_traces


class LiveServer:
    """``prmkit serve``'s uvicorn server in a thread of this process; ``url`` once started."""

    def __init__(self, scorer, config, **kw) -> None:
        from prmkit.serve import make_server

        self.server = make_server(scorer, config, host="127.0.0.1", port=0, log_level="warning", **kw)
        self.app = self.server.app
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture()
def live_server():
    """``live_server(scorer, ServeConfig(...))`` -> a started :class:`LiveServer` (stopped after the test)."""
    started = []

    def start(scorer, config=None):
        from prmkit.serve import ServeConfig

        s = LiveServer(scorer, config or ServeConfig()).__enter__()
        started.append(s)
        return s

    yield start
    for s in started:
        s.__exit__(None, None, None)


@pytest.fixture()
def live_app():
    """``live_app(asgi_app)`` -> the URL of ``asgi_app`` served by uvicorn on a free loopback port
    (a stand-in server: vLLM's /pooling in the tests)."""
    import uvicorn

    servers = []

    def start(app) -> str:
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        th = threading.Thread(target=server.run, daemon=True)
        th.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if time.monotonic() > deadline or not th.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        servers.append((server, th))
        return f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"

    yield start
    for server, th in servers:
        server.should_exit = True
        th.join(timeout=30)
