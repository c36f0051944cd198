"""
Many assistants, one vector store (issue 20, item 4).

- One local store serves every assistant of a process: 100 assistants opened on one data folder
  share one mem0 instance (one qdrant client), and each recalls only its own memories. Each has
  its own collection on that client, so its queries never scan another's points.
- Beyond one machine, a Qdrant server is a settings change (`memory.mem0`): the configuration
  path is driven against a fake Qdrant server on 127.0.0.1 (a small HTTP server answering the
  REST calls qdrant-client and mem0 make when a store opens), never a live one.
"""

import importlib.metadata
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support import result_of, sync_runner

from ai_assistant.memory.longterm import mem0_store
from ai_assistant.memory.longterm.mem0_store import COLLECTION, make_semantic_store
from ai_assistant.memory.longterm.vector_collections import collection_name
from ai_assistant.plumbing.settings import DEFAULTS, Settings

# the embedded layout itself: skipped where tests/memory_store.py keeps memories in PostgreSQL
pytestmark = [pytest.mark.core, pytest.mark.embedded_store_only]

ASSISTANTS = 100
TRADES = ("baker", "smith", "miller", "weaver", "fisher", "tanner", "cooper", "mason", "potter",
          "carter")  # fmt: skip


def test_one_local_store_serves_a_hundred_isolated_assistants(tmp_path):
    settings = Settings(DEFAULTS)
    stores = [make_semantic_store(settings, str(tmp_path), f"assistant_{n}", runner=sync_runner)
              for n in range(ASSISTANTS)]
    try:
        # one mem0 instance (one qdrant client on the folder) for all of them
        assert len({id(store._memory) for store in stores}) == 1
        assert len(mem0_store._stores) == 1
        assert next(iter(mem0_store._stores.values())).users == ASSISTANTS
        for number, store in enumerate(stores):
            fact = (f"Visitor number {number} is a {TRADES[number % len(TRADES)]} who lives by "
                    f"the gate {number}.")
            assert result_of(store.add(fact))[0]["event"] == "ADD"
        for number, store in enumerate(stores):
            own = result_of(store.list())
            assert [memory["memory"] for memory in own] == [
                f"Visitor number {number} is a {TRADES[number % len(TRADES)]} who lives by the "
                f"gate {number}."]
            # a question every assistant's fact answers recalls only this assistant's
            hits = result_of(store.search(f"Who is the {TRADES[number % len(TRADES)]}?",
                                          limit=20))
            assert [hit["id"] for hit in hits] == [own[0]["id"]]
            other = stores[(number + 1) % ASSISTANTS]
            assert result_of(other.get(own[0]["id"])) is None
        # each in its own collection of the one client, so a query scans one assistant's points
        client = stores[0]._memory.vector_store.client
        for number in range(ASSISTANTS):
            assert client.count(collection_name(COLLECTION, f"assistant_{number}")).count == 1
        assert client.count(COLLECTION).count == 0
        # forgetting an assistant removes its collection and leaves the others
        assert result_of(stores[7].delete_all()) == 1
        assert not client.collection_exists(collection_name(COLLECTION, "assistant_7"))
        assert len(result_of(stores[8].list())) == 1
    finally:
        for store in stores:
            store.close()
    assert not mem0_store._stores  # the last assistant closed the shared client


def test_an_own_collection_filters_on_everything_but_its_owner(tmp_path):
    store = make_semantic_store(Settings(DEFAULTS), str(tmp_path), "ada", runner=sync_runner)
    try:
        result_of(store.add("Ada met the baker at dawn.", metadata={"entry_id": "e1"}))
        result_of(store.add("Ada met the smith at noon.", metadata={"entry_id": "e2"}))
        listed = result_of(store.list(filters={"entry_id": "e2"}))
        assert [memory["memory"] for memory in listed] == ["Ada met the smith at noon."]
        own = store._memory.vector_store  # bound to ada's collection by the calls above
        assert own.collection_name == collection_name(COLLECTION, "ada")
        # the owner's condition is true of every point: no per-point check is asked for it
        assert own._create_filter({"user_id": "ada"}) is None
        assert own._create_filter({"user_id": "ada", "entry_id": "e2"}) is not None
    finally:
        store.close()


# ----------------------------------------------------------------------------------------------
# a Qdrant server, by configuration


class FakeQdrant(BaseHTTPRequestHandler):
    """
    Answers, in Qdrant's REST shapes (`{"result", "status", "time"}`), the calls a store makes
    when it opens on a server: the version (qdrant-client's compatibility check), the list of
    collections, creating one, and its payload indexes. Every request is recorded.
    """

    requests = []
    collections = {}

    def log_message(self, *args):
        return None

    def _reply(self, result, status=200):
        body = json.dumps({"result": result, "status": "ok", "time": 0.0}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}") if length else {}

    def do_GET(self):
        path = self.path.split("?")[0]
        self.requests.append(("GET", path, None))
        if path == "/":
            body = json.dumps({"title": "qdrant - vector search engine",
                               "version": importlib.metadata.version("qdrant-client")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif path == "/collections":
            self._reply({"collections": [{"name": name} for name in self.collections]})
        else:
            self._reply(None, status=404)

    def do_PUT(self):
        path = self.path.split("?")[0]
        body = self._body()
        self.requests.append(("PUT", path, body))
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "collections":
            self.collections[parts[1]] = body
            self._reply(True)
        elif len(parts) == 3 and parts[2] == "index":
            self._reply({"operation_id": len(self.requests), "status": "completed"})
        else:
            self._reply(None, status=404)


@pytest.fixture
def qdrant_server():
    FakeQdrant.requests, FakeQdrant.collections = [], {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeQdrant)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_qdrant_server_is_a_settings_change(tmp_path, qdrant_server):
    port = qdrant_server.server_address[1]
    settings = Settings(DEFAULTS, {"memory.mem0": {
        "vector_store": {"config": {"host": "127.0.0.1", "port": port}}}})
    ada = make_semantic_store(settings, str(tmp_path), "ada", runner=sync_runner)
    bert = make_semantic_store(settings, str(tmp_path), "bert", runner=sync_runner)
    try:
        assert ada._memory is bert._memory  # one client for the server, too
        client = ada._memory.vector_store.client
        assert not ada._memory.vector_store.is_local
        assert f"127.0.0.1:{port}" in client._client.rest_uri
        created = FakeQdrant.collections[COLLECTION]
        # our local embedder's size, cosine: what the embedded default uses
        assert created["vectors"]["size"] == ada._shared.embedder.dims
        assert created["vectors"]["distance"] == "Cosine"
        indexed = {body["field_name"] for method, path, body in FakeQdrant.requests
                   if method == "PUT" and path == f"/collections/{COLLECTION}/index"}
        assert {"user_id"} <= indexed  # the field that keeps assistants apart is indexed
        # a server keeps Qdrant's multitenant layout: one collection, partitioned by user_id
        assert not ada._shared.collections.per_assistant
        assert list(FakeQdrant.collections) == [COLLECTION]
        assert not (tmp_path / "qdrant").exists()  # nothing stored locally
    finally:
        ada.close()
        bert.close()
