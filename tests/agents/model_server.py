#!/usr/bin/env python3
"""A scripted model server for tests that drive real agent CLIs (Claude Code,
Codex) through the `command` policy.

    model_server.py --log FILE [--break KERNEL]...

It listens on 127.0.0.1 (a free port; the first line of its stdout is
`listening on HOST:PORT`) and speaks the Anthropic Messages API
(`/v1/messages`, as Claude Code calls it) and the OpenAI Responses API
(`/v1/responses`, as Codex 0.169 calls it; that Codex refuses the Chat
Completions wire API, so none is served), streaming or not. It answers as a
model working the task would, one tool call per turn, decided by what the
conversation sent so far holds, through the campaign's MCP tools, found in
the request's tool list as `mcp__hpcagent__<tool>` (Claude Code's names;
Codex's `namespace` tool flattened to the same, as vLLM does for its model):

    task -> read_file(solution) -> write_file(solution, the kernel) -> score
         -> submit -> a closing text message.

The kernel is the starter it read, with MARKER as its first line: a test
finds the marker in the graded source (`submission.c`). For a task of a
kernel named by --break, the kernel's body returns at once instead, so its
verdict cannot be the starter's. A request that offers none of the
campaign's tools (a CLI's side calls: titles, quota checks) gets a short
text. Every request is appended to FILE as one JSON line: the path, the
tools it offered, the step answered, the time and the body.
"""
import argparse
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARKER = "// hpcagent-scripted-kernel"
STEPS = ["task", "read_file", "write_file", "score", "submit"]
CLOSING = "Submitted the kernel; done."


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--break", dest="broken", action="append", default=[])
    return parser.parse_args()


ARGS = None
LOG_LOCK = threading.Lock()


# --- the script: which call comes next ---------------------------------------


def next_action(tools, history):
    """The next action: ("call", tool name, arguments) or ("text", text).

    `tools` are the tool names offered; `history` the conversation as
    (kind, ...) events: ("call", name, id) and ("result", id, text)."""
    ours = {step: full_name(tools, step) for step in STEPS}
    if not all(ours.values()):
        return ("text", "ok")
    short = {full: step for step, full in ours.items()}
    done = []  # (step, result text)
    names = {}
    for event in history:
        if event[0] == "call" and event[1] in short:
            names[event[2]] = short[event[1]]
        elif event[0] == "result" and event[1] in names:
            done.append((names[event[1]], event[2]))
    if len(done) >= len(STEPS):
        return ("text", CLOSING)
    step = STEPS[len(done)]
    results = dict(done)
    solution = solution_file(results.get("task", ""))
    if step == "task":
        arguments = {}
    elif step == "read_file":
        arguments = {"path": solution}
    elif step == "write_file":
        arguments = {"path": solution, "content": kernel(results["task"], results["read_file"])}
    else:
        arguments = {"path": solution}
    return ("call", ours[step], arguments)


def full_name(tools, step):
    """The offered name of the campaign's tool `step`: `mcp__hpcagent__task`,
    as Claude Code names it and as Codex's namespace flattens."""
    for name in tools:
        if name.endswith("hpcagent__" + step):
            return name
    return None


def solution_file(task):
    found = re.search(r"Your workspace holds (\S+),", task)
    return found.group(1) if found else "solution.c"


def kernel(task, starter):
    """The starter with the marker; for a --break kernel, one that returns
    before doing anything."""
    source = f"{MARKER}\n{starter}"
    found = re.match(r"Task: (\S+) ", task)
    if found and found.group(1) in ARGS.broken:
        # The first brace after SYMBOL( opens the kernel's body.
        at = source.index("{", source.index("SYMBOL("))
        source = source[: at + 1] + "\n    return; /* hpcagent-scripted-broken */" + source[at + 1:]
    return source


# --- the Anthropic Messages API ---------------------------------------------


def anthropic_history(body):
    history = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            continue
        for block in content or []:
            if block.get("type") == "tool_use":
                history.append(("call", block.get("name"), block.get("id")))
            elif block.get("type") == "tool_result":
                history.append(("result", block.get("tool_use_id"), text_of(block.get("content"))))
    return history


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(text_of(c) for c in content)
    if isinstance(content, dict):
        return content.get("text") or content.get("output") or ""
    return ""


def anthropic_reply(action, model):
    ident = "msg_" + uuid.uuid4().hex[:20]
    if action[0] == "call":
        block = {
            "type": "tool_use",
            "id": "toolu_" + uuid.uuid4().hex[:20],
            "name": action[1],
            "input": action[2],
        }
        stop = "tool_use"
    else:
        block = {"type": "text", "text": action[1]}
        stop = "end_turn"
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def anthropic_events(message):
    """The SSE events of a streamed message."""
    start = dict(message, content=[], stop_reason=None)
    start["usage"] = {"input_tokens": 10, "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            empty = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            empty = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": 10},
    }
    yield "message_stop", {"type": "message_stop"}


