import subprocess
import sys

import numpy as np
import pytest

from dreamgym_env.buffer import EmbedderConfig, HashingEmbedder, build_embedder, embed_pairs
from dreamgym_env.errors import ConfigError


def test_hashing_vectors_are_unit_and_deterministic_across_processes():
    texts = ["On the countertop 1, you see a mug 2.", "search[red shoes]", "Ünïcode café"]
    vectors = HashingEmbedder(dim=64).embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (3, 64)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    code = (
        "from dreamgym_env.buffer import HashingEmbedder;"
        f"print(HashingEmbedder(dim=64).embed({texts!r}).tobytes().hex())"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert bytes.fromhex(other.stdout.strip()) == vectors.tobytes()


def test_hashing_batch_equals_single_and_ignores_case_and_spacing():
    e = HashingEmbedder(dim=128)
    texts = ["go to cabinet 1", "open the fridge 1 now", "x"]
    batch = e.embed(texts)
    for i, t in enumerate(texts):
        np.testing.assert_allclose(batch[i], e.embed([t])[0], atol=1e-6)
    np.testing.assert_allclose(e.embed(["Go  to\nCabinet 1"])[0], batch[0], atol=1e-6)


def test_hashing_similarity_orders_by_overlap():
    e = HashingEmbedder()
    a, b, c = e.embed(["go to cabinet 1", "go to cabinet 2", "take apple 1 from fridge 1"])
    assert a @ b > 0.6 > a @ c


def test_empty_text_is_a_zero_vector():
    assert not HashingEmbedder(dim=16).embed([""]).any()


def test_pair_key_weights_action():
    e = HashingEmbedder()
    state = "On the countertop 1, you see a mug 2, a knife 1, and a bread 1. " * 5
    same = embed_pairs(e, [state, state], ["take mug 2 from countertop 1", "take knife 1 from countertop 1"])
    assert same[0] @ same[1] < 0.95
    with pytest.raises(ValueError, match="one action per state"):
        embed_pairs(e, ["a"], [])


def test_config_needs_model_for_non_hashing():
    with pytest.raises(ValueError, match="needs a model"):
        EmbedderConfig(kind="openai")
    with pytest.raises(ConfigError, match="DREAMGYM_EMBEDDING_BASE_URL"):
        build_embedder(EmbedderConfig(kind="openai", model="m"))


def test_import_dreamgym_env_buffer_stays_light():
    code = (
        "import sys, dreamgym_env.buffer;"
        "print(','.join(m for m in ('faiss','torch','sentence_transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_openai_embedder_against_a_local_endpoint():
    from dreamgym_env.buffer import OpenAIEmbedder
    from tests._http import serve_json

    seen = []

    def respond(body, port):
        seen.append(body)
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.0]}
            for i, t in enumerate(body["input"])
        ]
        return {
            "object": "list",
            "data": data[::-1],
            "model": body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }

    server = serve_json(respond)
    try:
        e = OpenAIEmbedder("emb", f"http://127.0.0.1:{server.server_port}/v1", batch_size=2)
        vectors = e.embed(["abc", "", "abcdef"])
        assert vectors.shape == (3, 3) and e.dim == 3 and e.signature == "openai:emb:dim=3"
        np.testing.assert_allclose(vectors[0], np.array([3, 1, 0]) / np.sqrt(10), rtol=1e-5)
        assert [len(b["input"]) for b in seen] == [2, 1] and seen[0]["input"][1] == " "
    finally:
        server.shutdown()
