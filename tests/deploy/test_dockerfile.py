"""The Dockerfile: linted (hadolint, checkov), and its package step checked against
packages.apt without a Docker engine, by running that step with apt-get stubbed out."""

from __future__ import annotations

import json
import re
import shlex
import stat
import subprocess
from pathlib import Path

import pytest

from tests.deploy.conftest import DOCKERFILE, PACKAGES_APT, REPO, checkov, run_tool
from tests.deploy.dockerfile_stages import instructions, stages


def apt_packages() -> list[str]:
    """packages.apt as scripts/setup reads it: comment lines dropped, split on whitespace."""
    return [
        word
        for line in PACKAGES_APT.read_text().splitlines()
        if not line.strip().startswith("#")
        for word in line.split()
    ]


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return DOCKERFILE.read_text()


@pytest.fixture(scope="module")
def runtime(dockerfile: str) -> list[tuple[str, str]]:
    return stages(dockerfile)[-1]


def test_hadolint_finds_nothing() -> None:
    result = run_tool("hadolint", "--no-color", str(DOCKERFILE))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_checkov_finds_nothing_in_the_dockerfile() -> None:
    result, report, failed = checkov("dockerfile", "--file", str(DOCKERFILE))
    assert failed == []
    assert report["summary"]["passed"] > 50, "checkov ran no Dockerfile checks"
    assert result.returncode == 0, result.stderr


def test_multi_stage_on_debian_12_with_debians_python(dockerfile: str) -> None:
    """debian:bookworm-slim, which scripts/image can make without a registry, and Debian's
    python3 (3.11), the interpreter the tests run on, from packages.apt."""
    froms = [args for keyword, args in instructions(dockerfile) if keyword == "FROM"]
    assert len(froms) >= 2
    for arguments in froms:
        assert arguments.split()[0] == "debian:bookworm-slim"
    assert "python3" in apt_packages()
    # The runtime stage takes the built environment from the build stage, not a compiler.
    copies = [args for keyword, args in stages(dockerfile)[-1] if keyword == "COPY"]
    assert any(args.startswith("--from=build /opt/airlock") for args in copies)


def test_runtime_stage_installs_no_compiler_and_keeps_no_cache(
    runtime: list[tuple[str, str]],
) -> None:
    runs = "\n".join(args for keyword, args in runtime if keyword == "RUN")
    for forbidden in ("build-essential", "gcc", "g++", "clang", "-dev "):
        assert forbidden not in runs
    assert "rm -rf /var/lib/apt/lists/*" in runs
    assert "apt-get clean" in runs
    assert "--no-install-recommends" in runs
    # pip runs only in the build stage, and is removed from the environment it built.
    assert "pip install" not in runs


def test_runs_as_the_fixed_unprivileged_user(runtime: list[tuple[str, str]]) -> None:
    users = [args for keyword, args in runtime if keyword == "USER"]
    assert users and users[-1] == "10001:10001"
    runs = "\n".join(args for keyword, args in runtime if keyword == "RUN")
    assert "--uid 10001" in runs
    assert "--gid 10001" in runs


def test_working_directory_is_not_writable_scratch(runtime: list[tuple[str, str]]) -> None:
    """`celery -A worker` and `python -c` import from the working directory first."""
    workdir = [args for keyword, args in runtime if keyword == "WORKDIR"][-1]
    assert workdir == "/opt/airlock"
    env = " ".join(args for keyword, args in runtime if keyword == "ENV")
    assert "PYTHONNOUSERSITE=1" in env


def test_one_image_for_every_role(runtime: list[tuple[str, str]]) -> None:
    final = dict(runtime)
    assert json.loads(final["ENTRYPOINT"]) == ["airlock"]
    assert json.loads(final["CMD"]) == ["--help"]
    healthcheck = final["HEALTHCHECK"]
    assert json.loads(healthcheck.split("CMD", 1)[1]) == ["airlock", "doctor"]
    assert "--timeout=" in healthcheck


def test_the_image_installs_packages_apt_and_nothing_else(runtime: list[tuple[str, str]]) -> None:
    runs = [args for keyword, args in runtime if keyword == "RUN" and "packages.apt" in args]
    assert len(runs) == 1, "exactly one RUN step installs the Debian packages"
    assert "grep -v '^\\s*#' /tmp/packages.apt | xargs apt-get install" in runs[0]
    copies = [args for keyword, args in runtime if keyword == "COPY"]
    assert "packages.apt /tmp/packages.apt" in copies
    # scripts/setup reads the same file (plus packages-test.apt for the tests) with the same
    # filter.
    setup = (REPO / "scripts" / "setup").read_text()
    assert "lists=(packages.apt)" in setup
    assert """cat "${lists[@]}" | grep -v '^\\s*#'""" in setup


