"""
The model server's SDK client (`openai.OpenAI`), one per endpoint, key and timeout for the
process, shared by every assistant that uses it, as the endpoint's breaker is
(`plumbing.llm_resilience`).

Each client loads the certificate store for its TLS context (about 20 ms of CPU and 0.8 MB held,
measured over 100 clients) and keeps a connection pool of its own, which a world of many
assistants on one model server would pay per assistant. The SDK's clients are safe to share
between threads, and `LLMClient` passes a call's own timeout with its request.
"""

import threading

_SDKS = {}  # (base_url, api_key, timeout) -> openai.OpenAI
_SDKS_LOCK = threading.Lock()


def shared_sdk(base_url, api_key, timeout):
    """
    The process's `openai.OpenAI` client for one endpoint, key and timeout (built on first use;
    its own retries are off, `LLMClient`'s apply).

    Args:
        base_url (str or None): The endpoint (None: the SDK's default).
        api_key (str): The key sent.
        timeout (float): Seconds per request (a call's deadline may cut it shorter).

    Returns:
        openai.OpenAI: The client every assistant with this configuration uses.
    """
    key = (base_url, api_key, float(timeout))
    with _SDKS_LOCK:
        sdk = _SDKS.get(key)
        if sdk is None:
            import openai

            sdk = _SDKS[key] = openai.OpenAI(base_url=base_url, api_key=api_key,
                                             timeout=float(timeout), max_retries=0)
        return sdk