def anthropic_tools(body):
    return [t.get("name") for t in body.get("tools") or []]


# --- the OpenAI Responses API -------------------------------------------------


def flat(name, namespace):
    return f"{namespace}__{name}" if namespace else name


def responses_tools(body):
    """The functions offered, by flat name, each with its (name, namespace):
    Codex offers an MCP server's tools as one tool of type `namespace`
    holding its functions, which vLLM shows its model as
    `<namespace>__<name>` and answers with the two apart again."""
    found = {}
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                found[flat(inner.get("name"), tool.get("name"))] = (inner.get("name"), tool.get("name"))
        elif tool.get("name"):
            found[tool["name"]] = (tool["name"], None)
    return found


def responses_history(body):
    history = []
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if item.get("type") == "function_call":
            history.append(("call", flat(item.get("name"), item.get("namespace")), item.get("call_id")))
        elif item.get("type") == "function_call_output":
            # Codex puts its own line before an MCP tool's content.
            text = re.sub(r"^Wall time: [0-9.]+ seconds\nOutput:\n?", "", text_of(item.get("output")))
            history.append(("result", item.get("call_id"), text))
    return history


def responses_items(action, offered):
    if action[0] == "call":
        name, namespace = offered[action[1]]
        item = {
            "type": "function_call",
            "id": "fc_" + uuid.uuid4().hex[:20],
            "call_id": "call_" + uuid.uuid4().hex[:20],
            "name": name,
            "arguments": json.dumps(action[2]),
            "status": "completed",
        }
        if namespace:
            item["namespace"] = namespace
        return [item]
    return [{
        "type": "message",
        "id": "msg_" + uuid.uuid4().hex[:20],
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": action[1], "annotations": []}],
    }]


def response_object(items, model, status):
    return {
        "id": "resp_" + uuid.uuid4().hex[:20],
        "object": "response",
        "created_at": 0,
        "status": status,
        "model": model,
        "output": items,
        "usage": {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }


def responses_events(items, model):
    created = response_object([], model, "in_progress")
    yield "response.created", {"type": "response.created", "response": created}
    for index, item in enumerate(items):
        yield "response.output_item.added", {
            "type": "response.output_item.added", "output_index": index, "item": item}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield "response.output_text.delta", {
                "type": "response.output_text.delta", "output_index": index,
                "item_id": item["id"], "content_index": 0, "delta": text}
        yield "response.output_item.done", {
            "type": "response.output_item.done", "output_index": index, "item": item}
    done = dict(response_object(items, model, "completed"), id=created["id"])
    yield "response.completed", {"type": "response.completed", "response": done}


# --- HTTP ---------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?")[0]
        log({"method": "GET", "path": path})
        if path.endswith("/models"):
            self.send_json(200, {"object": "list", "data": []})
        else:
            self.send_json(404, {"error": {"message": f"no route {path}"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        path = self.path.split("?")[0]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            log({"method": "POST", "path": path, "error": "unparsable body"})
            self.send_json(400, {"error": {"message": "unparsable JSON"}})
            return
        model = body.get("model", "scripted")
        entry = {"method": "POST", "path": path}
        if path.endswith("/messages/count_tokens"):
            log(dict(entry, api="anthropic", tools=anthropic_tools(body), body=body))
            self.send_json(200, {"input_tokens": 10})
        elif path.endswith("/messages"):
            tools = anthropic_tools(body)
            action = next_action(tools, anthropic_history(body))
            log(dict(entry, api="anthropic", tools=tools, answer=summary(action), body=body))
            message = anthropic_reply(action, model)
            if body.get("stream"):
                self.send_events(anthropic_events(message))
            else:
                self.send_json(200, message)
        elif path.endswith("/responses"):
            offered = responses_tools(body)
            tools = list(offered)
            action = next_action(tools, responses_history(body))
            log(dict(entry, api="responses", tools=tools, answer=summary(action), body=body))
            items = responses_items(action, offered)
            if body.get("stream"):
                self.send_events(responses_events(items, model))
            else:
                self.send_json(200, response_object(items, model, "completed"))
        else:
            log(dict(entry, error="no route", body=body))
            self.send_json(404, {"error": {"message": f"no route {path}"}})

    def send_json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events):
        data = "".join(f"event: {name}\ndata: {json.dumps(value)}\n\n" for name, value in events).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def summary(action):
    if action[0] == "call":
        return {"call": action[1], "arguments": action[2]}
    return {"text": action[1]}


def log(entry):
    with LOG_LOCK, open(ARGS.log, "a") as f:
        f.write(json.dumps(dict(entry, at=round(time.time(), 3))) + "\n")


def main():
    global ARGS
    ARGS = parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    host, port = server.server_address
    print(f"listening on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
