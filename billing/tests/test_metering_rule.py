"""The integration rule of docs/billing.md, with the exact numbers each case must give."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from billing import dcgm
from billing.metering import (
    Gap,
    Holding,
    Integrator,
    LateSample,
    LedgerKey,
    PodLifecycle,
    Sample,
    Unseen,
    mig_fraction,
    samples_from_exposition,
    split_shares,
    utilisation,
)

GPU = dcgm.DeviceKey("node-a", "GPU-1", None)
H100: tuple[str, str | None] = ("NVIDIA H100 80GB HBM3", None)
A = Holding("team-a", "train-1")
B = Holding("team-b", "serve-1")
IDLE = ("", "")


def s(t: float, *holders: Holding, util: float | None = None, energy: float | None = None) -> Sample:
    return Sample(t, tuple(holders), util=util, energy_mj=energy, gpu_class=H100)


def run(*samples: Sample, integrator: Integrator | None = None, device=GPU) -> Integrator:
    integrator = integrator or Integrator(max_gap=60.0)
    for sample in samples:
        integrator.ingest(device, sample)
    return integrator


def by_pod(integrator: Integrator, measure: str = "gpu_seconds") -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = defaultdict(float)
    for key, usage in integrator.ledger.items():
        out[(key.namespace, key.pod)] += getattr(usage, measure)
    return dict(out)


def test_a_pod_seen_in_n_samples_with_samples_around_it_holds_n_intervals():
    integrator = run(s(0), s(30, A), s(60, A), s(90, A), s(120))
    assert by_pod(integrator) == {("team-a", "train-1"): 90.0, IDLE: 30.0}


def test_the_first_half_goes_to_the_earlier_holder_and_the_second_to_the_later():
    assert by_pod(run(s(0, A), s(30, B))) == {("team-a", "train-1"): 15.0, ("team-b", "serve-1"): 15.0}


def test_idle_time_is_kept_as_platform_time_not_dropped():
    assert by_pod(run(s(0), s(30), s(60))) == {IDLE: 60.0}


def test_a_duplicate_sample_adds_nothing_and_is_counted():
    once = run(s(0, A), s(30, A))
    twice = run(s(0, A), s(30, A), s(30, A), s(30, B))
    assert by_pod(twice) == by_pod(once) == {("team-a", "train-1"): 30.0}
    assert (twice.duplicates, twice.accepted) == (2, 2)


def test_a_late_sample_is_rejected_counted_and_not_integrated_twice():
    integrator = run(s(0, A), s(30, A), s(60, A), s(45, B))
    assert by_pod(integrator) == {("team-a", "train-1"): 60.0}
    assert integrator.late == [LateSample(GPU, 45, 60)]


def test_an_interval_longer_than_max_gap_is_not_billed_and_is_recorded():
    integrator = run(s(0, A), s(30, A), s(121, A), s(151, A))
    assert by_pod(integrator) == {("team-a", "train-1"): 60.0}
    assert integrator.gaps == [Gap(GPU, 30, 121)]


def test_an_interval_of_exactly_max_gap_is_billed():
    assert by_pod(run(s(0, A), s(60, A))) == {("team-a", "train-1"): 60.0}


def test_utilisation_weights_each_half_by_its_own_sample():
    integrator = run(s(0, A, util=0.5), s(30, A, util=1.0), s(60, A, util=None))
    # 15 s x 0.5 + 15 s x 1.0 + 15 s x 1.0 + 15 s x nothing measured
    assert by_pod(integrator, "util_gpu_seconds") == {("team-a", "train-1"): 37.5}


def test_energy_comes_from_the_counter_and_follows_the_holder():
    integrator = run(s(0, A, energy=1_000_000), s(30, B, energy=4_000_000))
    assert by_pod(integrator, "joules") == {("team-a", "train-1"): 1500.0, ("team-b", "serve-1"): 1500.0}


def test_a_counter_that_goes_down_was_reset_and_counts_from_zero():
    integrator = run(s(0, A, energy=9_000_000), s(30, A, energy=2_000_000), s(60, A, energy=5_000_000))
    assert by_pod(integrator, "joules") == {("team-a", "train-1"): 2000.0 + 3000.0}


def test_missing_energy_readings_bill_no_energy():
    assert by_pod(run(s(0, A, energy=None), s(30, A, energy=5_000_000)), "joules") == {
        ("team-a", "train-1"): 0.0
    }


def test_an_interval_crossing_the_hour_is_split_exactly_between_hour_buckets():
    integrator = run(s(3585, A, util=1.0, energy=0), s(3615, A, util=1.0, energy=3_000_000))
    cells = {key.hour: usage for key, usage in integrator.ledger.items()}
    assert sorted(cells) == [0, 3600]
    assert (cells[0].gpu_seconds, cells[0].util_gpu_seconds, cells[0].joules) == (15.0, 15.0, 1500.0)
    assert (cells[3600].gpu_seconds, cells[3600].util_gpu_seconds, cells[3600].joules) == (15.0, 15.0, 1500.0)


def test_a_holder_change_across_the_hour_splits_at_the_middle_then_at_the_hour():
    integrator = run(s(3590, A), s(3620, B))
    cells = {(key.pod, key.hour): usage.gpu_seconds for key, usage in integrator.ledger.items()}
    assert cells == {("train-1", 0): 10.0, ("train-1", 3600): 5.0, ("serve-1", 3600): 15.0}


def test_holders_of_a_shared_gpu_split_it_equally_when_no_fraction_is_known():
    integrator = run(s(0, A, B, energy=0), s(30, A, B, energy=6_000_000))
    assert by_pod(integrator) == {("team-a", "train-1"): 15.0, ("team-b", "serve-1"): 15.0}
    assert by_pod(integrator, "joules") == {("team-a", "train-1"): 3000.0, ("team-b", "serve-1"): 3000.0}


def test_holders_of_a_shared_gpu_split_it_by_fraction_and_the_rest_is_idle():
    a, b = Holding("team-a", "train-1", 0.25), Holding("team-b", "serve-1", 0.5)
    integrator = run(s(0, a, b), s(40, a, b))
    assert by_pod(integrator) == {("team-a", "train-1"): 10.0, ("team-b", "serve-1"): 20.0, IDLE: 10.0}


def test_split_shares_scales_down_fractions_over_one_and_gives_the_rest_to_unknowns():
    assert split_shares([Holding("a", "1", 0.75), Holding("b", "2", 0.75)]) == [0.5, 0.5]
    assert split_shares([Holding("a", "1", 0.5), Holding("b", "2"), Holding("c", "3")]) == [0.5, 0.25, 0.25]
    assert split_shares([]) == []


def test_a_known_start_replaces_the_half_interval_edge():
    lifecycle = {("team-a", "train-1"): PodLifecycle(start=22)}
    integrator = run(s(0), s(30, A), s(60, A), integrator=Integrator(lifecycle=lifecycle))
    assert by_pod(integrator) == {("team-a", "train-1"): 38.0, IDLE: 22.0}


def test_a_known_finish_replaces_the_half_interval_edge():
    lifecycle = {("team-a", "train-1"): PodLifecycle(start=0, finish=33)}
    integrator = run(s(0, A), s(30, A), s(60), integrator=Integrator(lifecycle=lifecycle))
    assert by_pod(integrator) == {("team-a", "train-1"): 33.0, IDLE: 27.0}


def test_known_edges_of_a_handover_never_bill_the_gpu_twice():
    # A finished at 50 (after the middle, 45); B's start is unknown, so from 45 to 50 both
    # may have held it: they share it, and the GPU-seconds still add up to the interval.
    lifecycle = {("team-a", "train-1"): PodLifecycle(finish=50)}
    integrator = run(s(30, A), s(60, B), integrator=Integrator(lifecycle=lifecycle))
    assert by_pod(integrator) == {("team-a", "train-1"): 17.5, ("team-b", "serve-1"): 12.5}


def test_a_known_edge_outside_the_interval_is_kept_inside_it():
    lifecycle = {("team-b", "serve-1"): PodLifecycle(start=-100)}
    integrator = run(s(0, A), s(30, B), integrator=Integrator(lifecycle=lifecycle))
    assert by_pod(integrator) == {("team-a", "train-1"): 7.5, ("team-b", "serve-1"): 22.5}


def test_a_device_s_first_sample_bills_nothing():
    integrator = run(s(100, A))
    assert integrator.ledger == {}
    assert integrator.accepted == 1


def test_state_survives_a_json_round_trip_and_the_next_round_continues_from_it():
    first = run(s(0, Holding("team-a", "train-1", 0.5), util=0.5, energy=10.0))
    state = json.loads(json.dumps(first.state()))
    second = run(s(30, A, util=1.0, energy=30_010.0), integrator=Integrator.from_state(state))
    assert second.last == first.last | {GPU: s(30, A, util=1.0, energy=30_010.0)}
    assert by_pod(second) == {("team-a", "train-1"): 22.5, IDLE: 7.5}
    assert by_pod(second, "joules")[("team-a", "train-1")] == pytest.approx(7.5 + 15.0)


def test_from_state_refuses_an_unknown_state_version():
    with pytest.raises(ValueError, match="version"):
        Integrator.from_state({"version": 99, "devices": []})


def test_drain_hands_over_the_contributions_and_keeps_the_state():
    integrator = run(s(0, A), s(30, A), s(20, A), s(30, A))
    out = integrator.drain()
    assert (len(out.ledger), out.duplicates, len(out.late), out.accepted) == (1, 1, 1, 2)
    assert (integrator.ledger, integrator.late, integrator.duplicates) == ({}, [], 0)
    assert integrator.last[GPU].t == 30


# --- from a parsed exposition to samples ---------------------------------------------------------------

_H100_LABELS = 'gpu="0",UUID="GPU-1",modelName="NVIDIA H100 80GB HBM3",hostname="n"'
MIG_ROUND = "\n".join(
    [
        f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{_H100_LABELS}}} 70000",
        f"DCGM_FI_DEV_GPU_UTIL{{{_H100_LABELS}}} 9223372036854775794",
        f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{_H100_LABELS},GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",'
        'namespace="team-a",pod="train-1"} 0.5',
        f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{_H100_LABELS},GPU_I_PROFILE="1g.10gb",GPU_I_ID="9",'
        'namespace="",pod=""} 0',
        "",
    ]
)


def test_mig_instances_are_the_billable_devices_and_share_the_parent_energy_by_slices():
    samples = dict(samples_from_exposition(dcgm.parse(MIG_ROUND), 30.0))

    big, small = dcgm.DeviceKey("n", "GPU-1", "1"), dcgm.DeviceKey("n", "GPU-1", "9")
    assert set(samples) == {big, small}
    assert samples[big].holders == (Holding("team-a", "train-1"),)
    assert samples[big].gpu_class == ("NVIDIA H100 80GB HBM3", "3g.40gb")
    assert (samples[big].energy_mj, samples[big].energy_fraction) == (70000.0, 3 / 7)
    assert (samples[small].holders, samples[small].energy_fraction) == ((), 1 / 7)


def test_a_mig_instance_bills_its_slice_of_the_parent_energy_in_its_own_gpu_class():
    integrator = Integrator(max_gap=60.0)
    integrator.ingest_round(samples_from_exposition(dcgm.parse(MIG_ROUND.replace("70000", "0")), 0.0))
    integrator.ingest_round(samples_from_exposition(dcgm.parse(MIG_ROUND), 30.0))
    cells = {(k.pod, k.gpu_class[1]): u for k, u in integrator.ledger.items()}
    assert cells[("train-1", "3g.40gb")].gpu_seconds == 30.0
    assert cells[("train-1", "3g.40gb")].util_gpu_seconds == 15.0
    assert cells[("train-1", "3g.40gb")].joules == pytest.approx(70.0 * 3 / 7)
    assert cells[("", "1g.10gb")].joules == pytest.approx(70.0 / 7)


def test_mig_fraction_reads_the_compute_slices_of_the_profile():
    assert mig_fraction("NVIDIA H100 80GB HBM3", "1g.10gb") == 1 / 7
    assert mig_fraction("NVIDIA A100-SXM4-80GB", "7g.80gb") == 1.0
    assert mig_fraction("NVIDIA A30", "2g.12gb") == 0.5
    assert mig_fraction("NVIDIA H100 80GB HBM3", "unknown") == 0.0


def test_known_fractions_of_time_sliced_pods_come_through_to_the_holdings():
    text = (
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-1",hostname="n",namespace="a",pod="p1"} 50\n'
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-1",hostname="n",namespace="b",pod="p2"} 50\n'
    )
    [(_, sample)] = samples_from_exposition(dcgm.parse(text), 0.0, fractions={("a", "p1"): 0.75})
    assert sample.holders == (Holding("a", "p1", 0.75), Holding("b", "p2", None))
    assert sample.util == 0.5


def test_utilisation_prefers_gr_engine_active_over_gpu_util():
    record = dcgm.DeviceRecord(GPU, "m", "0", None)
    record.values[0] = 80.0
    assert utilisation(record) == 0.8
    record.values[1] = 0.25
    assert utilisation(record) == 0.25
    record.values[1] = 1.5
    assert utilisation(record) == 1.0


def test_ledger_keys_carry_device_class_and_hour():
    integrator = run(s(0, A), s(30, A))
    assert list(integrator.ledger) == [LedgerKey("team-a", "train-1", GPU, H100, 0)]


def test_a_pod_that_lived_between_two_samples_is_billed_its_lifetime_from_the_cluster():
    """Rule 3b: in neither sample, on a GPU idle at both, the cluster's word bills it 10 s of 30."""
    unseen = {"GPU-1": [Unseen("team-a", "train-1", 5, 15)]}
    integrator = run(s(0), s(30), integrator=Integrator(max_gap=60.0, unseen=unseen))
    assert by_pod(integrator) == {("team-a", "train-1"): 10.0, IDLE: 20.0}


