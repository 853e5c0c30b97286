"""Conversations: threads with one model whose history, tool exchanges included, is replayed.

`Conversations` takes turns (`turn`, `discuss`); each conversation is a `Conversation` actor
under the runtime's `conversations` supervisor (`conversations_spec`), its history in the store.
`build_history` is the one function that turns stored messages into the model's `messages`,
replaying tool calls and their results. See docs/conversations.md.
"""

from ._actor import IDLE_SECONDS as IDLE_SECONDS
from ._actor import Conversation as Conversation
from ._actor import TurnOutcome as TurnOutcome
from ._actor import conversation_name as conversation_name
from ._actor import conversations_spec as conversations_spec
from ._conversations import DISCUSS_PROMPT as DISCUSS_PROMPT
from ._conversations import Conversations as Conversations
from ._conversations import allowed_conversation as allowed_conversation
from ._errors import ArticleUnreadable as ArticleUnreadable
from ._errors import ConversationBusy as ConversationBusy
from ._errors import ConversationError as ConversationError
from ._errors import ConversationModelMismatch as ConversationModelMismatch
from ._errors import NoSuchConversation as NoSuchConversation
from ._history import build_history as build_history
from ._history import new_call_id as new_call_id
from ._history import tool_exchange as tool_exchange

__all__ = [
    "DISCUSS_PROMPT",
    "IDLE_SECONDS",
    "ArticleUnreadable",
    "Conversation",
    "ConversationBusy",
    "ConversationError",
    "ConversationModelMismatch",
    "Conversations",
    "NoSuchConversation",
    "TurnOutcome",
    "allowed_conversation",
    "build_history",
    "conversation_name",
    "conversations_spec",
    "new_call_id",
    "tool_exchange",
]
