"""What every command shares: finding the server as the SDK does, errors that say what to fix, --version, help."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from jobpulse.cli import build_parser
from jobpulse.testing import free_port
from jobpulse.version import __version__

pytestmark = pytest.mark.e2e


def test_an_unreachable_server_is_named_with_where_its_url_came_from(jobpulse, monkeypatch):
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("JOBPULSE_URL", url)
    result = jobpulse("jobs")
    assert result.code == 1
    assert result.err.startswith(f"jobpulse jobs: cannot reach the server at {url} (")
    assert result.err.rstrip().endswith("the URL comes from JOBPULSE_URL")


def test_a_refused_key_is_named_with_where_it_came_from(jobpulse, monkeypatch):
    monkeypatch.setenv("JOBPULSE_API_KEY", "jp_000000000000_notakeynotakeynotakey")
    result = jobpulse("show", "any-job")
    assert result.code == 1
    assert "the API key is not valid or has been revoked (HTTP 401); the API key comes from JOBPULSE_API_KEY" in (
        result.err
    )


def test_without_any_key_the_error_says_how_to_give_one(jobpulse, server, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no credentials file here
    result = jobpulse("logs", "any-job", "--url", server.url)
    assert result.code == 1
    assert "no API key was found: set JOBPULSE_API_KEY, pass --api-key" in result.err


def test_the_credentials_file_gives_url_and_key_when_nothing_else_does(jobpulse, demo):
    assert jobpulse("show", demo).code == 0  # the fixtures set neither JOBPULSE_URL nor JOBPULSE_API_KEY


def test_version_is_printed_by_the_installed_command():
    done = subprocess.run([sys.executable, "-m", "jobpulse", "--version"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, f"jobpulse {__version__}")


def _commands(parser: argparse.ArgumentParser, prefix: str = "jobpulse") -> dict[str, argparse.ArgumentParser]:
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[f"{prefix} {name}"] = sub
                found.update(_commands(sub, f"{prefix} {name}"))
    return found


def test_every_command_has_a_description_and_every_option_a_help():
    commands = _commands(build_parser())
    assert {"jobpulse jobs", "jobpulse show", "jobpulse logs", "jobpulse metrics", "jobpulse export"} <= set(commands)
    for name, parser in commands.items():
        assert parser.description, f"{name} has no description"
        for action in parser._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                assert action.help, f"{name} {action.option_strings[0]} has no help"


def test_server_help_names_each_default_once():
    server = _commands(build_parser())["jobpulse server"]
    text = server.format_help()
    assert "(default: None)" not in text
    for action in server._actions:
        assert (action.help or "").count("(default:") <= 1, action.option_strings