def test_an_unseen_pod_never_takes_a_share_of_a_gpu_dcgm_saw_held():
    """The cluster may have guessed the GPU: where DCGM saw a holder at either end, the samples decide."""
    unseen = {"GPU-1": [Unseen("team-b", "serve-1", 5, 15)]}
    integrator = run(s(0, A), s(30), integrator=Integrator(max_gap=60.0, unseen=unseen))
    assert by_pod(integrator) == {("team-a", "train-1"): 15.0, IDLE: 15.0}


def test_an_unseen_pod_reaching_past_either_sample_is_left_to_the_samples():
    unseen = {"GPU-1": [Unseen("team-a", "train-1", 25, 35)]}
    integrator = run(s(0), s(30), s(60), integrator=Integrator(max_gap=60.0, unseen=unseen))
    assert by_pod(integrator) == {IDLE: 60.0}


def test_a_replayed_round_bills_an_unseen_pod_once():
    unseen = {"GPU-1": [Unseen("team-a", "train-1", 5, 15)]}
    integrator = Integrator(max_gap=60.0, unseen=unseen)
    run(s(0), s(30), s(30), s(0), integrator=integrator)
    assert by_pod(integrator) == {("team-a", "train-1"): 10.0, IDLE: 20.0}


MIG = dcgm.DeviceKey("node-a", "GPU-1", "3")
MIG_1G: tuple[str, str | None] = ("NVIDIA H100 80GB HBM3", "1g.10gb")


