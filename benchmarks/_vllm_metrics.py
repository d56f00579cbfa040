"""vLLM's own account of where a request's time went: its Prometheus ``/metrics``, read before and after a run.

The server times every request it finishes (queue, prefill, decode) and counts tokens and engine
iterations; the difference of two readings is what one measured stretch of work cost the server.
Parsing is ``prometheus_client``'s (a vLLM dependency); samples of the same name are summed over
their labels (engines, finish reasons), which is what a per-run total needs.
"""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

#: What each reading holds: a short name, and the vLLM sample it sums.
SERIES: dict[str, str] = {
    "requests": "vllm:e2e_request_latency_seconds_count",
    "e2e_s": "vllm:e2e_request_latency_seconds_sum",
    "queue_s": "vllm:request_queue_time_seconds_sum",
    "prefill_s": "vllm:request_prefill_time_seconds_sum",
    "decode_s": "vllm:request_decode_time_seconds_sum",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "iterations": "vllm:iteration_tokens_total_count",
    # speculative decoding (zero without it): tokens proposed and tokens the model confirmed
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
}

# Requests to the local server never go through a proxy.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def read_metrics(base_url: str, timeout: float = 10.0) -> dict[str, float]:
    """One reading of :data:`SERIES` from the server at ``base_url`` (``.../v1``); absent series read 0."""
    url = base_url.rstrip("/").removesuffix("/v1") + "/metrics"
    text = _OPENER.open(url, timeout=timeout).read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    return {key: totals.get(name, 0.0) for key, name in SERIES.items()}


def metrics_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What happened between two readings of the same server."""
    return {key: after[key] - before[key] for key in SERIES}
