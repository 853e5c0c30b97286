"""Permission-gated tool calls, modelled on Mead's `Router.Interaction` behaviour.

See docs/interaction.md for the lifecycle and an embedding example.
"""

from ask_another.interaction.protocol import CallHandle as CallHandle
from ask_another.interaction.protocol import Interaction as Interaction
from ask_another.interaction.protocol import valid as valid
from ask_another.interaction.tools import Tool as Tool
from ask_another.interaction.tools import ToolCall as ToolCall
from ask_another.interaction.tools import ToolRegistry as ToolRegistry
from ask_another.interaction.tools import ToolRegistryError as ToolRegistryError
from ask_another.interaction.types import ALLOW as ALLOW
from ask_another.interaction.types import Allow as Allow
from ask_another.interaction.types import Choice as Choice
from ask_another.interaction.types import ChoiceFailed as ChoiceFailed
from ask_another.interaction.types import ChoiceOption as ChoiceOption
from ask_another.interaction.types import Decision as Decision
from ask_another.interaction.types import Deny as Deny
from ask_another.interaction.types import PermissionRequest as PermissionRequest
from ask_another.interaction.types import Question as Question
from ask_another.interaction.types import SpendRequest as SpendRequest
from ask_another.interaction.types import ToolUpdate as ToolUpdate
from ask_another.policy import Policy as Policy
from ask_another.policy import PolicyError as PolicyError

__all__ = [
    "ALLOW",
    "Allow",
    "CallHandle",
    "Choice",
    "ChoiceFailed",
    "ChoiceOption",
    "Decision",
    "Deny",
    "Interaction",
    "PermissionRequest",
    "Policy",
    "PolicyError",
    "Question",
    "SpendRequest",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "ToolRegistryError",
    "ToolUpdate",
    "valid",
]
