"""Reading dcgm-exporter's health fields from an exposition (labels as the real exporter writes them, with
the XID's err_code and err_msg, a MIG row, a DCGM blank, a row without UUID and garbled lines)."""

from pathlib import Path

from billing.dcgm_health import read

EXPOSITION = (Path(__file__).parent / "fixtures" / "health-fields.prom").read_text()


def test_it_reads_the_health_fields_of_each_gpu_by_uuid():
    assert read(EXPOSITION) == {
        "GPU-a": {"DCGM_FI_DEV_XID_ERRORS": 79.0, "DCGM_FI_DEV_ROW_REMAP_FAILURE": 1.0},
        "GPU-b": {"DCGM_FI_DEV_XID_ERRORS": 48.0},  # a MIG row carries its parent's UUID: the larger value
    }


def test_blank_values_rows_without_a_uuid_and_garbled_lines_are_left_out():
    found = read(EXPOSITION.encode())
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" not in found["GPU-a"]  # DCGM's blank
    assert set(found) == {"GPU-a", "GPU-b"}


def test_an_exposition_without_health_fields_reads_as_nothing():
    assert read('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a"} 80\n') == {}