def _run_install_step(
    runtime: list[tuple[str, str]], tmp_path: Path, ocr_languages: str, ocr_scripts: str = "1"
) -> tuple[int, list[list[str]], str]:
    """Run the image's package step with apt-get and rm replaced by recorders."""
    (step,) = [args for keyword, args in runtime if keyword == "RUN" and "packages.apt" in args]
    shell = next(json.loads(args) for keyword, args in runtime if keyword == "SHELL")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "calls.jsonl"
    for name in ("apt-get", "rm"):
        stub = stubs / name
        stub.write_text(
            "#!/usr/bin/env python3\nimport json, sys\n"
            f"open({str(log)!r}, 'a').write(json.dumps([{name!r}, *sys.argv[1:]]) + '\\n')\n"
        )
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    apt_list = tmp_path / "packages.apt"
    apt_list.write_bytes(PACKAGES_APT.read_bytes())
    script = step.replace("/tmp/packages.apt", shlex.quote(str(apt_list)))
    assert "/tmp/" not in script.replace(str(tmp_path), ""), "the step touches other /tmp paths"
    env = {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "OCR_LANGUAGES": ocr_languages,
        "OCR_SCRIPTS": ocr_scripts,
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
    }
    result = subprocess.run(
        [*shell, script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result.returncode, calls, result.stderr


@pytest.mark.parametrize(
    ("languages", "extra"),
    [
        ("", []),
        ("deu fra", ["tesseract-ocr-deu", "tesseract-ocr-fra"]),
        ("chi_sim", ["tesseract-ocr-chi-sim"]),
    ],
)
def test_install_step_installs_packages_apt_plus_language_packs(
    runtime: list[tuple[str, str]], tmp_path: Path, languages: str, extra: list[str]
) -> None:
    status, calls, stderr = _run_install_step(runtime, tmp_path, languages)
    assert status == 0, stderr
    installs = [call for call in calls if call[:2] == ["apt-get", "install"]]
    assert len(installs) == 1
    flags = [word for word in installs[0][2:] if word.startswith("-")]
    packages = [word for word in installs[0][2:] if not word.startswith("-")]
    assert set(flags) == {"-y", "--no-install-recommends"}
    assert sorted(packages) == sorted(apt_packages() + extra)
    assert ["apt-get", "update"] in calls
    assert ["apt-get", "clean"] in calls
    removed = [path for call in calls if call[0] == "rm" for path in call[1:]]
    assert any(path.startswith("/var/lib/apt/lists") for path in removed)


def test_a_slim_build_leaves_the_script_models_out(
    runtime: list[tuple[str, str]], tmp_path: Path
) -> None:
    status, calls, stderr = _run_install_step(runtime, tmp_path, "", ocr_scripts="0")
    assert status == 0, stderr
    (install,) = [call for call in calls if call[:2] == ["apt-get", "install"]]
    packages = [word for word in install[2:] if not word.startswith("-")]
    scripts = [package for package in apt_packages() if package.startswith("tesseract-ocr-script-")]
    assert "tesseract-ocr-script-hant" in scripts
    assert sorted(packages) == sorted(set(apt_packages()) - set(scripts))


@pytest.mark.parametrize("languages", ["deu;touch", "../eng", "DEU", "eng$(id)"])
def test_install_step_refuses_a_language_that_is_not_a_name(
    runtime: list[tuple[str, str]], tmp_path: Path, languages: str
) -> None:
    status, calls, stderr = _run_install_step(runtime, tmp_path, languages)
    assert status != 0
    assert "bad language name" in stderr
    assert not [call for call in calls if call[:2] == ["apt-get", "install"]]


def test_every_package_in_packages_apt_is_installed_here() -> None:
    """The machine the tests ran on has what the image installs (scripts/setup did it)."""
    assert apt_packages(), "packages.apt lists nothing"
    for package in apt_packages():
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package],
            capture_output=True,
            text=True,
            check=False,
        )
        assert status.stdout == "install ok installed", (
            f"{package}: {status.stdout or status.stderr}"
        )


def test_dockerignore_keeps_the_context_to_what_the_image_needs(dockerfile: str) -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignore, ".dockerignore must be an allow-list"
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    sources = set()
    for keyword, arguments in instructions(dockerfile):
        if keyword == "COPY" and not arguments.startswith("--from"):
            sources.update(arguments.split()[:-1])
    assert sources <= allowed, sources - allowed
    assert not {".venv", ".venv-tools", ".git", "tests"} & allowed


def test_a_language_pack_for_the_configured_ocr_language_exists() -> None:
    """AIRLOCK_OCR_LANGUAGE's default (eng) is in packages.apt, so it works without the ARG."""
    assert "tesseract-ocr-eng" in apt_packages()
    assert re.search(r"^ARG OCR_LANGUAGES=", DOCKERFILE.read_text(), re.MULTILINE)
