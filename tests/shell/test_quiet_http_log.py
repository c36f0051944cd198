"""
A quiet server log: no line per model request from whatever HTTP library the installed openai
logs through (openai 3.x: `httpx2`), unless `llm.log_requests` is on (issue 34).
"""

import logging

import support
from scripted_llm import Reply, sync_runner
from twisted.internet import task

from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.llm_resilience import http_logger_names, quiet_http_logs


def _fresh_loggers():
    """Every HTTP logger back at NOTSET, as in a server that has not configured them."""
    for name in http_logger_names():
        logging.getLogger(name).setLevel(logging.NOTSET)


def _request_lines(caplog):
    return [record for record in caplog.records
            if record.levelno < logging.WARNING and "HTTP Request" in record.getMessage()]


def test_a_real_call_through_the_installed_openai_logs_no_request_line(llm_server, llm_config,
                                                                       caplog):
    _fresh_loggers()
    llm_server.script(Reply.text("hi"), Reply.text("hi"))
    with caplog.at_level(logging.DEBUG):
        quiet = LLMClient(llm_config, runner=sync_runner, clock=task.Clock())
        assert support.result_of(quiet.complete([{"role": "user", "content": "hi"}]))
        assert _request_lines(caplog) == []
        # the same call with log_requests on does write the line: the check above can fail
        loud = LLMClient({**llm_config, "log_requests": True}, runner=sync_runner,
                         clock=task.Clock())
        support.result_of(loud.complete([{"role": "user", "content": "hi"}]))
        logged = _request_lines(caplog)
    assert logged and "chat/completions" in logged[0].getMessage()
    # whichever library wrote it is among the loggers the quieting names
    assert logged[0].name.split(".")[0] in http_logger_names()
    _fresh_loggers()
    quiet_http_logs()  # as a fresh client leaves them


def test_the_http_loggers_are_found_from_the_installed_packages():
    import openai  # noqa: F401  (registers its HTTP library's loggers)

    names = http_logger_names()
    assert "openai" in names
    # the HTTP library the installed openai depends on, whatever its name
    from importlib import metadata

    required = {r.split("<")[0].split(">")[0].split("=")[0].split(";")[0].strip().lower()
                for r in metadata.requires("openai") if "extra ==" not in r}
    http_library = {name for name in required if name.startswith("httpx")}
    assert http_library and http_library <= set(names)


def test_the_http_loggers_are_found_without_scanning_every_installed_package(monkeypatch):
    """Scanning every package cost the first reply after each start 0.3 s of CPU (issue 34):
    only the client's own dependencies are read."""
    from importlib import metadata

    from ai_assistant.plumbing import llm_resilience

    def scan_everything():
        raise AssertionError("every installed package was scanned")

    monkeypatch.setattr(metadata, "packages_distributions", scan_everything)
    llm_resilience._dependency_modules.cache_clear()
    try:
        found = llm_resilience._dependency_modules("openai")
    finally:
        llm_resilience._dependency_modules.cache_clear()
    # the client, its HTTP stack and a library without top_level.txt (read from its RECORD)
    assert {"openai", "pydantic", "anyio"} <= found
    assert any(name.startswith("httpx") for name in found)
    assert "__pycache__" not in found and all(name.isidentifier() for name in found)
