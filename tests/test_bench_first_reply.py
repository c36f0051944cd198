"""
A short run of `bench.first_reply` (one start, one reload, one warm line) so it keeps working:
a real server, the scripted model, Ada answering.
"""

import json


def test_first_reply_smoke(tmp_path):
    from bench import first_reply

    document = first_reply.main(["--starts", "2", "--warm", "1", "--pause", "2",
                                 "--out", str(tmp_path / "first_reply.json")])
    written = json.loads((tmp_path / "first_reply.json").read_text())
    assert written["first_reply_s"] == document["first_reply_s"]
    assert len(document["first_reply_s"]) == 2
    # every line was answered, and the model was asked before the answer came
    for replied, asked in zip(document["first_reply_s"], document["model_asked_after_s"],
                              strict=True):
        assert asked is not None and 0 < asked <= replied
    assert len(document["warm_reply_s"]) == 1 and document["warm_median_s"] > 0
    assert document["server_tracebacks"] == 0 and not document["processes_left_running"]
