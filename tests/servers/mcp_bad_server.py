"""An MCP server (the SDK's low-level Server, over stdio) that offers what a careless or hostile server
might: tool names providers refuse, input schemas with $ref loops, a $ref pointing nowhere, a result of
20 MB; beside them good tools, a recursive but sane schema among them, that must keep working."""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

OBJ = {"type": "object", "properties": {"text": {"type": "string"}}}
LOOP = {"type": "object", "properties": {"x": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"allOf": [{"$ref": "#/$defs/A"}]}}}
SELF = {"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}}
DANGLING = {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}}
TREE = {"type": "object", "properties": {"node": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"name": {"type": "string"},
                                                             "children": {"type": "array",
                                                                          "items": {"$ref": "#/$defs/Node"}}}}}}
BIG = 20 * 1024 * 1024

TOOLS = {
    "echo": OBJ, "tree_size": TREE, "huge": OBJ,
    "looped": LOOP, "self_ref": SELF, "dangling": DANGLING,
    "two words": OBJ, "line\nbreak": OBJ, "": OBJ, "x" * 300: OBJ, "dotted.name": OBJ,
}


def _count(node: dict) -> int:
    return 1 + sum(_count(c) for c in node.get("children", []))


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(name=name, description=f"tool {name[:20]!r}", input_schema=schema)
                                        for name, schema in TOOLS.items()])


async def call_tool(ctx, params) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "huge":
        text = "y" * BIG
    elif params.name == "tree_size":
        text = str(_count(args["node"]))
    else:
        text = str(args.get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("agio-bad", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
