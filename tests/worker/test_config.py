from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.knowledge.attachments import DEFAULT_LIMITS, ExtractionLimits
from bridge.knowledge.ceilings import EXTRACTION_SETTINGS, PIXELS, SANDBOX_SETTINGS
from bridge.queue.jobs import QUEUES
from bridge.wire import ocr_language_problem
from sandbox import ocr_languages
from sandbox.jail import DEFAULT_UID_BASE
from sandbox.limits import MIB, ParseLimits
from tests.conftest import REPO_ROOT
from worker.config import DEFAULT_BROKER_URL, VARIABLES, ConfigurationError, Settings, Variable


def test_defaults_keep_the_time_limits_in_order() -> None:
    settings = Settings.from_env({})
    assert settings.broker_url == settings.result_backend == DEFAULT_BROKER_URL
    assert settings.client_redis_url == settings.result_backend
    assert not settings.broker_configured
    assert settings.queues == QUEUES
    wall = settings.sandbox.wall_seconds
    assert wall < settings.soft_time_limit < settings.hard_time_limit < settings.visibility_timeout
    assert settings.max_deliveries == 3 and settings.result_cache
    assert settings.sandbox_require == frozenset()
    assert settings.sandbox_uid_base == DEFAULT_UID_BASE


def test_every_setting_is_filled_from_the_table() -> None:
    filled = {variable.setting.split(".")[0] for variable in VARIABLES} | {"broker_configured"}
    assert filled == {field.name for field in fields(Settings)}
    assert len({variable.name for variable in VARIABLES}) == len(VARIABLES)


def _documented_rows() -> dict[str, tuple[str, str]]:
    """Each variable of docs/configuration.md's table: its row's default and the whole row."""
    rows = {}
    for line in (REPO_ROOT / "docs" / "configuration.md").read_text().splitlines():
        if line.startswith("| `AIRLOCK_"):
            names, default = line.split(" | ")[:2]
            for name in re.findall(r"`(AIRLOCK_\w+)`", names):
                rows[name] = (default, line)
    return rows


@pytest.mark.parametrize("variable", VARIABLES, ids=lambda variable: variable.name)
def test_every_variable_is_documented_with_its_default(variable: Variable[Any]) -> None:
    rows = _documented_rows()
    assert variable.name in rows, f"{variable.name} has no row in docs/configuration.md"
    default, _ = rows[variable.name]
    if isinstance(variable.default, str) and variable.default:
        assert f"`{variable.default}`" in default, (variable.name, variable.default, default)


