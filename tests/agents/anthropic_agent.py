#!/usr/bin/env python3
"""A scripted stand-in for an agent CLI that speaks the Anthropic Messages API
(as Claude Code does), for tests of the `command` policy against a real vLLM.

    anthropic_agent.py

It asks the model at $ANTHROPIC_BASE_URL/v1/messages for a few tokens, as
$ANTHROPIC_MODEL, prints what came back, and exits 0 (the worker then submits
the workspace's solution file). It also prints the model provider its Codex
configuration names, from $CODEX_HOME/config.toml.
"""
import json
import os
import sys
import tomllib
import urllib.request


def main() -> int:
    base = os.environ["ANTHROPIC_BASE_URL"]
    body = {
        "model": os.environ["ANTHROPIC_MODEL"],
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "Say hello."}],
    }
    request = urllib.request.Request(
        f"{base}/v1/messages",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""),
            "anthropic-version": "2023-06-01",
        },
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        reply = json.load(response)
    print("anthropic reply:", json.dumps({k: reply.get(k) for k in ("type", "role", "model")}), flush=True)
    with open(os.path.join(os.environ["CODEX_HOME"], "config.toml"), "rb") as f:
        codex = tomllib.load(f)
    provider = codex["model_providers"][codex["model_provider"]]
    print("codex provider:", provider["base_url"], "servers:", " ".join(codex["mcp_servers"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
