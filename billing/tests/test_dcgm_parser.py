"""The DCGM exposition parser on the real dcgm-exporter payload and on the variants seen in the field."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.metering.__main__ import fleet_round
from billing import dcgm
from billing.dcgm import BadLine, DeviceKey, Holder

FIXTURES = Path(__file__).parent / "fixtures"
UUID = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
BASE = (
    f'gpu="0",UUID="{UUID}",pci_bus_id="00000000:53:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3"'
)


def row(family: str, value: str, extra: str = ',hostname="node-a"') -> str:
    return f"{family}{{{BASE}{extra}}} {value}\n"


def only(result: dcgm.ParseResult) -> dcgm.DeviceRecord:
    assert len(result.devices) == 1
    return next(iter(result.devices.values()))


def test_it_reads_the_real_dcgm_exporter_payload():
    result = dcgm.parse((FIXTURES / "datadog-dcgm-serve-metrics.prom").read_text())

    key = DeviceKey("424773df46e0", "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e", None)
    assert list(result.devices) == [key]
    record = result.devices[key]
    assert (record.model, record.gpu_index, record.mig_profile) == ("Tesla T4", "0", None)
    assert record.holders == []
    assert record.values == [0.0, None, 0.0, 128996013.0, 8.969]
    assert (result.lines, result.samples, result.bad_lines) == (70, 4, [])


def test_it_does_not_mistake_fb_used_percent_for_fb_used():
    # The second host of the real payload has only DCGM_FI_DEV_FB_USED_PERCENT.
    text = (FIXTURES / "datadog-dcgm-serve-metrics.prom").read_text()
    assert "DCGM_FI_DEV_FB_USED_PERCENT{" in text
    assert all(key.hostname != "551bdf382151" for key in dcgm.parse(text).devices)


def test_it_reads_pod_labels_of_every_gpu_of_the_synthetic_node():
    result = dcgm.parse((FIXTURES / "synthetic-h100x8-node-podlabels.prom").read_bytes())

    assert len(result.devices) == 8
    assert result.samples == 40
    first = result.devices[DeviceKey("gpu-node-00001", "GPU-2265b1f5-91b7-d8f1-cd61-1027c386bbc4", None)]
    assert first.holders == [Holder("tenant-0008", "job-00001-0-7d9f8", "main")]
    assert first.model == "NVIDIA H100 80GB HBM3"


def test_it_accepts_both_spellings_of_the_hostname_label():
    text = row(dcgm.GPU_UTIL, "10", ',Hostname="old"') + row(dcgm.GPU_UTIL, "10", ',hostname="new"')
    assert {key.hostname for key in dcgm.parse(text).devices} == {"old", "new"}


def test_it_names_the_node_when_the_exporter_dropped_the_hostname():
    result = dcgm.parse(row(dcgm.GPU_UTIL, "10", ""), default_hostname="node-z")
    assert only(result).key.hostname == "node-z"


def test_it_prefers_exported_pod_labels_over_the_exporter_pod_behind_prometheus():
    extra = (
        ',pod="dcgm-exporter-x2",namespace="gpu-operator",exported_pod="train-1",exported_namespace="team-a"'
    )
    assert only(dcgm.parse(row(dcgm.GPU_UTIL, "1", extra))).holders == [Holder("team-a", "train-1", "")]


def test_it_reads_the_old_pod_name_and_pod_namespace_labels():
    extra = ',pod_name="train-2",pod_namespace="team-b",container_name="main"'
    assert only(dcgm.parse(row(dcgm.GPU_UTIL, "1", extra))).holders == [Holder("team-b", "train-2", "main")]


def test_it_reports_no_holder_for_empty_pod_labels():
    extra = ',hostname="n",container="",namespace="",pod=""'
    assert only(dcgm.parse(row(dcgm.GPU_UTIL, "1", extra))).holders == []


def test_it_keys_mig_instances_by_gpu_instance_id_under_the_parent_uuid():
    text = row(dcgm.TOTAL_ENERGY, "5000") + row(
        dcgm.GR_ENGINE_ACTIVE, "0.25", ',GPU_I_PROFILE="1g.10gb",GPU_I_ID="7",hostname="node-a"'
    )
    result = dcgm.parse(text)

    parent = result.devices[DeviceKey("node-a", UUID, None)]
    instance = result.devices[DeviceKey("node-a", UUID, "7")]
    assert (parent.mig_profile, parent.energy_mj) == (None, 5000.0)
    assert (instance.mig_profile, instance.gr_engine_active) == ("1g.10gb", 0.25)


def test_it_treats_dcgm_blank_values_as_missing():
    text = (
        row(dcgm.GPU_UTIL, "9223372036854775794")
        + row(dcgm.POWER_USAGE, "140737488355328.000000")
        + row(dcgm.TOTAL_ENERGY, "140737488355328")
    )
    record = only(result := dcgm.parse(text))
    assert (record.gpu_util, record.power_w) == (None, None)
    assert record.energy_mj == 140737488355328.0  # an int64 counter may legitimately pass 2**47
    assert (result.samples, result.blank_values) == (3, 2)


def test_it_treats_nan_and_infinity_as_missing():
    text = row(dcgm.GPU_UTIL, "NaN") + row(dcgm.POWER_USAGE, "+Inf") + row(dcgm.FB_USED, "-Inf")
    record = only(result := dcgm.parse(text))
    assert record.values == [None] * 5
    assert result.blank_values == 3


def test_it_unescapes_quotes_backslashes_and_newlines_in_label_values():
    extra = r',hostname="n",namespace="team\"a",pod="p\\1\n",container="c}{"'
    assert only(dcgm.parse(row(dcgm.GPU_UTIL, "1", extra))).holders == [Holder('team"a', "p\\1\n", "c}{")]


def test_it_accepts_spaces_and_a_trailing_comma_in_the_label_set():
    text = f'{dcgm.GPU_UTIL}{{ UUID = "{UUID}" , hostname="n", }} 12\n'
    assert only(dcgm.parse(text)).gpu_util == 12.0


def test_it_needs_no_help_or_type_lines_and_skips_them_when_present():
    bare = row(dcgm.GPU_UTIL, "42")
    commented = f"# HELP {dcgm.GPU_UTIL} GPU utilization (in %).\n# TYPE {dcgm.GPU_UTIL} gauge\n" + bare
    assert only(dcgm.parse(bare)).values == only(dcgm.parse(commented)).values


def test_it_reads_an_optional_millisecond_timestamp():
    record = only(dcgm.parse(row(dcgm.GPU_UTIL, "42 1764400000123")))
    assert (record.gpu_util, record.timestamp_ms) == (42.0, 1764400000123)


def test_it_reads_crlf_line_endings_and_a_last_line_without_newline():
    text = row(dcgm.GPU_UTIL, "42").replace("\n", "\r\n") + row(dcgm.FB_USED, "1024").rstrip("\n")
    record = only(result := dcgm.parse(text))
    assert (record.gpu_util, record.fb_used_mib, result.lines) == (42.0, 1024.0, 2)


def test_it_lists_every_pod_of_a_time_sliced_gpu_and_keeps_the_device_values_once():
    text = row(dcgm.GPU_UTIL, "80", ',hostname="n",namespace="a",pod="p1"') + row(
        dcgm.GPU_UTIL, "80", ',hostname="n",namespace="b",pod="p2"'
    )
    record = only(dcgm.parse(text))
    assert record.holders == [Holder("a", "p1", ""), Holder("b", "p2", "")]
    assert record.gpu_util == 80.0


def test_it_reports_garbled_lines_by_number_and_keeps_the_valid_ones():
    text = "".join(
        [
            row(dcgm.GPU_UTIL, "10"),  # 1
            f"{dcgm.FB_USED}{{{BASE},hostn\n",  # 2: truncated inside the label set
            row(dcgm.POWER_USAGE, ""),  # 3: no value
            row(dcgm.TOTAL_ENERGY, "12x"),  # 4: not a number
            "# a comment\n",  # 5
            # 6: two lines run together
            f'{dcgm.GR_ENGINE_ACTIVE}{{gpu="0",UUIDDCGM_FI_DEV_SM_CLOCK{{gpu="1"}} 5\n',
            f'{dcgm.GR_ENGINE_ACTIVE}{{gpu="0",hostname="n"}} 0.5\n',  # 7: no UUID
            row(dcgm.FB_USED, "2048"),  # 8
            row(dcgm.POWER_USAGE, "1 2 3"),  # 9: junk after the timestamp
            dcgm.TOTAL_ENERGY[:20],  # 10: cut inside the name: not a wanted family any more
        ]
    )
    result = dcgm.parse(text)

    assert [bad.lineno for bad in result.bad_lines] == [2, 3, 4, 6, 7, 9]
    assert result.bad_lines[4] == BadLine(7, f"{dcgm.GR_ENGINE_ACTIVE}: no UUID label")
    assert not result.ok
    record = only(result)
    assert (record.gpu_util, record.fb_used_mib, record.power_w) == (10.0, 2048.0, None)
    assert result.samples == 2


def test_it_reads_a_wanted_family_on_the_first_line_and_numbers_a_bad_one_as_line_1():
    good = dcgm.parse(row(dcgm.GPU_UTIL, "7"))
    bad = dcgm.parse(row(dcgm.GPU_UTIL, "seven") + row(dcgm.GPU_UTIL, "eight"))
    assert only(good).gpu_util == 7.0
    assert [b.lineno for b in bad.bad_lines] == [1, 2]


def test_it_skips_other_families_without_reading_them():
    text = "DCGM_FI_DEV_SM_CLOCK{this is not even labels} x y z\n" + row(dcgm.GPU_UTIL, "5")
    result = dcgm.parse(text)
    assert (result.samples, result.bad_lines, only(result).gpu_util) == (1, [], 5.0)


def test_parse_labels_rejects_what_is_not_a_label_set():
    for text in ['a="1",b', 'a="1"b="2"', 'a="1', '="1"', 'a="1",,b="2"', 'a="x\\"']:
        try:
            dcgm.parse_labels(text)
        except dcgm.LabelError:
            continue
        raise AssertionError(f"accepted {text!r}")
    assert dcgm.parse_labels('a="1",b="",') == {"a": "1", "b": ""}


def test_a_parser_that_remembers_label_sets_gives_the_same_result_round_after_round():
    text = (FIXTURES / "synthetic-h100x8-node-podlabels.prom").read_text()
    moved = text.replace('pod="job-00001-0-7d9f8"', 'pod="job-00001-0-new"')
    parser = dcgm.Parser()
    for round_text in (text, text, moved, text + "garbage\n" + row(dcgm.GPU_UTIL, "x")):
        assert parser.parse(round_text) == dcgm.parse(round_text)


def test_a_remembered_label_set_without_hostname_takes_each_call_s_node_name():
    parser = dcgm.Parser()
    text = row(dcgm.GPU_UTIL, "1", "")
    assert only(parser.parse(text, default_hostname="a")).key.hostname == "a"
    assert only(parser.parse(text, default_hostname="b")).key.hostname == "b"


def test_a_parser_forgets_its_label_sets_when_it_holds_too_many():
    parser = dcgm.Parser(max_label_sets=1)
    parser.parse(row(dcgm.GPU_UTIL, "1") + row(dcgm.GPU_UTIL, "1", ',hostname="node-b"'))
    result = parser.parse(row(dcgm.GPU_UTIL, "2"))
    assert only(result).gpu_util == 2.0
    assert len(parser._identities) == 1


def test_it_agrees_with_prometheus_client_on_every_wanted_sample_of_a_generated_fleet_round():
    data, _ = fleet_round(gpus=64, mig_share=0.5, seed=7)
    text = data.decode()
    ours = dcgm.parse(text)
    checked = 0
    for family in text_string_to_metric_families(text):
        if family.name not in dcgm.FAMILIES:
            continue
        for sample in family.samples:
            labels = sample.labels
            host = labels.get("hostname") or labels["Hostname"]
            record = ours.devices[DeviceKey(host, labels["UUID"], labels.get("GPU_I_ID"))]
            expected = None if sample.value >= dcgm.INT64_BLANK else sample.value
            assert record.values[dcgm.FAMILIES[family.name]] == expected
            checked += 1
    assert checked == ours.samples > 300
