"""An MCP client made with the official Python SDK (`mcp` from PyPI), for tests/expose.rs.

`python mcp_client.py URL CODE TOOL ARGS_JSON`: connects to URL (streamable HTTP) with
`Authorization: Bearer CODE`, prints the tools' names as one JSON line, calls TOOL with the
arguments, and prints the result as one JSON line ({"isError": …, "text": …}).
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, code: str, tool: str, args: str) -> None:
    headers = {"Authorization": f"Bearer {code}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                tools = await session.list_tools()
                print(json.dumps({"tools": [t.name for t in tools.tools]}), flush=True)
                result = await session.call_tool(tool, json.loads(args))
                text = "".join(getattr(block, "text", "") for block in result.content)
                print(json.dumps({"isError": bool(result.is_error), "text": text}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
