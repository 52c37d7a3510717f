from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("notes")
notes: list[str] = []


@server.tool()
def add_note(text: str) -> str:
    """Remember a note.

    Args:
        text: the note
    """
    notes.append(text)
    return f"{len(notes)} notes"


@server.tool()
def list_notes() -> str:
    """All notes, one per line."""
    if not notes:
        raise ToolError("there are no notes yet")  # a failure the model should read
    return "\n".join(notes)


if __name__ == "__main__":
    server.run("stdio")
