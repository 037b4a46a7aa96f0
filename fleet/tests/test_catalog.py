from fractions import Fraction

from fleet import catalog
from fleet.models import GpuClass


def test_the_catalog_is_in_the_database_with_canonical_class_names(gpu_catalog):
    names = set(GpuClass.objects.values_list("name", flat=True))
    assert {"h100-80gb", "h200-141gb", "a100-80gb", "b200-180gb", "l40s-48gb"} <= names
    assert "h200-141gb.mig-1g.18gb" in names
    assert "h200-141gb.mig-3g.71gb" in names
    assert "a100-80gb.shared" in names
    assert not any(n.startswith("l40s-48gb.mig") for n in names)
    assert len(names) == len(catalog.all_classes())


def test_mig_classes_know_their_resource_and_share_of_a_gpu(gpu_catalog):
    mig = GpuClass.objects.get(name="h200-141gb.mig-3g.71gb")
    assert mig.resource_name == "nvidia.com/mig-3g.71gb"
    assert mig.gpu_fraction == Fraction(3, 7)
    assert mig.units_per_gpu() == 2


def test_every_mig_family_fits_seven_compute_and_eight_memory_slices():
    for model in catalog.GPU_MODELS:
        for profile in model.mig_profiles:
            assert profile.compute_slices * profile.max_count <= catalog.COMPUTE_SLICES
            assert profile.memory_slices * profile.max_count <= catalog.MEMORY_SLICES


def test_dcgm_model_names_find_their_model():
    assert catalog.model_for_dcgm_name("NVIDIA  H200").slug == "h200-141gb"
    assert catalog.model_for_dcgm_name("NVIDIA A100-SXM4-80GB").slug == "a100-80gb"
    assert catalog.model_for_dcgm_name("Tesla T4") is None
