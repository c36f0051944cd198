"""
A smoke-size run of `bench.inspector_page` (200 entries, one run): the inspector's browser test
runs through in a fresh pytest process and the bench reads the timings it recorded.
"""

import json

import pytest
from test_e2e_inspector import CHROMEDRIVER, CHROMIUM


@pytest.mark.skipif(not CHROMIUM or not CHROMEDRIVER,
                    reason="Chromium or chromedriver is not installed (.ci/run installs them)")
def test_inspector_page_smoke(tmp_path):
    from bench import inspector_page

    out = tmp_path / "inspector_page.json"
    result = inspector_page.main(["--entries", "200", "--repeat", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == result
    assert result["entries"] == 200 and result["requests"] >= 2
    assert 0 < result["page_kb"] < 300 and result["size_under_300_kb"]
    assert result["made_ms"][0] > 0 and result["again_loaded_ms"][0] > 0
    assert abs(result["made_and_loaded_again_ms_median"]
               - result["made_ms"][0] - result["again_loaded_ms"][0]) <= 1
