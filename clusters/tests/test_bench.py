from benchmarks import kubernetes as bench


def test_the_benchmark_runs_and_its_steady_pass_writes_nothing(capsys, tmp_path):
    output = tmp_path / "bench.md"

    assert bench.main(["--tenants", "6", "--output", str(output)]) == 0

    text = output.read_text()
    assert "| steady |" in capsys.readouterr().out
    steady = next(line for line in text.splitlines() if line.startswith("| steady |"))
    assert steady.split("|")[3].strip() == "0"  # writes
    first = next(line for line in text.splitlines() if line.startswith("| first"))
    assert int(first.split("|")[3]) > 6 * 8  # every tenant's objects were created


def test_benchmark_tenants_have_two_distinct_quotas():
    tenants = bench.make_tenants(30)
    assert all(len({q.gpu_class for q in t.quotas}) == 2 for t in tenants)
    assert {t.trust_tier for t in tenants} == {"isolated", "standard", "trusted"}