def on_mig(t: float, *holders: Holding, profile: tuple[str, str | None] = MIG_1G) -> Sample:
    return Sample(t, tuple(holders), util=None, gpu_class=profile)


def test_a_pod_that_lived_between_two_samples_on_an_idle_mig_instance_is_billed_its_lifetime():
    unseen = {"GPU-1": [Unseen("team-a", "train-1", 5, 15, gpu_instance="3", mig_profile="1g.10gb")]}
    integrator = Integrator(max_gap=60.0, unseen=unseen)
    run(on_mig(0), on_mig(30), integrator=integrator, device=MIG)
    assert by_pod(integrator) == {("team-a", "train-1"): 10.0, IDLE: 20.0}
    assert {key.device for key in integrator.ledger} == {MIG}


def test_an_unseen_mig_pod_is_billed_on_its_own_instance_only():
    """Keyed by GPU UUID and GPU_I_ID: neither the whole GPU nor a sibling instance takes it."""
    unseen = {"GPU-1": [Unseen("team-a", "train-1", 5, 15, gpu_instance="5", mig_profile="1g.10gb")]}
    integrator = Integrator(max_gap=60.0, unseen=unseen)
    run(on_mig(0), on_mig(30), integrator=integrator, device=MIG)
    run(s(0), s(30), integrator=integrator)
    assert by_pod(integrator) == {IDLE: 60.0}


