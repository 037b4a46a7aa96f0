# Shared fixtures live in tests/fixtures.py so every app's tests can use them.
pytest_plugins = ["tests.fixtures", "tests.sso", "tests.browser"]