def test_every_variable_is_read() -> None:
    settings = Settings.from_env(
        {
            "AIRLOCK_BROKER_URL": "redis://broker:7101/1",
            "AIRLOCK_RESULT_BACKEND": "redis://results:7102/2",
            "AIRLOCK_CLIENT_REDIS_URL": "redis://clients:7103/0",
            "AIRLOCK_QUEUES": "airlock.ocr",
            "AIRLOCK_CONCURRENCY": "3",
            "AIRLOCK_SANDBOX_MEMORY_MB": "512",
            "AIRLOCK_SANDBOX_CPU_SECONDS": "20",
            "AIRLOCK_SANDBOX_WALL_SECONDS": "30",
            "AIRLOCK_SANDBOX_OUTPUT_BYTES": "1048576",
            "AIRLOCK_OCR_LANGUAGE": "eng+deu,hin",
            "AIRLOCK_ADMIT_UNREADABLE": "yes",
            "AIRLOCK_TASK_SOFT_TIME_LIMIT": "40",
            "AIRLOCK_TASK_TIME_LIMIT": "50",
            "AIRLOCK_VISIBILITY_TIMEOUT": "70",
            "AIRLOCK_RESTORE_INTERVAL": "2",
            "AIRLOCK_RESULT_EXPIRES": "600",
            "AIRLOCK_PAYLOAD_TTL": "900",
            "AIRLOCK_MAX_DELIVERIES": "5",
            "AIRLOCK_FAN_OUT_PAGES": "0",
            "AIRLOCK_RESULT_CACHE": "off",
            "AIRLOCK_RESULT_CACHE_TTL": "60",
            "AIRLOCK_SANDBOX_REQUIRE": "seccomp, landlock",
            "AIRLOCK_SANDBOX_UID_BASE": "3000000",
        }
    )
    assert settings.broker_configured
    assert settings.result_backend == "redis://results:7102/2"
    assert settings.client_redis_url == "redis://clients:7103/0"
    assert settings.queues == ("airlock.ocr",)
    assert settings.concurrency == 3
    assert settings.sandbox.memory_bytes == 512 * MIB
    assert (settings.sandbox.cpu_seconds, settings.sandbox.wall_seconds) == (20, 30.0)
    assert settings.sandbox.output_bytes == 1048576
    assert settings.parse_limits.ocr_languages == ("eng+deu", "hin")
    assert settings.parse_limits.admit_unreadable
    assert (settings.soft_time_limit, settings.hard_time_limit) == (40.0, 50.0)
    assert (settings.visibility_timeout, settings.restore_interval) == (70.0, 2.0)
    assert (settings.result_expires, settings.payload_ttl) == (600, 900)
    assert settings.max_deliveries == 5 and settings.fan_out_pages == 0
    assert not settings.result_cache and settings.result_cache_ttl == 60
    assert settings.sandbox_require == frozenset({"seccomp", "landlock"})
    assert settings.sandbox_uid_base == 3_000_000


def test_the_ceilings_a_refusal_names_are_the_variables_read() -> None:
    """Each ExtractionLimits variable (named in refusals) is read into
    the CLI's defaults and the bridge service's ceilings; AIRLOCK_MAX_PIXELS and the text
    ceiling reach the sandbox's parse limits."""
    values = {
        "max_bytes": 9,
        "max_uncompressed_bytes": 8,
        "max_expansion_ratio": 7.5,
        "max_members": 6,
        "max_nesting_depth": 2,
        "max_pages": 117,
        "max_text_chars": 58_000,
        "max_total_chars": 200_000,
    }
    env = {EXTRACTION_SETTINGS[name].variable: str(value) for name, value in values.items()}
    settings = Settings.from_env({**env, PIXELS.variable: "1234"})
    assert settings.extraction_limits == ExtractionLimits(**values)  # type: ignore[arg-type]
    assert settings.bridge_service.limits == settings.extraction_limits
    assert settings.parse_limits.max_pixels == 1234
    assert settings.parse_limits.max_text_chars == 58_000


