#!/usr/bin/env python3
"""A scripted external agent CLI for tests of the `command` policy.

    mcp_agent.py MCP_CONFIG [--crash-on KERNEL] [--linger SECONDS]
                            [--hostile-on KERNEL --bait PATH]

Like a real agent CLI it reads the MCP configuration it was given, starts the
server named there, and talks MCP (JSON-RPC, one message per line, on the
server's stdin/stdout): initialize, list the tools, read the task, score the
workspace's solution file, submit it. With --crash-on KERNEL it exits 3 right
after reading a task for KERNEL, before submitting anything. With --linger
SECONDS it stays that long after its submit, as real CLIs do to write a closing
message, then tries one more write and exits 0. With --hostile-on KERNEL,
on a task for KERNEL it first leaves a FIFO, hard links (to PATH and to its
attempt's MCP configuration, and a second name for its solution) and a 1 TiB
sparse file in its workspace and reads each through the tools, printing each
reply with how long it took.
"""
import json
import os
import time
import subprocess
import sys


def main() -> int:
    config = json.load(open(sys.argv[1]))
    crash_on = sys.argv[sys.argv.index("--crash-on") + 1] if "--crash-on" in sys.argv else None
    linger = float(sys.argv[sys.argv.index("--linger") + 1]) if "--linger" in sys.argv else None
    hostile_on = sys.argv[sys.argv.index("--hostile-on") + 1] if "--hostile-on" in sys.argv else None
    bait = sys.argv[sys.argv.index("--bait") + 1] if "--bait" in sys.argv else None
    server = config["mcpServers"]["hpcagent"]
    proc = subprocess.Popen(
        [server["command"], *server["args"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, **server["env"]},
        text=True,
    )

    def send(message):
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    def request(ident, method, params):
        send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"the MCP server closed its output (waiting for {method})")
            message = json.loads(line)
            if message.get("id") == ident:
                if "error" in message:
                    raise SystemExit(f"{method}: {message['error']}")
                return message["result"]

    def call(ident, tool, arguments):
        result = request(ident, "tools/call", {"name": tool, "arguments": arguments})
        text = result["content"][0]["text"]
        print(f"{tool}: {text[:600]}", flush=True)
        return text

    request(1, "initialize", {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "mcp_agent.py", "version": "1"},
    })
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools = [t["name"] for t in request(2, "tools/list", {})["tools"]]
    print("tools:", " ".join(tools), flush=True)
    task = call(3, "task", {})
    if crash_on and f"Task: {crash_on} " in task:
        print("crashing on purpose", file=sys.stderr, flush=True)
        return 3
    if hostile_on and f"Task: {hostile_on} " in task:
        hostile_files(request, bait)
    call(4, "score", {})
    call(5, "submit", {})
    if linger is not None:
        time.sleep(linger)
        late = request(6, "tools/call", {"name": "write_file",
                                         "arguments": {"path": "late.c", "content": "late"}})
        print(f"late write_file: error={late.get('isError')} {late['content'][0]['text']}", flush=True)
    proc.stdin.close()
    proc.wait(timeout=30)
    return 0


def hostile_files(request, bait):
    """Leaves what blocks or leaks a naive reader in the workspace and reads
    each through the tools: `hostile NAME: error=BOOL SECONDSs TEXT`."""
    os.mkfifo("fifo.c")
    for name, target in [("linked.c", bait), ("config.c", "../mcp.json"), ("twin.c", "solution.c")]:
        try:
            os.link(target, name)
            print(f"link {name}: made", flush=True)
        except OSError as e:
            print(f"link {name}: not made ({e})", flush=True)
    with open("huge.c", "wb") as f:
        f.truncate(1 << 40)
    ident = 100
    for tool, arguments in [
        ("read_file", {"path": "fifo.c"}),
        ("write_file", {"path": "fifo.c", "content": "x"}),
        ("score", {"path": "fifo.c"}),
        ("read_file", {"path": "linked.c"}),
        ("write_file", {"path": "linked.c", "content": "pwned"}),
        ("read_file", {"path": "config.c"}),
        ("read_file", {"path": "twin.c"}),
        ("read_file", {"path": "huge.c"}),
    ]:
        ident += 1
        started = time.monotonic()
        result = request(ident, "tools/call", {"name": tool, "arguments": arguments})
        took = time.monotonic() - started
        text = result["content"][0]["text"].replace("\n", " ")
        print(f"hostile {tool} {arguments['path']}: error={result.get('isError')} "
              f"{took:.2f}s {text[:300]} ... {text[-80:]}", flush=True)
    os.unlink("twin.c")  # the solution has one name again, to be graded


if __name__ == "__main__":
    sys.exit(main())