def test_an_unseen_mig_pod_is_not_billed_on_an_instance_dcgm_saw_held_or_of_another_profile():
    unseen = {"GPU-1": [Unseen("team-b", "serve-1", 5, 15, gpu_instance="3", mig_profile="1g.10gb")]}
    held = run(on_mig(0, A), on_mig(30), integrator=Integrator(max_gap=60.0, unseen=unseen), device=MIG)
    assert by_pod(held) == {("team-a", "train-1"): 15.0, IDLE: 15.0}
    other = ("NVIDIA H100 80GB HBM3", "2g.20gb")
    wrong = Integrator(max_gap=60.0, unseen=unseen)
    run(on_mig(0, profile=other), on_mig(30, profile=other), integrator=wrong, device=MIG)
    assert by_pod(wrong) == {IDLE: 30.0}


def test_an_unseen_share_takes_only_the_idle_part_of_a_gpu_its_declared_holders_leave():
    """A holds ½ of a time-sliced GPU at both samples; a pod of ¼ lived 5-15 s between them: it is billed
    10 × ¼, A keeps its 30 × ½, and the GPU bills 30 s in all."""
    half = Holding("team-a", "train-1", 0.5)
    unseen = {"GPU-1": [Unseen("team-b", "serve-1", 5, 15, 0.25)]}
    integrator = run(s(0, half), s(30, half), integrator=Integrator(max_gap=60.0, unseen=unseen))
    billed = by_pod(integrator)
    assert billed == {("team-a", "train-1"): 15.0, ("team-b", "serve-1"): 2.5, IDLE: 12.5}
    assert sum(billed.values()) == 30.0