@pytest.mark.parametrize("type_name", sorted(SANDBOX_SETTINGS))
def test_the_sandbox_limits_a_refusal_names_are_the_variables_read(type_name: str) -> None:
    setting = SANDBOX_SETTINGS[type_name]
    settings = Settings.from_env({setting.variable: "7"})
    scale = MIB if setting.field == "memory_bytes" else 1  # the variable is in MiB
    assert getattr(settings.sandbox, setting.field) == 7 * scale


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AIRLOCK_MAX_PAGES", "0"),
        ("AIRLOCK_MAX_PAGES", "lots"),
        ("AIRLOCK_MAX_EXPANSION_RATIO", "-1"),
    ],
)
def test_an_impossible_ceiling_is_refused_naming_it(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        Settings.from_env({name: value})


def test_every_redis_url_may_name_a_sentinel_master() -> None:
    """Workers, the bridge and its clients' Redis may all be behind Sentinel; the result
    backend (and so the clients' Redis) follows a Sentinel broker as it follows any other."""
    sentinels = "sentinel://worker:pw@s1:26379/0;sentinel://s2:26379/0?master_name=airlock"
    settings = Settings.from_env({"AIRLOCK_BROKER_URL": sentinels})
    assert settings.result_backend == settings.client_redis_url == sentinels
    clients = "sentinel://s1:26379;sentinel://s2:26379?master_name=airlock-clients"
    settings = Settings.from_env({"AIRLOCK_CLIENT_REDIS_URL": clients})
    assert settings.client_redis_url == clients


def test_the_result_backend_defaults_to_the_broker() -> None:
    assert Settings.from_env({"AIRLOCK_BROKER_URL": "redis://b/3"}).result_backend == "redis://b/3"


def test_derived_limits_follow_the_wall_clock() -> None:
    settings = Settings.from_env({"AIRLOCK_SANDBOX_WALL_SECONDS": "10"})
    assert (settings.soft_time_limit, settings.hard_time_limit) == (40.0, 70.0)
    assert settings.visibility_timeout == 130.0


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AIRLOCK_TASK_SOFT_TIME_LIMIT": "100"}, "wall clock < soft limit"),
        ({"AIRLOCK_TASK_TIME_LIMIT": "140"}, "soft limit < hard limit"),
        ({"AIRLOCK_VISIBILITY_TIMEOUT": "60"}, "exceed the hard time limit"),
        ({"AIRLOCK_PAYLOAD_TTL": "10"}, "AIRLOCK_PAYLOAD_TTL"),
        ({"AIRLOCK_RESULT_BACKEND": "rpc://"}, "redis://"),
        ({"AIRLOCK_CLIENT_REDIS_URL": "rpc://"}, "AIRLOCK_CLIENT_REDIS_URL"),
        ({"AIRLOCK_BROKER_URL": "rediscluster://r:6390/0"}, "AIRLOCK_BROKER_URL: .*Cluster"),
        ({"AIRLOCK_RESULT_BACKEND": "redis+cluster://r:6390"}, "RESULT_BACKEND: .*celery#2852"),
        ({"AIRLOCK_CLIENT_REDIS_URL": "redis-cluster://r"}, "CLIENT_REDIS_URL: .*Cluster"),
        ({"AIRLOCK_BROKER_URL": "sentinel://s1:26379;sentinel://s2"}, "BROKER_URL: .*master_name"),
        (
            {"AIRLOCK_RESULT_BACKEND": "sentinel://s1:26379?master=airlock"},
            "AIRLOCK_RESULT_BACKEND: .*not 'master'",
        ),
        ({"AIRLOCK_QUEUES": "celery"}, "AIRLOCK_QUEUES"),
        ({"AIRLOCK_QUEUES": " , "}, "AIRLOCK_QUEUES"),
        ({"AIRLOCK_OCR_LANGUAGE": "--psm 0"}, "AIRLOCK_OCR_LANGUAGE"),
        ({"AIRLOCK_OCR_LANGUAGE": "scripts,eng"}, "name a language before 'scripts'"),
        ({"AIRLOCK_CONCURRENCY": "0"}, "positive integer"),
        ({"AIRLOCK_MAX_DELIVERIES": "-1"}, "positive integer"),
        ({"AIRLOCK_FAN_OUT_PAGES": "-1"}, "whole number"),
        ({"AIRLOCK_FAN_OUT_PAGES": "9" * 12}, "whole number"),
        ({"AIRLOCK_SANDBOX_WALL_SECONDS": "nan"}, "positive, finite"),
        ({"AIRLOCK_SANDBOX_WALL_SECONDS": "soon"}, "not a number"),
        ({"AIRLOCK_RESULT_CACHE": "maybe"}, "1/0"),
        ({"AIRLOCK_SANDBOX_REQUIRE": "seccom"}, "unknown sandbox mechanisms"),
        ({"AIRLOCK_SANDBOX_UID_BASE": "-1"}, "AIRLOCK_SANDBOX_UID_BASE"),
        ({"AIRLOCK_SANDBOX_UID_BASE": "high"}, "AIRLOCK_SANDBOX_UID_BASE"),
    ],
)
def test_values_that_break_a_guarantee_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_env(env)


