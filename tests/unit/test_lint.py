"""`make test` lints before it tests: ruff and mypy with the project's settings, and a finding stops it."""

from __future__ import annotations

import subprocess

from lineage_assets.settings import PROJECT_ROOT


def make(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", *arguments], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)


def test_the_test_command_runs_ruff_and_mypy_before_the_suite():
    commands = make("-n", "test").stdout.splitlines()
    lint = [
        n
        for n, line in enumerate(commands)
        if any(tool in line for tool in ("ruff check", "ruff format --check", "mypy"))
    ]
    suite = [n for n, line in enumerate(commands) if "pytest" in line]
    assert len(lint) == 3 and suite and max(lint) < min(suite), commands


def test_a_finding_fails_the_lint_with_its_place(tmp_path):
    source = tmp_path / "too_long.py"
    source.write_text(f'NAME = "{"a" * 120}"\n')  # 131 characters: over the project's 120
    result = make("lint", f"LINT_PATHS={source}")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"{source}:1:121" in output and "E501" in output, output
