"""The GPU catalog as plain data: models, their MIG profiles, and the GPU classes they give.

No Django import: the placement engine, the DCGM parser and the renderers read it too. The `GpuModel` and
`GpuClass` tables are synced from here by a data migration, so the database always matches this file.

MIG geometry: every MIG-capable GPU here has 7 compute slices and 8 memory slices. Profile names, slice
counts and maximum instances per GPU follow NVIDIA's MIG user guide and mig-parted's default config
(shared/reference/kubernetes-objects.md §5.3).
"""

from __future__ import annotations

from dataclasses import dataclass

COMPUTE_SLICES = 7
MEMORY_SLICES = 8


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. "1g.18gb"
    compute_slices: int
    memory_slices: int
    memory_gb: int
    max_count: int


@dataclass(frozen=True)
class GpuModelSpec:
    slug: str  # canonical whole-GPU class name, e.g. "h200-141gb"
    display_name: str
    memory_gb: int
    product_label: str  # nvidia.com/gpu.product as GPU feature discovery writes it
    dcgm_model_names: tuple[str, ...]  # modelName values dcgm-exporter reports for this model
    mig_profiles: tuple[MigProfile, ...] = ()

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)


def _mig_family(mem: tuple[int, int, int, int, int, int]) -> tuple[MigProfile, ...]:
    """The six standard profiles of a 7-slice GPU, given their memory sizes in GB."""
    one, one_double, two, three, four, seven = mem
    return (
        MigProfile(f"1g.{one}gb", 1, 1, one, 7),
        MigProfile(f"1g.{one_double}gb", 1, 2, one_double, 4),
        MigProfile(f"2g.{two}gb", 2, 2, two, 3),
        MigProfile(f"3g.{three}gb", 3, 4, three, 2),
        MigProfile(f"4g.{four}gb", 4, 4, four, 1),
        MigProfile(f"7g.{seven}gb", 7, 8, seven, 1),
    )


GPU_MODELS: tuple[GpuModelSpec, ...] = (
    GpuModelSpec(
        "h100-80gb",
        "NVIDIA H100 80GB",
        80,
        "NVIDIA-H100-80GB-HBM3",
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100"),
        _mig_family((10, 20, 20, 40, 40, 80)),
    ),
    GpuModelSpec(
        "h200-141gb",
        "NVIDIA H200 141GB",
        141,
        "NVIDIA-H200",
        ("NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA H200 141GB HBM3e"),
        _mig_family((18, 35, 35, 71, 71, 141)),
    ),
    GpuModelSpec(
        "a100-80gb",
        "NVIDIA A100 80GB",
        80,
        "NVIDIA-A100-SXM4-80GB",
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB"),
        _mig_family((10, 20, 20, 40, 40, 80)),
    ),
    GpuModelSpec(
        "b200-180gb",
        "NVIDIA B200",
        180,
        "NVIDIA-B200",
        ("NVIDIA B200",),
        _mig_family((23, 45, 45, 90, 90, 180)),
    ),
    GpuModelSpec("l40s-48gb", "NVIDIA L40S", 48, "NVIDIA-L40S", ("NVIDIA L40S",)),
)

WHOLE, MIG, SHARED, FRACTION = "whole", "mig", "shared", "fraction"
# HAMi fractional classes: `<model>.hami-<percent>` is that percentage of one GPU's memory and compute,
# served by HAMi's device plugin and scheduler (reference/kubernetes-objects.md §4) where a cluster runs it.
HAMI_PERCENTS = (50, 25)
HAMI_RESOURCE = "nvidia.com/gpu"  # HAMi counts vGPUs in it; memory and cores in the two below
HAMI_MEMORY, HAMI_CORES = "nvidia.com/gpumem", "nvidia.com/gpucores"


@dataclass(frozen=True)
class GpuClassSpec:
    """A unit quotas and prices are written in."""

    name: str
    kind: str  # whole | mig | shared
    model: str  # GpuModelSpec.slug
    resource_name: str  # Kubernetes extended resource the device plugin advertises
    mig_profile: str = ""


def classes_of(model: GpuModelSpec) -> list[GpuClassSpec]:
    mig = [
        GpuClassSpec(
            f"{model.slug}.mig-{profile.name}",
            MIG,
            model.slug,
            f"nvidia.com/mig-{profile.name}",
            profile.name,
        )
        for profile in model.mig_profiles
    ]
    hami = [
        GpuClassSpec(f"{model.slug}.hami-{percent}", FRACTION, model.slug, HAMI_RESOURCE)
        for percent in HAMI_PERCENTS
    ]
    return [
        GpuClassSpec(model.slug, WHOLE, model.slug, "nvidia.com/gpu"),
        *mig,
        GpuClassSpec(f"{model.slug}.shared", SHARED, model.slug, "nvidia.com/gpu.shared"),
        *hami,
    ]


def hami_percent(gpu_class: str) -> int:
    """The share of a GPU a HAMi class declares, in percent (`h200-141gb.hami-25` → 25); 0 for others."""
    _, _, rest = gpu_class.partition(".")
    suffix = rest.removeprefix("hami-")
    return int(suffix) if rest.startswith("hami-") and suffix.isdigit() else 0


def hami_resources(model: GpuModelSpec, percent: int) -> dict[str, int]:
    """What one unit of a HAMi class asks HAMi for: one vGPU, its memory in MiB and its cores in percent."""
    return {HAMI_RESOURCE: 1, HAMI_MEMORY: model.memory_gb * 1024 * percent // 100, HAMI_CORES: percent}


def all_classes() -> list[GpuClassSpec]:
    return [gpu_class for model in GPU_MODELS for gpu_class in classes_of(model)]


def model_by_slug(slug: str) -> GpuModelSpec | None:
    return next((model for model in GPU_MODELS if model.slug == slug), None)


def model_for_product(product: str) -> GpuModelSpec | None:
    """The catalog model a node's `nvidia.com/gpu.product` label names (`NVIDIA-H200`, `NVIDIA-H200-SXM`…)."""
    wanted = product.lower().replace(" ", "-")
    for model in GPU_MODELS:
        label = model.product_label.lower()
        if wanted == label or wanted.startswith(label + "-"):
            return model
    return None


def resource_names_of(model: GpuModelSpec, *, hami: bool) -> set[str]:
    """Every resource name a pod can ask for a GPU of this model by: whole, shared, each MIG profile, and
    HAMi's vGPU, memory and cores where HAMi serves it."""
    names = {c.resource_name for c in classes_of(model) if c.kind != FRACTION or hami}
    return names | ({HAMI_MEMORY, HAMI_CORES} if hami else set())


def model_for_dcgm_name(model_name: str) -> GpuModelSpec | None:
    """The catalog model a dcgm-exporter `modelName` label names, ignoring case and spacing."""
    wanted = " ".join(model_name.split()).lower()
    for model in GPU_MODELS:
        if any(wanted == name.lower() for name in model.dcgm_model_names):
            return model
    return None