def test_the_sandbox_and_the_bridge_default_to_the_same_ceilings() -> None:
    """The sandbox cannot import the bridge, so its library defaults are held equal here."""
    parse = ParseLimits()
    assert (parse.max_pages, parse.max_text_chars) == (
        DEFAULT_LIMITS.max_pages,
        DEFAULT_LIMITS.max_text_chars,
    )


def test_the_default_ocr_languages_are_eng_then_every_installed_script_model() -> None:
    """``scripts`` stands for the script models installed here (packages.apt installs them),
    so a host without them still starts, reading English alone."""
    installed = set(ocr_languages.installed() or ())
    settings = Settings.from_env({})
    assert settings.ocr_language == "eng,scripts"
    models = [model for model in ocr_languages.SCRIPT_MODELS if model in installed]
    assert "HanT" in models and "Japanese_vert" in models
    assert settings.parse_limits.ocr_languages == ("eng", *models)
    named = Settings.from_env({"AIRLOCK_OCR_LANGUAGE": "deu,HanS,scripts"})
    assert named.parse_limits.ocr_languages == ("deu", "HanS", *(m for m in models if m != "HanS"))


_MODEL_NAMES = st.one_of(
    st.sampled_from(["eng", "chi_sim_vert", "Japanese_vert", "scripts", "osd", "0", "_", "x" * 32]),
    st.from_regex(r"[A-Za-z0-9_]{1,33}", fullmatch=True),
)
_REQUESTED = st.lists(
    st.lists(_MODEL_NAMES, min_size=1, max_size=5).map("+".join), min_size=1, max_size=5
).map(",".join)


@settings(max_examples=400, deadline=None)
@given(_REQUESTED)
def test_every_ocr_language_a_request_may_name_builds_the_workers_parse_limits(
    requested: str,
) -> None:
    """The wire's rule (bridge.wire.OcrLanguage) and the sandbox's (ParseLimits) are two
    checks of one value: a name the first let through and the second refused ("_") was a 500
    at the door and a WorkerError in the queue."""
    if ocr_language_problem(requested) is None:
        parse = Settings.from_env({}).parse_limits_for(DEFAULT_LIMITS, ocr_language=requested)
        assert set(parse.ocr_languages) <= set(ocr_languages.expanded(requested).split(","))


def test_an_operator_holds_request_languages_to_a_list_or_to_the_deployments_own() -> None:
    """Each model a request adds can cost each page it reads another tesseract run: an
    operator may admit any the host has (the default), a list, or none."""
    anything = Settings.from_env({})
    assert anything.ocr_request_languages is None
    assert anything.refused_ocr_language("deu+eng,scripts") is None
    listed = Settings.from_env({"AIRLOCK_OCR_REQUEST_LANGUAGES": "eng, hin,scripts"})
    assert listed.ocr_request_languages == frozenset({"eng", "hin", "scripts"})
    assert listed.refused_ocr_language(None) is None  # the deployment's own, always
    assert listed.refused_ocr_language("hin+eng,scripts") is None
    assert listed.refused_ocr_language("eng+deu,fra") == (
        "OCR language 'deu', 'fra' is not one a request may name here "
        "(AIRLOCK_OCR_REQUEST_LANGUAGES: eng, hin, scripts)"
    )
    none = Settings.from_env({"AIRLOCK_OCR_REQUEST_LANGUAGES": "none"})
    assert none.refused_ocr_language(None) is None
    assert none.refused_ocr_language("eng") == (
        "this service reads scans with its own OCR languages only "
        "(AIRLOCK_OCR_REQUEST_LANGUAGES=none); ask without ocr_language"
    )
    for bad in ("eng,-l", "../eng", "_", "any,eng"):
        with pytest.raises(ConfigurationError, match="AIRLOCK_OCR_REQUEST_LANGUAGES="):
            Settings.from_env({"AIRLOCK_OCR_REQUEST_LANGUAGES": bad})