def test_two_unseen_shares_beside_a_holder_are_billed_while_their_fractions_fit():
    half = Holding("team-a", "train-1", 0.5)
    unseen = {
        "GPU-1": [
            Unseen("team-b", "serve-1", 2, 12, 0.25),
            Unseen("team-b", "serve-2", 6, 16, 0.25),  # overlaps serve-1: ½ + ¼ + ¼ = the whole GPU
            Unseen("team-c", "probe", 20, 28, 0.5),  # alone in its time, but ½ + ½ is the whole GPU too
        ]
    }
    integrator = run(s(0, half), s(30, half), integrator=Integrator(max_gap=60.0, unseen=unseen))
    billed = by_pod(integrator)
    assert billed[("team-a", "train-1")] == 15.0
    assert billed[("team-b", "serve-1")] == billed[("team-b", "serve-2")] == 2.5
    assert billed[("team-c", "probe")] == 4.0
    assert sum(billed.values()) == pytest.approx(30.0)


def test_an_unseen_share_that_does_not_fit_beside_the_holders_is_not_billed():
    """¾ declared by the holders leaves ¼: a ½ share cannot have run there as declared, so it is not billed
    (guessing its part would change what a pod DCGM saw is billed)."""
    held = Holding("team-a", "train-1", 0.75)
    unseen = {"GPU-1": [Unseen("team-b", "serve-1", 5, 15, 0.5)]}
    integrator = run(s(0, held), s(30, held), integrator=Integrator(max_gap=60.0, unseen=unseen))
    assert by_pod(integrator) == {("team-a", "train-1"): 22.5, IDLE: 7.5}


def test_an_unseen_share_beside_a_holder_without_a_declared_fraction_is_not_billed():
    """An undeclared holder takes an equal part of whatever is left: any newcomer would shrink it."""
    unseen = {"GPU-1": [Unseen("team-b", "serve-1", 5, 15, 0.25)]}
    quarter = Holding("team-c", "probe", 0.25)
    integrator = run(s(0, A, quarter), s(30, A, quarter), integrator=Integrator(max_gap=60.0, unseen=unseen))
    assert by_pod(integrator) == {("team-a", "train-1"): 22.5, ("team-c", "probe"): 7.5}


def test_a_replayed_round_bills_an_unseen_share_beside_a_holder_once():
    half = Holding("team-a", "train-1", 0.5)
    unseen = {"GPU-1": [Unseen("team-b", "serve-1", 5, 15, 0.25)]}
    integrator = Integrator(max_gap=60.0, unseen=unseen)
    run(s(0, half), s(30, half), s(30, half), s(0, half), integrator=integrator)
    assert by_pod(integrator)[("team-b", "serve-1")] == 2.5
