"""Validate server notifications as a Python SDK 1.x client does, one JSON object a line.

Run by tests/ask_another/server/test_task_status_types.py with the Python of a throwaway
environment holding mcp 1.x (the pydantic types fastmcp 3 and other 1.x clients use):

    python sdk1_notifications.py FILE

A 1.x `ClientSession` validates every incoming notification as `ServerNotification` and drops
(with a logged warning) one that fails. Prints one JSON line: how many were read, the method of
each as the union parsed it, and the errors of those refused.
"""

import json
import sys

from mcp.types import ServerNotification
from pydantic import ValidationError


def main(path: str) -> dict[str, object]:
    parsed: list[str] = []
    refused: list[str] = []
    with open(path, encoding="utf-8") as file:
        for line in file:
            message = json.loads(line)
            message.pop("jsonrpc", None)
            try:
                notification = ServerNotification.model_validate(message)
            except ValidationError as exc:
                refused.append(f"{message.get('method')}: {exc.errors()[:3]}")
                continue
            parsed.append(type(notification.root).__name__)
    return {"read": len(parsed) + len(refused), "parsed": parsed, "refused": refused}


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1])) + "\n")
