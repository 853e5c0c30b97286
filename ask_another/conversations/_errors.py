"""The failures of conversations, each with a message that says what to do next."""

from __future__ import annotations

from ask_another.errors import AskAnotherError, InvalidArgument

__all__ = [
    "ArticleUnreadable",
    "ConversationBusy",
    "ConversationError",
    "ConversationModelMismatch",
    "NoSuchConversation",
]


class ConversationError(AskAnotherError):
    """A conversation could not take this turn."""


class NoSuchConversation(ConversationError):
    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(
            f"No conversation has the id {conversation_id!r}. Use the conversation_id printed "
            "at the end of an earlier answer, or leave conversation_id empty to start a new "
            "conversation"
        )


class ConversationBusy(ConversationError):
    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(
            f"Conversation {conversation_id} is busy: the model is still answering an earlier "
            "message in it. Wait for that answer, then send this message again (or leave "
            "conversation_id empty to ask in a new conversation)"
        )


class ConversationModelMismatch(ConversationError, InvalidArgument):
    """A conversation is bound to the model it started with."""

    def __init__(self, conversation_id: str, bound: str, asked: str) -> None:
        self.conversation_id = conversation_id
        self.bound = bound
        self.asked = asked
        super().__init__(
            f"Conversation {conversation_id} is with {bound}, not {asked}: a conversation stays "
            f"with the model it started with. Continue it with model {bound!r}, or leave "
            f"conversation_id empty to start a new conversation with {asked}"
        )


class ArticleUnreadable(ConversationError):
    """`discuss` could not fetch the article; nothing was stored."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"{reason.rstrip('.')}. Nothing was sent to the model or stored")
