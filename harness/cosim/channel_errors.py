"""What a transport reports to the Coordinator, which turns it into an EngineError with the stderr tail."""


class ChannelError(Exception):
    """A message could not be handed to an engine."""


class BadMessage(Exception):
    """An engine wrote bytes that are not a message (the channel is unusable after this)."""

    def __init__(self, idx: int, reason: str):
        super().__init__(reason)
        self.idx = idx
        self.reason = reason
