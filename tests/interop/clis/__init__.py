"""Real agent CLIs (OpenCode, Qwen Code, Codex, Claude Code, Gemini CLI) run confined:
``sandbox`` (unprivileged user, own namespaces, one port), ``catalog`` (each CLI's pinned
version and how it is pointed at one base URL), ``upstream`` (a scripted model server in the
four wire protocols), ``wire`` (reading recorded HTTP/1.1 byte streams), ``capture`` (a run
through ``agent-eval proxy``, written out as fixtures)."""
