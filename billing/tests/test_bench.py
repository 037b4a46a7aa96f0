"""The fleet-round benchmark runs end to end on a small fleet and reports what it measured."""

from __future__ import annotations

import json

from benchmarks.metering.__main__ import GPUS_PER_NODE, fleet_round, load_families, main
from billing import dcgm


def test_the_generated_round_has_the_exporter_s_25_default_families_per_whole_gpu():
    families = load_families()
    data, series = fleet_round(gpus=16, mig_share=0.0)
    assert len(families) == 25
    assert series == 16 * 25
    assert data.count(b"\n# TYPE ") + data.startswith(b"# TYPE ") == 25 * 16 // GPUS_PER_NODE
    assert len(dcgm.parse(data).devices) == 16


def test_the_benchmark_prints_a_json_report_with_the_prometheus_client_ratio(capsys):
    assert (
        main(
            ["ingest", "--gpus", "16", "--mig-share", "0.5", "--rounds", "1", "--prom-rounds", "1", "--json"]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["gpus"] == 16
    assert report["billable_devices"] > 16  # MIG instances replace half the GPUs
    assert set(report["median_cpu_s"]) >= {"split", "parse", "parse_attribute", "prometheus_client"}
    assert report["ratio_prometheus_client_over_parse"] > 2
