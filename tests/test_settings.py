"""The settings table: every setting is documented, and the environment and command line set them."""

from __future__ import annotations

from pathlib import Path

from jobpulse.cli import build_parser
from jobpulse.settings import SETTINGS, load_settings

README = Path(__file__).resolve().parent.parent / "README.md"


def test_every_setting_has_help_and_is_in_the_readme():
    text = README.read_text()
    for setting in SETTINGS:
        assert setting.help.strip(), setting.name
        assert f"`{setting.name}`" in text, f"README does not document setting {setting.name!r}"


def test_environment_then_overrides():
    settings = load_settings(
        {"port": 9000},
        environ={"JOBPULSE_PORT": "7000", "JOBPULSE_RAW_TTL_DAYS": "14", "JOBPULSE_WRITE_CREDENTIALS": "no"},
    )
    assert settings.port == 9000 and settings.raw_ttl_days == 14 and settings.write_credentials is False


def test_a_bad_environment_value_names_the_variable():
    import pytest

    with pytest.raises(ValueError, match="JOBPULSE_PORT"):
        load_settings(environ={"JOBPULSE_PORT": "eighty"})


def test_every_setting_is_a_server_flag():
    parser = build_parser()
    args = parser.parse_args(["server", "--data-dir", "/tmp/x", "--raw-ttl-days", "3", "--no-write-credentials"])
    assert args.data_dir == Path("/tmp/x") and args.raw_ttl_days == 3 and args.write_credentials is False
    help_text = parser._subparsers._group_actions[0].choices["server"].format_help()
    for setting in SETTINGS:
        assert "--" + setting.name.replace("_", "-") in help_text


def test_settings_built_in_code_take_the_tables_defaults():
    from jobpulse.settings import Settings, default_data_dir

    built, loaded = Settings(), load_settings(environ={})
    for setting in SETTINGS:
        expected = default_data_dir() if setting.name == "data_dir" else setting.default
        assert getattr(built, setting.name) == expected == getattr(loaded, setting.name), setting.name
