#!/usr/bin/env python3
"""A scripted stand-in for an agent CLI that speaks the Anthropic Messages API
(as Claude Code does), for tests of the `command` policy against a real vLLM.

    anthropic_agent.py [--direct PORT]

It asks the model at $ANTHROPIC_BASE_URL/v1/messages for a few tokens, as
$ANTHROPIC_MODEL, prints what came back, and exits 0 (the worker then submits
the workspace's solution file). It also prints the model provider its Codex
configuration names, from $CODEX_HOME/config.toml.

Then, as a CLI that never reports its own tokens: the same chat completion
at $OPENAI_BASE_URL twice, plain and streamed without asking for usage
(exactly 8 tokens out each: `ignore_eos`), printing the plain answer's usage
and how many streamed chunks carried one. With --direct, it also tries the
model server's own port on 127.0.0.1, around the endpoint it was given, and
prints whether it got through.
"""
import json
import os
import socket
import sys
import tomllib
import urllib.request


def chat(stream: bool):
    """The chat completion: its usage (plain), or the count of chunks that carried one (streamed)."""
    body = {
        "model": os.environ["HPCAGENT_MODEL"],
        "max_tokens": 8,
        "ignore_eos": True,
        "temperature": 0,
        "messages": [{"role": "user", "content": "Count to three."}],
        "stream": stream,
    }
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        if not stream:
            return json.load(response)["usage"]
        chunks = [json.loads(line[5:]) for line in response.read().decode().splitlines()
                  if line.startswith("data:") and line[5:].strip() != "[DONE]"]
        return sum(1 for c in chunks if c.get("usage") or not c.get("choices"))


def direct(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return "connected"
    except OSError as e:
        return f"refused ({e.strerror})"


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
    print("anthropic usage:", json.dumps(reply.get("usage")), flush=True)
    print("chat usage:", json.dumps(chat(stream=False)), flush=True)
    print("streamed usage chunks:", chat(stream=True), flush=True)
    if "--direct" in sys.argv:
        print("direct:", direct(int(sys.argv[sys.argv.index("--direct") + 1])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
