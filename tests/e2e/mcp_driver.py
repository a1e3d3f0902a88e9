"""An MCP client made with the official Python SDK (`mcp` from PyPI), driven by tests/e2e/scenarios.mjs
and crates/tether-server/tests/expose.rs.

`python mcp_driver.py URL CODE` connects to URL (streamable HTTP) with `Authorization: Bearer CODE`,
then answers one JSON command per line on stdin with one JSON line on stdout:

- `{"op": "list"}` gives `{"tools": [{"name", "readOnly", "destructive", "risk"}, ...]}`;
- `{"op": "call", "tool": NAME, "args": {...}}` gives `{"isError": bool, "text": "..."}`.

Each `notifications/tools/list_changed` is printed as `{"event": "tools/list_changed"}` when it
arrives. A failure prints `{"error": "..."}` and exits with status 1; end of input ends it.
"""

import json
import sys

import anyio
import httpx2
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client


def say(line: dict) -> None:
    print(json.dumps(line), flush=True)


async def on_message(message) -> None:
    if isinstance(message, types.ToolListChangedNotification):
        say({"event": "tools/list_changed"})


async def answer(session: ClientSession, command: dict) -> dict:
    if command["op"] == "list":
        listed = await session.list_tools()
        tools = []
        for tool in listed.tools:
            hints = tool.annotations
            tools.append({
                "name": tool.name,
                "readOnly": bool(hints and hints.read_only_hint),
                "destructive": bool(hints and hints.destructive_hint),
                "risk": (tool.meta or {}).get("tether/risk"),
            })
        return {"tools": tools}
    if command["op"] == "call":
        result = await session.call_tool(command["tool"], command.get("args", {}))
        text = "".join(getattr(block, "text", "") for block in result.content)
        return {"isError": bool(result.is_error), "text": text}
    return {"error": f"unknown op {command['op']!r}"}


async def main(url: str, code: str) -> None:
    headers = {"Authorization": f"Bearer {code}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1], message_handler=on_message) as session:
                await session.initialize()
                say({"ready": True})
                while line := await anyio.to_thread.run_sync(sys.stdin.readline):
                    say(await answer(session, json.loads(line)))


if __name__ == "__main__":
    try:
        anyio.run(main, *sys.argv[1:3])
    except BaseException as error:  # noqa: BLE001 - the test reads the reason
        if not isinstance(error, (KeyboardInterrupt, SystemExit)):
            say({"error": repr(error)})
            sys.exit(1)
