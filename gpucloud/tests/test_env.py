import pytest

from gpucloud.env import ConfigError, env_bool, env_int, env_list, env_str


def test_booleans_accept_the_usual_words_and_refuse_the_rest(monkeypatch):
    monkeypatch.setenv("X", "yes")
    assert env_bool("X", False) is True
    monkeypatch.setenv("X", "maybe")
    with pytest.raises(ConfigError, match="X='maybe' is not a boolean"):
        env_bool("X", False)


def test_integers_fail_loudly_and_respect_minimums(monkeypatch):
    monkeypatch.setenv("N", "ten")
    with pytest.raises(ConfigError, match="N='ten' is not an integer"):
        env_int("N", 1)
    monkeypatch.setenv("N", "0")
    with pytest.raises(ConfigError, match="below the minimum of 1"):
        env_int("N", 1, minimum=1)


def test_secrets_are_read_from_file_variables(monkeypatch, tmp_path):
    (tmp_path / "s").write_text("from-file\n")
    monkeypatch.setenv("S_FILE", str(tmp_path / "s"))
    assert env_str("S") == "from-file"
    monkeypatch.setenv("S_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="S_FILE"):
        env_str("S")


def test_lists_split_on_commas(monkeypatch):
    monkeypatch.setenv("L", " a, b,,c ")
    assert env_list("L", []) == ["a", "b", "c"]
